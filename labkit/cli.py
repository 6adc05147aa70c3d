"""The labkit command: the demo, a cluster's live dashboard, and JupyterLab on the notebooks.

  labkit demo        train a flow in parallel on a local Dask cluster (``--serve``: and keep
                     its live Bokeh dashboard open until Ctrl-C)
  labkit dashboard   serve the live Bokeh dashboard of a running Dask cluster, or of a
                     sweep store (``--store STORE``)
  labkit lab         start JupyterLab on labkit's demo notebooks
  labkit sweeps      list the sweeps of a sweep store (trials by status, the best, when)

``labkit COMMAND --help`` tells more about each, ``labkit --version`` prints the
version, and a bare ``labkit`` prints the help (exit status 0, as pip does). A
bad option of a command prints that command's usage and exits with status 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

import labkit

from .cli_sweeps import run_sweeps, sweeps_parser
from .constraints import Interval, Rule, check_argument
from .demo import run_demo
from .errors import InputError, LabkitError
from .serving import serve_dashboard, serve_demo, serve_store_dashboard

__all__ = [
    "main",
    "version",
    "serve_dashboard",
    "serve_store_dashboard",
    "serve_demo",
    "lab_command",
    "default_notebooks",
    "run_demo_command",
    "run_dashboard",
    "run_lab",
    "run_sweeps",
]


def version() -> str:
    """labkit's version: the installed distribution's (pyproject's), else ``labkit.__version__``."""
    try:
        return metadata.version("labkit")
    except metadata.PackageNotFoundError:  # imported from a checkout that is not installed
        return labkit.__version__  # read when asked: a test may set it


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The ``labkit`` parser, and its commands' parsers by name."""
    parser = argparse.ArgumentParser(
        prog="labkit",
        description="labkit: parallel machine-learning experiments on Dask, "
        "watched live from Jupyter.",
        epilog="Run 'labkit COMMAND --help' for the options of a command.",
        formatter_class=lambda prog: argparse.HelpFormatter(prog, max_help_position=30),
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"labkit {version()}",
        help="print labkit's version and exit",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser, {
        "demo": _demo_parser(commands),
        "dashboard": _dashboard_parser(commands),
        "lab": _lab_parser(commands),
        "sweeps": sweeps_parser(commands),
    }


def _demo_parser(commands: Any) -> argparse.ArgumentParser:
    """``labkit demo``'s parser."""
    demo: argparse.ArgumentParser = commands.add_parser(
        "demo",
        help="train a flow in parallel on a local Dask cluster",
        description="Train PCA -> quadratic expansion -> Gaussian classifier on scikit-learn's "
        "bundled digits, in parallel on labkit's default embedded Dask cluster, "
        "with console progress per phase; then train it serially and report the "
        "test accuracy and the agreement with serial training; then time a "
        "workload where parallel pays off (PCA of a quadratic expansion, 24 "
        "chunks) serially and in parallel and print the speed-up.",
    )
    demo.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="workers of the embedded cluster (default: one, with a thread per core)",
    )
    demo.add_argument(
        "--mode",
        choices=["auto", "threads", "processes"],
        default="auto",
        help="the embedded cluster's kind (default auto: threads in this process, "
        "GIL-holding tasks in processes)",
    )
    demo.add_argument(
        "--chunk-size", type=int, default=150, metavar="ROWS", help="rows per chunk (default 150)"
    )
    demo.add_argument(
        "--serve",
        action="store_true",
        help="also serve the run's live Bokeh dashboard (started before training, "
        "URL printed as 'labkit dashboard: URL') and keep it and the cluster "
        "up after the report, until Ctrl-C (SIGINT) or SIGTERM",
    )
    return demo


def _dashboard_parser(commands: Any) -> argparse.ArgumentParser:
    """``labkit dashboard``'s parser."""
    board: argparse.ArgumentParser = commands.add_parser(
        "dashboard",
        help="serve the live Bokeh dashboard of a Dask cluster, or of a sweep store",
        description="Connect to a running Dask scheduler and serve labkit's Bokeh dashboard "
        "of it (task progress, per-worker load, task stream, sweeps), or serve the boards "
        "of every sweep in a sweep store (live while a sweep writes to it), on 127.0.0.1, "
        "printing 'labkit dashboard: URL', until Ctrl-C (SIGINT) or SIGTERM.",
    )
    what = board.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="address of the Dask scheduler, e.g. tcp://127.0.0.1:8786",
    )
    what.add_argument(
        "--store",
        metavar="STORE",
        help="a sweep store (the SQLite file lk.sweep(..., store=...) writes): its sweeps' boards",
    )
    board.add_argument(
        "--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)"
    )
    board.add_argument(
        "--allow-websocket-origin",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="a further origin whose pages may connect (repeatable)",
    )
    board.add_argument(
        "--reference",
        type=_numbers,
        default=None,
        metavar="X,Y[,...]",
        help="the Pareto view's hypervolume reference point, one number an objective "
        "(default: the worst seen plus a margin)",
    )
    board.add_argument(
        "--connect-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long to wait for the scheduler (default: 10, or LABKIT_CONNECT_TIMEOUT)",
    )
    return board


