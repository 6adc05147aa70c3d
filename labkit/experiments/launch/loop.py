"""The sweep's loop on the client: keep the slots full, hand on messages, end cleanly.

:func:`drive` runs in the sweep's run (its own thread with ``wait=False``,
the caller's with ``wait=True``).  It starts trials while slots are free,
waits on the engine's inbox (wake-ups when trials end, messages of trials on
worker processes), and returns when no trial is pending or running.

Whatever ends it early (a cancel, the scheduler shut down, Ctrl-C, a store
that cannot be written) winds the sweep down before it is raised: every
running trial is asked to stop (its next report raises ``TrialStopped``),
trials that end within :data:`CANCEL_WAIT` seconds are recorded as they
ended, the others as ``cancelled``, and the store is flushed: it never keeps
a trial ``running`` that is not.  A resumed sweep runs the cancelled and
pending trials again, from their last checkpoints.
"""

from __future__ import annotations

import logging
import queue
import time

__all__ = ["drive", "CANCEL_WAIT"]

logger = logging.getLogger("labkit.experiments")

#: Seconds a cancelled sweep waits for its running trials to stop.
CANCEL_WAIT = 10.0

#: Longest wait on the inbox between two looks at the cancel flag.
TICK = 0.2


def drive(engine, launcher, scope) -> None:
    """Run every trial of ``engine`` with ``launcher``; see the module's docstring."""
    engine.scope, engine.launcher = scope, launcher
    launcher.open(scope)
    try:
        while True:
            launcher.fill()
            engine.searcher.check()  # a search that raised SystemExit ends the sweep, named
            if not engine.active():
                break
            _pump(engine, launcher, TICK)
            launcher.watch_workers()  # a cluster with no worker: the sweep waits, and says so
            scope.check()
            launcher.check()
            engine.store.check()
    except BaseException:
        _wind_down(engine, launcher)
        raise
    finally:
        launcher.close()


def _pump(engine, launcher, timeout: float) -> None:
    """Handle what arrives within ``timeout`` seconds (everything already there at once)."""
    try:
        item = engine.inbox.get(timeout=timeout)
    except queue.Empty:
        item = None
    while item is not None:
        if item[0] != "wake":
            try:
                launcher.handle(item)
            except Exception:  # a malformed message must not end the sweep
                logger.exception("labkit: handling %r of the sweep failed", item[0])
        # (looked at first: an empty inbox is the common case, and a raised Empty costs more)
        item = None if engine.inbox.empty() else _next(engine.inbox)
    launcher.poll()


def _next(inbox: queue.SimpleQueue):
    """The inbox's next item, or None (another reader took it meanwhile)."""
    try:
        return inbox.get_nowait()
    except queue.Empty:
        return None


def _wind_down(engine, launcher) -> None:
    """Stop every running trial, wait a little for them, record the rest as cancelled."""
    engine.cancel()
    deadline = time.monotonic() + CANCEL_WAIT
    while engine.active() and time.monotonic() < deadline:
        try:
            _pump(engine, launcher, TICK)
        except BaseException:  # a second Ctrl-C: stop waiting
            break
    engine.cancel_launched()
    try:
        engine.store.flush()
    except Exception:  # the store's own failure is what is being raised, or will be
        logger.exception("labkit: flushing the sweep store while cancelling failed")
