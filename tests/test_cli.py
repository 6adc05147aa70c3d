"""The ``labkit`` command: help, version, usage errors, ``labkit lab``, ``demo --serve``.

Each test ends every process it started by its pid (and what those started),
and keeps Jupyter's folders in its own temporary folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from labkit import cli
from tests.conftest import ROOT
from tests.helpers import port_is_free
from tests.views.jupyterlab import (
    descendants,
    end_processes,
    isolated_env,
    start_server,
    stop_server,
)

LABKIT = [sys.executable, "-m", "labkit"]
NOTEBOOK = "01-parallel-flows.ipynb"


def _labkit_command() -> list[str]:
    """The installed ``labkit`` entry point beside this Python, else ``python -m labkit``."""
    script = Path(sys.executable).with_name("labkit")
    return [str(script)] if script.exists() else LABKIT


# -- help ------------------------------------------------------------------------------


@pytest.mark.parametrize("command, names", [
    ([], ["demo", "dashboard", "lab", "COMMAND --help"]),
    (["demo"], ["--workers", "--chunk-size", "--serve", "SIGTERM"]),
    (["dashboard"], ["--scheduler", "--port", "--allow-websocket-origin"]),
    (["lab"], ["--port", "--no-browser", "--notebooks", "JUPYTER_ARGS", "notebooks/"]),
])
def test_help_names_the_options(command, names):
    proc = subprocess.run([*_labkit_command(), *command, "--help"], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: labkit")
    for name in names:
        assert name in proc.stdout, f"{name!r} not in:\n{proc.stdout}"


def test_a_bare_labkit_prints_the_help_and_exits_0(capsys):
    # as pip does: nothing asked for is not an error; the help says what there is
    assert cli.main([]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: labkit") and err == ""
    for name in ("demo", "dashboard", "lab", "--version", "COMMAND --help"):
        assert name in out, f"{name!r} not in:\n{out}"


def _pyproject_version() -> str:
    import tomllib
    return tomllib.loads(Path(ROOT, "pyproject.toml").read_text())["project"]["version"]


def test_version_is_the_one_in_pyproject(capsys):
    import labkit
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == f"labkit {_pyproject_version()}\n"
    # labkit.__version__ is the fallback of a checkout that is not installed: keep it equal
    assert labkit.__version__ == _pyproject_version()


def test_version_falls_back_to_the_package_attribute(monkeypatch, capsys):
    from importlib import metadata

    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    monkeypatch.setattr("labkit.__version__", "9.9.9")
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == "labkit 9.9.9\n"


def test_python_m_labkit_version():
    proc = subprocess.run([*LABKIT, "--version"], capture_output=True, text=True, timeout=60,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"labkit {_pyproject_version()}\n"


@pytest.mark.parametrize("argv, prog, bad", [
    (["demo", "--bogus"], "labkit demo", "--bogus"),
    (["demo", "--workers", "2", "--bogus=3"], "labkit demo", "--bogus=3"),
    (["demo", "extra"], "labkit demo", "extra"),
    (["dashboard", "--scheduler", "tcp://127.0.0.1:1", "--bogus"], "labkit dashboard", "--bogus"),
    (["--bogus"], "labkit", "--bogus"),
    (["--bogus", "demo"], "labkit", "--bogus"),     # before the command: the top level's
])
def test_a_bad_option_prints_its_commands_usage(argv, prog, bad, capsys):
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    first, *_, last = err.strip().splitlines()
    assert first.startswith(f"usage: {prog} [-h]"), err       # that parser's usage, no other
    assert last == f"{prog}: error: unrecognized arguments: {bad}"


def test_a_commands_missing_argument_prints_its_usage(capsys):
    assert cli.main(["dashboard"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: labkit dashboard ")
    assert "one of the arguments --scheduler --store is required" in err


# -- labkit lab ------------------------------------------------------------------------


def test_lab_arguments_are_split_and_passed_on_in_order():
    ours, theirs = cli._split_lab_args(
        ["--port", "9", "--IdentityProvider.token=t", "--no-browser", "--ServerApp.x", "y",
         "--notebooks=/nb", "--", "--port", "7"])
    assert ours == ["--port", "9", "--no-browser", "--notebooks=/nb"]
    assert theirs == ["--IdentityProvider.token=t", "--ServerApp.x", "y", "--port", "7"]


def test_lab_command_binds_loopback_unless_told_otherwise():
    cmd = cli.lab_command(Path("/nb"), port=9999, no_browser=True)
    assert cmd[:3] == [sys.executable, "-m", "jupyterlab"]
    assert {"--ServerApp.root_dir=/nb", "--ServerApp.ip=127.0.0.1", "--ServerApp.port=9999",
            "--ServerApp.open_browser=False"} <= set(cmd)
    # JupyterLab refuses a setting given twice: the user's replaces labkit's
    cmd = cli.lab_command(Path("/nb"), jupyter_args=["--ip=0.0.0.0"])
    assert "--ServerApp.ip=127.0.0.1" not in cmd and cmd[-1] == "--ip=0.0.0.0"


def test_lab_without_a_notebooks_folder_is_an_error(tmp_path):
    missing = tmp_path / "no-such-folder"
    proc = subprocess.run([*LABKIT, "lab", "--no-browser", "--notebooks", str(missing)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2
    assert f"no notebooks folder at {missing}" in proc.stderr
    assert "--notebooks DIR" in proc.stderr


def test_lab_says_what_to_do_when_the_package_has_no_notebooks(tmp_path, monkeypatch, capsys):
    # as in an installed wheel: nothing beside the package
    monkeypatch.setattr(cli, "default_notebooks", lambda: tmp_path / "notebooks")
    assert cli.main(["lab", "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert "no notebooks folder at" in err and "wheel" in err and "--notebooks DIR" in err


def test_the_default_notebooks_folder_is_the_repository_one():
    assert cli.default_notebooks() == Path(ROOT, "notebooks").resolve()


def _contents(port: int, token: str) -> list[str]:
    url = f"http://127.0.0.1:{port}/api/contents?token={token}"
    with urllib.request.urlopen(url, timeout=5) as response:
        return [item["name"] for item in json.load(response)["content"]]


@pytest.mark.timeout(180)
def test_lab_serves_the_notebooks_on_loopback(tmp_path):
    token = secrets.token_hex(16)
    log_path = tmp_path / "lab.log"
    # --port 0: JupyterLab binds a port the system gives it; its port is read from it
    command = [*LABKIT, "lab", "--no-browser", "--port", "0",
               # passed on to JupyterLab as they are (root needs --allow-root; offline: no news)
               "--allow-root", f"--IdentityProvider.token={token}", "--LabApp.news_url=",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
               "--LabApp.extension_manager=readonly", "--ServerApp.port_retries=0"]
    proc, port = start_server(command, str(tmp_path), isolated_env(str(tmp_path / "jupyter")),
                              str(log_path), timeout=120)
    try:
        names, deadline = None, time.monotonic() + 120
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"exited with {proc.returncode}:\n{log_path.read_text()}"
            with contextlib.suppress(urllib.error.URLError, ConnectionError, OSError):
                names = _contents(port, token)
                break
            time.sleep(0.3)
        assert names is not None, f"no answer on port {port}:\n{log_path.read_text()[-3000:]}"
        assert NOTEBOOK in names                       # the root is notebooks/
        # the labkit process became JupyterLab (exec): the same pid
        assert "jupyterlab" in " ".join(psutil.Process(proc.pid).cmdline())
        # only on loopback: the port is not open on another address of this machine
        for address in _other_addresses():
            with pytest.raises(OSError):
                urllib.request.urlopen(f"http://{address}:{port}/api/status", timeout=2)
    finally:
        stop_server(proc)                               # by its pid, then what it started
    assert proc.poll() is not None
    assert port_is_free(port)
    assert f"labkit lab: JupyterLab on {Path(ROOT, 'notebooks').resolve()}" in log_path.read_text()


def _other_addresses() -> list[str]:
    """This machine's IPv4 addresses outside 127.0.0.0/8 (none on some sandboxes)."""
    import socket
    return [a.address for addrs in psutil.net_if_addrs().values() for a in addrs
            if a.family == socket.AF_INET and not a.address.startswith("127.")][:2]


