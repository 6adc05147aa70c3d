"""The writer: one daemon thread that redraws a view from tracker snapshots.

Events may arrive thousands of times a second from the engine's threads; a
view must not send a message per event.  A :class:`Writer` decouples the two:
subscribers only *poke* it (set a :class:`threading.Event`), and its single
thread wakes, takes one snapshot and calls ``draw(snapshot)`` at most
:data:`MAX_RATE` times a second, and only when ``tracker.version`` changed.
Nothing here imports a UI library.

:data:`MAX_RATE` is the one throttle of every labkit view (the board, the
dashboard's sessions, console progress, the runner panel); views ask the
engine for node state (plot arrays) every :func:`state_every` seconds, every
second redraw.  Change it before making a view:
``labkit.views.writer.MAX_RATE = 2``.

Examples
--------
>>> from labkit.views.tracker import Tracker
>>> from labkit.events import TaskInfo, TaskFinished
>>> tracker, seen = Tracker(), []
>>> writer = Writer(tracker, lambda snap: seen.append(snap.version))
>>> tracker(TaskFinished(TaskInfo("r", 0, 0), "w1", 1.0, 2.0)); writer.poke()
>>> writer.stop()
>>> seen[-1] == tracker.version and writer.draws == len(seen)
True
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from typing import Any, Callable

__all__ = ["Writer"]

logger = logging.getLogger("labkit.views")

_ids = itertools.count()

#: Most redraws a second of every labkit view.
MAX_RATE = 4.0


def state_every() -> float:
    """Seconds between the node states a view asks the engine for: every second redraw."""
    return 2.0 / MAX_RATE


class Writer:
    """Calls ``draw(tracker.snapshot())`` from one thread, at most ``max_rate`` times a second.

    Parameters
    ----------
    tracker : Tracker
        Anything with ``snapshot()`` and a ``version`` that changes with it.
    draw : callable
        ``draw(snapshot)``; its exceptions are logged, never raised.
    max_rate : float, optional
        Most draws per second; :data:`MAX_RATE` by default.
    heartbeat : float, optional
        Also draw every ``heartbeat`` seconds while nothing happens (so rates,
        ETAs and a run's status stay current); ``None`` draws on changes only.
    name : str, optional
        The thread's name (it starts with ``labkit-writer``).
    """

    def __init__(self, tracker, draw: Callable[[Any], Any], max_rate: float | None = None,
                 heartbeat: float | None = None, name: str | None = None):
        max_rate = MAX_RATE if max_rate is None else max_rate
        if max_rate <= 0:
            raise ValueError(f"max_rate must be positive, got {max_rate}")
        self.tracker, self._draw, self.max_rate = tracker, draw, max_rate
        self.heartbeat = heartbeat
        self.draws = 0                       # how many times draw was called
        self._gap = 1.0 / max_rate
        self._wake = threading.Event()       # set by poke(): something may have changed
        self._stopping = threading.Event()
        self._force = False                  # draw on the next wake even if the version is the same
        self._drawn: int | None = None       # the version last drawn
        self._thread = threading.Thread(target=self._main, daemon=True,
                                        name=name or f"labkit-writer-{next(_ids)}")
        self._thread.start()

    # -- for subscribers -------------------------------------------------------------

    def poke(self, force: bool = False) -> None:
        """Wake the writer; ``force`` draws even when the tracker's version did not change."""
        if force:
            self._force = True
        self._wake.set()

    def __call__(self, event=None) -> None:
        """Subscribe the writer itself (after the tracker) to be poked by every event."""
        self._wake.set()

    @property
    def running(self) -> bool:
        """Whether the thread is still going."""
        return self._thread.is_alive()

    def stop(self, timeout: float | None = 10.0) -> None:
        """Draw once more and end the thread; waits for it unless called from it."""
        self._stopping.set()
        self._wake.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    # -- the thread --------------------------------------------------------------------

    def _main(self) -> None:
        """Wait for a poke, draw if anything changed, then hold off for the rate limit."""
        while not self._stopping.is_set():
            self._wake.wait(self.heartbeat)
            if self._stopping.is_set():
                break
            beat = not self._wake.is_set()   # woken by the heartbeat, not by a poke
            self._wake.clear()
            self._draw_if_changed(force=beat)
            # Sleep out the rest of the gap; pokes meanwhile just leave the flag set,
            # so a burst of events costs one draw.  stop() cuts the sleep short.
            self._stopping.wait(self._gap)
        self._draw_if_changed(force=True)    # the final state, always

    def _draw_if_changed(self, force: bool = False) -> None:
        """One draw when the version moved (or when forced); errors are logged."""
        version = self.tracker.version
        force, self._force = force or self._force, False
        if not force and version == self._drawn:
            return
        try:
            snapshot = self.tracker.snapshot()
            self._drawn = snapshot.version if hasattr(snapshot, "version") else version
            self.draws += 1
            self._draw(snapshot)
        except Exception:  # a view must never die of one bad frame
            logger.exception("labkit writer: draw %r failed", self._draw)

    def __repr__(self):
        state = "running" if self.running else "stopped"
        return f"<labkit Writer {self._thread.name}: {state}, {self.draws} draws>"