def _lab_parser(commands: Any) -> argparse.ArgumentParser:
    """``labkit lab``'s parser (JupyterLab's own arguments are split off before it)."""
    lab: argparse.ArgumentParser = commands.add_parser(
        "lab",
        help="start JupyterLab on labkit's demo notebooks",
        usage="labkit lab [-h] [--port N] [--no-browser] [--notebooks DIR] [JUPYTER_ARGS ...]",
        description="Run JupyterLab (python -m jupyterlab) with the notebooks/ folder as its "
        "root, listening on 127.0.0.1. The folder is the one beside the labkit "
        "package (a checkout, or an editable install); an installed wheel has "
        "none, so pass --notebooks DIR there.",
        epilog="Other arguments go to JupyterLab as they are, e.g. --allow-root or "
        "--IdentityProvider.token=TOKEN; everything after '--' does too.",
    )
    lab.add_argument(
        "--port",
        type=int,
        default=None,
        metavar="N",
        help="port on 127.0.0.1 (default: Jupyter's, 8888 or the next free one)",
    )
    lab.add_argument(
        "--no-browser", action="store_true", help="do not open a web browser (print the URL only)"
    )
    lab.add_argument(
        "--notebooks",
        type=Path,
        default=None,
        metavar="DIR",
        help="the folder to serve (default: notebooks/ beside the labkit package)",
    )
    lab.add_argument(
        "jupyter_args", nargs="*", metavar="JUPYTER_ARGS", help="further arguments for JupyterLab"
    )
    return lab


#: What the commands' numbers may be, in the words the command line prints.
POSITIVE = Interval(int, 1, name="positive")
PORT = Interval(int, 0, 65535, name="between 0 and 65535")


def _refused(command: str, **options: tuple[Any, Rule]) -> bool:
    """Print why an option (``flag=(value, rule)``, unset at None) is refused; whether one is."""
    for flag, (value, rule) in options.items():
        if value is None:
            continue
        try:
            check_argument(f"--{flag.replace('_', '-')}", value, [rule], f"labkit {command}")
        except InputError as err:
            print(err.message, file=sys.stderr)
            return True
    return False


# -- labkit lab ------------------------------------------------------------------------

_LAB_OPTIONS = {
    "--port": True,
    "--notebooks": True,
    "--no-browser": False,
    "-h": False,
    "--help": False,
}  # option -> takes a value


def _split_lab_args(args: list[str]) -> tuple[list[str], list[str]]:
    """``labkit lab``'s own options, and the rest (for JupyterLab) in their order."""
    ours: list[str] = []
    theirs: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg == "--":
            theirs.extend(rest)
            break
        name = arg.split("=", 1)[0]
        if name in _LAB_OPTIONS:
            ours.append(arg)
            if _LAB_OPTIONS[name] and "=" not in arg:
                value = next(rest, None)
                if value is not None:  # a missing value: argparse says so
                    ours.append(value)
        else:
            theirs.append(arg)
    return ours, theirs


def default_notebooks() -> Path:
    """``notebooks/`` beside the labkit package (a checkout or an editable install)."""
    return Path(__file__).resolve().parents[1] / "notebooks"


def _given(jupyter_args: Iterable[str], *names: str) -> bool:
    """Whether the user's JupyterLab arguments set one of ``names`` (``--name[=value]``)."""
    return any(arg.split("=", 1)[0] in names for arg in jupyter_args)


def lab_command(
    notebooks: Path,
    port: int | None = None,
    no_browser: bool = False,
    jupyter_args: Iterable[str] = (),
) -> list[str]:
    """The command line that runs JupyterLab on ``notebooks``, on 127.0.0.1.

    JupyterLab refuses a setting given twice, so a setting among ``jupyter_args``
    (e.g. ``--ServerApp.ip=0.0.0.0``) replaces labkit's own.
    """
    extra = list(jupyter_args)
    cmd = [sys.executable, "-m", "jupyterlab"]
    if not _given(extra, "--ServerApp.root_dir", "--notebook-dir", "--ServerApp.notebook_dir"):
        cmd.append(f"--ServerApp.root_dir={notebooks}")
    if not _given(extra, "--ip", "--ServerApp.ip"):
        cmd.append("--ServerApp.ip=127.0.0.1")
    if port is not None and not _given(extra, "--port", "--ServerApp.port"):
        cmd.append(f"--ServerApp.port={port}")
    if no_browser and not _given(extra, "--no-browser", "--ServerApp.open_browser"):
        cmd.append("--ServerApp.open_browser=False")
    return cmd + extra