# -- labkit demo --serve ---------------------------------------------------------------


class _Lines:
    """Reads a process's standard output in a thread; waits for lines by prefix."""

    def __init__(self, stream):
        self.lines: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream):
        for line in stream:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line {prefix!r} in {timeout:.0f} s:\n"
                                     + "\n".join(self.lines)) from None
            if line is None:
                raise AssertionError(f"output ended without {prefix!r}:\n"
                                     + "\n".join(self.lines))
            self.lines.append(line)
            if line.startswith(prefix):
                return line

    def rest(self, timeout: float = 10) -> list[str]:
        """The remaining lines, once the stream is closed."""
        self._thread.join(timeout)
        while not self._queue.empty():
            line = self._queue.get()
            if line is not None:
                self.lines.append(line)
        return self.lines


class _Demo:
    """A ``labkit demo --serve`` process, its stdout lines and its worker processes."""

    def __init__(self, proc, lines, err_path):
        self.proc, self.lines, self.err_path = proc, lines, err_path
        self.children: list = []
        self.out = ""

    def stop(self, sig, timeout: float) -> None:
        """Send ``sig``, expect exit 0, and every worker process gone."""
        self.proc.send_signal(sig)                              # to this pid only
        assert self.proc.wait(timeout=timeout) == 0, self.err_path.read_text()[-3000:]
        self.out = "\n".join(self.lines.rest())
        _, alive = psutil.wait_procs(self.children, timeout=10)
        assert not alive, f"left behind: {alive}"


