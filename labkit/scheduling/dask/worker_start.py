"""How an embedded cluster starts its worker processes: forked from a server that has
Dask, NumPy and labkit loaded, rather than each a new interpreter.

Dask spawns each worker process by default: a new interpreter that imports Dask,
NumPy and then labkit, about 1 s of CPU a worker and several seconds of wall time on
a loaded machine.  Every worker pays it again when its ``lifetime`` ends and its
nanny restarts it, when an adaptive cluster grows and when a fault replaces one, and
a restart's start is part of what a retired trial waits for (issue 47).  Python's
``forkserver`` start method imports them once, in a server process started on first
use, and forks each worker from it: a worker is up in a fraction of that.

The server is one per process (it ends when its process ends) and is started with
the same preparation a spawned worker gets: the user's script is still imported by
every worker, so the ``if __name__ == "__main__":`` rule is unchanged.  Where the
platform has no ``forkserver`` (Windows), or where a scheduler is given
``start_method="spawn"``, workers are spawned as by Dask.

A cluster whose workers train torch can have the server load more: the environment
variable ``LABKIT_WORKER_PRELOAD`` names modules (comma-separated, e.g. ``torch``) that
every worker forked from it then starts with, instead of each importing them at its
first trial (about 1 s of CPU for torch on this project's machine).  The server is the
process's: set the variable before the first embedded cluster of worker processes starts.

Examples
--------
>>> resolve_start_method("spawn")
'spawn'
>>> resolve_start_method(None) in ("forkserver", "spawn")
True
"""

from __future__ import annotations

import importlib
import importlib.util
import multiprocessing
import os

import dask

from ...errors import InputError

__all__ = [
    "START_METHODS",
    "CONFIG_KEY",
    "PRELOAD_ENV",
    "asked_preload",
    "check_start_method",
    "resolve_start_method",
    "worker_start",
    "preloaded",
]

#: The start methods an embedded cluster's worker processes may have.
START_METHODS = ("forkserver", "spawn")

#: Dask's setting read by a nanny each time it starts its worker process.
CONFIG_KEY = "distributed.worker.multiprocessing-method"

#: What labkit adds to the modules Dask has its fork server load.
LABKIT_PRELOAD = ("labkit",)

#: The environment variable naming further modules for the fork server to load.
PRELOAD_ENV = "LABKIT_WORKER_PRELOAD"


def check_start_method(method: str | None, mode: str) -> None:
    """An ``InputError`` when ``method`` is given for a cluster without worker processes."""
    if method is not None and mode != "processes":
        raise InputError(
            f'start_method={method!r} starts worker processes: give mode="processes"',
            argument="start_method",
        )


def resolve_start_method(method: str | None) -> str:
    """``method``, or by default ``"forkserver"`` where the platform has it, else ``"spawn"``."""
    if method is not None:
        return method
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def asked_preload() -> list[str]:
    """The modules :data:`PRELOAD_ENV` names; an ``InputError`` for one not installed.

    Found without importing them: the client need not load torch to have workers load it.
    """
    names = [name.strip() for name in os.environ.get(PRELOAD_ENV, "").split(",")]
    names = [name for name in names if name]
    for name in names:
        if _spec(name) is None:
            raise InputError(
                f"{PRELOAD_ENV} names {name!r}, which is not installed here: "
                "the workers forked for this cluster could not load it"
            )
    return names


def _spec(name: str):
    """``name``'s import spec, or ``None`` where it (or a package above it) is missing."""
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def preloaded() -> list[str]:
    """The modules the fork server loads: Dask's own choice (``distributed``, its required
    and optional packages that import here), then labkit, then what :data:`PRELOAD_ENV`
    asks for."""
    from distributed.versions import optional_packages, required_packages

    names = ["distributed"]
    for name in [*required_packages, *optional_packages]:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        names.append(name)
    for name in [*LABKIT_PRELOAD, *asked_preload()]:
        if name not in names:
            names.append(name)
    return names


def _ready_fork_server() -> None:
    """Have the fork server (when it starts: the first worker) load labkit besides Dask's list.

    Dask sets the server's list once, on its first look at the forkserver context, and
    never again; labkit's list, set right after, is the one the server starts with.  A
    server already running (an earlier cluster of this process) keeps what it loaded.
    """
    from distributed.utils import get_mp_context

    with dask.config.set({CONFIG_KEY: "forkserver"}):
        context = get_mp_context()
    context.set_forkserver_preload(preloaded())


def worker_start(method: str):
    """A config context, held for the cluster's life, in which its nannies start their
    worker processes by ``method`` (a restart reads it again: it must last)."""
    if method == "forkserver":
        _ready_fork_server()
    return dask.config.set({CONFIG_KEY: method})