def run_lab(args: argparse.Namespace) -> int:
    """``labkit lab``: replace this process by JupyterLab (returns only on an error)."""
    if _refused("lab", port=(args.port, PORT)):
        return 2
    notebooks = (args.notebooks or default_notebooks()).expanduser().resolve()
    if not notebooks.is_dir():
        hint = (
            "pass --notebooks DIR"
            if args.notebooks
            else "the demo notebooks come with labkit's repository, not with an installed "
            "wheel: run it from a checkout (pip install -e .) or pass --notebooks DIR"
        )
        print(f"labkit lab: no notebooks folder at {notebooks}; {hint}", file=sys.stderr)
        return 2
    if importlib.util.find_spec("jupyterlab") is None:
        print(
            "labkit lab: JupyterLab is not installed in this environment "
            f"({sys.executable}): pip install jupyterlab",
            file=sys.stderr,
        )
        return 2
    cmd = lab_command(notebooks, args.port, args.no_browser, args.jupyter_args)
    print(f"labkit lab: JupyterLab on {notebooks} (127.0.0.1)", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os.execv(sys.executable, cmd)  # same pid: signals reach JupyterLab itself
    return 1  # not reached


# -- entry point -----------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``labkit`` command; returns the exit status."""
    parsed = _parse(list(sys.argv[1:] if argv is None else argv))
    if isinstance(parsed, int):  # --help, --version, a usage error: printed already
        return parsed
    args, parser = parsed
    if args.command is None:  # a bare `labkit`: what there is to run
        parser.print_help()
        return 0
    if args.command == "sweeps":
        return run_sweeps(args)
    run = {"demo": run_demo_command, "dashboard": run_dashboard, "lab": run_lab}[args.command]
    return run(args)


def _parse(argv: list[str]) -> int | tuple[argparse.Namespace, argparse.ArgumentParser]:
    """``argv`` read, with the top-level parser; an exit status where argparse ended it."""
    parser, commands = _parser()
    jupyter_args: list[str] = []
    if argv and argv[0] == "lab":
        ours, jupyter_args = _split_lab_args(argv[1:])
        argv = ["lab", *ours]
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            # argparse hands a command's unknown options up to the top level, whose usage
            # would not name the command's options: the command's own parser says it
            # (the top level's, for an option before the command)
            owner = commands.get(args.command, parser)
            if (
                owner is not parser
                and unknown[0] in argv
                and argv.index(unknown[0]) < argv.index(args.command)
            ):
                owner = parser
            owner.error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exc:  # --help, --version (0) and usage errors (2), printed already
        return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 2
    if args.command == "lab":
        args.jupyter_args = jupyter_args
    return args, parser


def run_demo_command(args: argparse.Namespace) -> int:
    """``labkit demo`` (``--serve``: and its dashboard until SIGINT or SIGTERM)."""
    if _refused("demo", workers=(args.workers, POSITIVE), chunk_size=(args.chunk_size, POSITIVE)):
        return 2
    try:
        if args.serve:
            if importlib.util.find_spec("bokeh") is None:
                print(
                    "labkit demo: --serve needs Bokeh: pip install 'labkit[views]'",
                    file=sys.stderr,
                )
                return 2
            return serve_demo(args.workers, args.chunk_size, mode=args.mode)
        run_demo(n_workers=args.workers, chunk_size=args.chunk_size, mode=args.mode)
    except KeyboardInterrupt:
        print("labkit demo: interrupted", file=sys.stderr)
        return 130
    return 0


def _numbers(text: str) -> tuple[float, ...] | str:
    """``"1,2.5"`` as numbers; words that are not left as they are (the rule refuses them)."""
    try:
        return tuple(float(part) for part in text.split(","))
    except ValueError:
        return text


def run_dashboard(args: argparse.Namespace) -> int:
    """``labkit dashboard``: serve a cluster's (or a store's) dashboard until SIGINT or SIGTERM."""
    if _refused("dashboard", port=(args.port, PORT)):
        return 2
    if args.reference is not None:
        from .views.bokeh.sweep_pareto import REFERENCE  # Bokeh's: served anyway

        if _refused("dashboard", reference=(args.reference, REFERENCE)):
            return 2
    if args.store is not None:
        from .experiments.store.catalog import store_file

        try:  # as labkit sweeps says it: a missing file or a folder, one line, status 1
            store_file(args.store)
        except LabkitError as exc:
            print(f"labkit dashboard: --store: {exc}", file=sys.stderr)
            return 1
        return serve_store_dashboard(
            args.store, args.port, args.allow_websocket_origin, reference=args.reference
        )
    return serve_dashboard(
        args.scheduler,
        args.port,
        args.allow_websocket_origin,
        connect_timeout=args.connect_timeout,
        reference=args.reference,
    )


if __name__ == "__main__":
    sys.exit(main())