@contextlib.contextmanager
def _demo_serve(tmp_path, chunk_size: int, mode: str = "auto"):
    """Start ``labkit demo --serve``; end it and its workers by pid whatever happens."""
    err_path = tmp_path / "stderr.log"
    with open(err_path, "w") as err:
        proc = subprocess.Popen([*LABKIT, "demo", "--serve", "--chunk-size", str(chunk_size),
                                 "--mode", mode],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=err,
                                stdin=subprocess.DEVNULL, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    demo = _Demo(proc, _Lines(proc.stdout), err_path)
    try:
        yield demo
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        end_processes([c for c in demo.children if c.is_running()])
        proc.stdout.close()


@pytest.mark.timeout(240)
def test_demo_serve_keeps_the_dashboard_until_sigint(tmp_path):
    # worker processes, so that their ending is checked too
    with _demo_serve(tmp_path, 300, mode="processes") as demo:
        url = demo.lines.wait_for("labkit dashboard: http", 120).split(": ", 1)[1]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/labkit")
        demo.lines.wait_for("labkit dashboard: serving", 120)   # trained and reported
        with urllib.request.urlopen(url, timeout=20) as response:
            assert response.status == 200
            html = response.read().decode()
        assert "bokeh" in html.lower() and "/static/js/bokeh.min.js" in html
        demo.children = descendants(demo.proc.pid)              # the Dask worker processes
        assert len([c for c in demo.children
                    if "resource_tracker" not in " ".join(c.cmdline())]) >= 2
        demo.stop(signal.SIGINT, timeout=20)                    # Ctrl-C
    assert "test accuracy" in demo.out and "labkit dashboard: stopping" in demo.out
    port = int(url.split(":")[2].split("/")[0])
    assert port_is_free(port)


@pytest.mark.timeout(240)
def test_demo_serve_stops_cleanly_on_sigterm_during_training(tmp_path):
    """A signal while it trains lets the run finish (no task in flight), then it stops."""
    with _demo_serve(tmp_path, 20) as demo:
        demo.lines.wait_for("labkit dashboard: http", 120)      # the cluster is up, training starts
        demo.children = descendants(demo.proc.pid)
        demo.stop(signal.SIGTERM, timeout=120)
    out = demo.out
    assert "test accuracy" in out and "labkit dashboard: stopping" in out
    # usually it was still training; on a slow machine it may have been serving already
    assert "SIGTERM during the run: not serving" in out or "labkit dashboard: serving" in out
    assert "Traceback" not in demo.err_path.read_text()
