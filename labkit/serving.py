"""Serving until Ctrl-C: a running cluster's live dashboard, a store's, and the demo's.

What ``labkit dashboard`` (``--scheduler ADDRESS`` or ``--store STORE``) and
``labkit demo --serve`` do once their arguments are read (:mod:`labkit.cli`):
serve, print the URL, and wait for SIGINT or SIGTERM, then shut the cluster
and the dashboard down with no task in flight.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterable
from types import FrameType
from typing import Any, TextIO

from .demo import run_demo
from .errors import InputError, LabkitError
from .scheduling import DaskScheduler

__all__ = ["serve_dashboard", "serve_store_dashboard", "serve_demo"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Stop:
    """SIGINT/SIGTERM handler of ``demo --serve``.

    While serving, a signal ends the wait. Before that (the demo is training, a
    matter of seconds) the first signal lets the run finish and skips serving,
    so the cluster is shut down with no task in flight; a second one interrupts
    at once, like Ctrl-C without labkit.
    """

    def __init__(self) -> None:
        self.event = threading.Event()
        self.waiting = False
        self.early: str | None = None  # the signal that came before serving

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.waiting:
            self.event.set()
        elif not self.event.is_set():
            self.early = signal.Signals(signum).name  # no print here: it could re-enter one
            self.event.set()
        else:
            raise KeyboardInterrupt

    def wait(self) -> None:
        """Wait for a signal."""
        self.waiting = True
        while not self.event.wait(0.5):  # a short wait, so the signal handler gets to run
            pass


def _handle_signals(handler: Any) -> dict[int, Any]:
    """Install ``handler`` for SIGINT and SIGTERM; returns the previous handlers."""
    return {sig: signal.signal(sig, handler) for sig in _SIGNALS}


def _restore_signals(previous: dict[int, Any]) -> None:
    """Put back the handlers :func:`_handle_signals` replaced."""
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def serve_dashboard(
    address: str,
    port: int = 0,
    origins: Iterable[str] = (),
    out: TextIO | None = None,
    connect_timeout: float | None = None,
    reference=None,
) -> int:
    """Serve the dashboard of the cluster at ``address`` until SIGINT or SIGTERM.

    A cluster that cannot be reached, or a port that cannot be served, is one
    line on standard error and exit status 1 (2 for bad arguments), no traceback.
    """
    from .views.bokeh.dashboard import dashboard  # Bokeh's, imported when served

    out = out or sys.stdout
    stop = threading.Event()
    previous = _handle_signals(lambda *_: stop.set())
    try:
        with DaskScheduler(address, connect_timeout=connect_timeout) as scheduler:
            url = dashboard(
                scheduler, port=port, allow_websocket_origin=list(origins), reference=reference
            )
            print(f"labkit dashboard: {url}", file=out, flush=True)
            while not stop.wait(0.5):  # a short wait, so the signal handler gets to run
                pass
            print("labkit dashboard: stopping", file=out, flush=True)
        # leaving the block shuts the scheduler down, which stops the dashboard
    except LabkitError as exc:
        print(f"labkit dashboard: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, InputError) else 1
    finally:
        _restore_signals(previous)
    return 0


def serve_store_dashboard(
    store: str,
    port: int = 0,
    origins: Iterable[str] = (),
    out: TextIO | None = None,
    reference=None,
) -> int:
    """Serve the boards of the sweeps in the store ``store`` until SIGINT or SIGTERM.

    A path that is no sweep store, or a port that cannot be served, is one line
    on standard error naming it and exit status 2 (1 for a store that cannot be
    read), no traceback.
    """
    from .views.bokeh.store_dashboard import store_dashboard  # Bokeh's, imported when served

    out = out or sys.stdout
    stop = threading.Event()
    previous = _handle_signals(lambda *_: stop.set())
    try:
        board = store_dashboard(store, port=port, origins=list(origins), reference=reference)
        try:
            print(f"labkit dashboard: {board.url}", file=out, flush=True)
            while not stop.wait(0.5):  # a short wait, so the signal handler gets to run
                pass
            print("labkit dashboard: stopping", file=out, flush=True)
        finally:
            board.stop()
    except LabkitError as exc:  # a port that cannot be served names --port, not the store
        option = "--port" if "port" in exc.where else "--store"
        print(f"labkit dashboard: {option}: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, InputError) else 1
    finally:
        _restore_signals(previous)
    return 0


def serve_demo(
    n_workers: int | None, chunk_size: int, out: TextIO | None = None, mode: str = "auto"
) -> int:
    """``labkit demo --serve``: the demo, then its dashboard until SIGINT or SIGTERM."""
    out = out or sys.stdout
    stop = _Stop()

    def wait(scheduler: DaskScheduler, url: str) -> None:
        if stop.early:
            print(f"labkit demo: {stop.early} during the run: not serving", file=out)
        else:
            print(
                f"labkit dashboard: serving {url} until Ctrl-C (SIGINT) or SIGTERM",
                file=out,
                flush=True,
            )
            stop.wait()
        print("labkit dashboard: stopping", file=out, flush=True)

    previous = _handle_signals(stop)
    try:
        run_demo(n_workers=n_workers, chunk_size=chunk_size, stream=out, serve=wait, mode=mode)
        # run_demo's scheduler block is left: the cluster and the dashboard are shut down
    finally:
        _restore_signals(previous)
    return 0
