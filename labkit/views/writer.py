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

:data:`CPU_SHARE` bounds what drawing may cost: after each draw the view
waits long enough that its drawing uses at most that share of one core (a
draw of 20 ms waits 1 s at 2%), so under full load views draw less often
instead of slowing the work; when drawing is cheap the rate is
:data:`MAX_RATE`, and a view draws at least every :data:`MAX_GAP` seconds
while things change.  :class:`Pacer` does the sums for every view.

The writer's thread runs at a low OS priority (:mod:`.priority`), so that drawing
takes only the CPU the work leaves.  On a machine loaded by other programs that
starves the view: a draw of 20 ms took 0.8 s, and the board trailed its run by
seconds.  So a view that fell behind (its oldest change not yet drawn waited more
than :data:`CATCH_UP` seconds, on the kernel's clock) draws at the priority of the
thread that made it, on a second thread kept for that, and its next draws go back
to the low priority once it has caught up; the CPU share above still bounds what
drawing costs.

Examples
--------
>>> from labkit.views.trackers.tracker import Tracker
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
import queue
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from ..constraints import Interval, check_argument
from .priority import lower_this_thread

__all__ = [
    "Writer",
    "Pacer",
    "MAX_RATE",
    "CPU_SHARE",
    "MAX_GAP",
    "CATCH_UP",
    "check_rate",
    "settled",
]

logger = logging.getLogger("labkit.views")

_ids = itertools.count()

#: Most redraws a second of every labkit view.
MAX_RATE = 4.0

#: Most of one core a view's drawing may use (its CPU time over wall time).  With draws of
#: 5-10 ms this is the 4 frames a second of MAX_RATE; a costlier draw waits longer.
CPU_SHARE = 0.02


#: What ``max_rate`` may be, declared once (:mod:`labkit.constraints`).
RATE_RULES = [Interval(float, 0, closed="neither", name="a positive number of redraws a second")]


def check_rate(max_rate: float | None) -> float:
    """``max_rate`` (``MAX_RATE`` for None) if it is a positive number, else an InputError.

    Views check it before they subscribe to anything, so a refused view leaves
    nothing listening.
    """
    if max_rate is None:
        return MAX_RATE
    return float(check_argument("max_rate", max_rate, RATE_RULES))


def state_every() -> float:
    """Seconds between the node states a view asks the engine for: every second redraw."""
    return 2.0 / MAX_RATE


#: Longest wait between two draws while something changes, whatever drawing costs: a view
#: never trails its source by more than this and one draw (the 0.5 s lag of issue 29).
MAX_GAP = 0.5


#: A view whose oldest change not yet drawn waited longer than this (s) when a draw begins
#: is behind: it draws at its maker's priority until it has caught up.  A view that keeps
#: pace draws every 0.25 s (at most MAX_GAP), so a longer wait means its thread was starved
#: (under load 24, a first draw at the low priority began 0.8 s late and took 1.8 s).
CATCH_UP = MAX_GAP


class Pacer:
    """When a view may draw next: at most ``MAX_RATE`` a second and ``CPU_SHARE`` of a core.

    The cost is a running (exponential) average of the draws' CPU time, so one
    expensive first draw does not stall the view; a view draws at least every
    :data:`MAX_GAP` seconds however costly its draws.

    Examples
    --------
    >>> p = Pacer(max_rate=4, cpu_share=0.02)
    >>> p.gap_after(0.001)      # cheap draws: the rate limit
    0.25
    >>> round(p.gap_after(0.02), 3)  # a 20 ms draw raises the average: a longer wait
    0.335
    >>> p.gap_after(1.0)             # never longer than MAX_GAP
    0.5
    """

    def __init__(
        self, max_rate: float | None = None, cpu_share: float | None = None, smoothing: float = 0.3
    ):
        self.max_rate = MAX_RATE if max_rate is None else max_rate
        self.cpu_share = CPU_SHARE if cpu_share is None else cpu_share
        self.smoothing = smoothing
        self.cost: float | None = None  # average CPU seconds of a draw

    def gap_after(self, cpu_seconds: float) -> float:
        """Seconds to wait after a draw that took ``cpu_seconds`` of CPU."""
        if self.cost is None:
            self.cost = cpu_seconds
        else:
            self.cost += self.smoothing * (cpu_seconds - self.cost)
        return min(MAX_GAP, max(1.0 / self.max_rate, self.cost / self.cpu_share))

    def timed(self, fn, *args) -> float:
        """Call ``fn(*args)`` in this thread; the gap to wait after it."""
        start = time.thread_time()
        try:
            fn(*args)
        finally:
            cost = time.thread_time() - start
        return self.gap_after(cost)


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

    A ``tracker`` with ``behind()`` (the seconds its oldest change not yet drawn
    has waited, or None) lets the writer catch up: past :data:`CATCH_UP` it draws
    on a second thread, at the priority of the thread that made the writer.
    """

    def __init__(
        self,
        tracker,
        draw: Callable[[Any], Any],
        max_rate: float | None = None,
        heartbeat: float | None = None,
        name: str | None = None,
    ):
        max_rate = check_rate(max_rate)
        self.tracker, self._draw, self.max_rate = tracker, draw, max_rate
        self.heartbeat = heartbeat
        self.draws = 0  # how many times draw was called
        self._pacer = Pacer(max_rate)
        self._gap = 1.0 / max_rate  # after the last draw: rate and CPU share
        self._wake = threading.Event()  # set by poke(): something may have changed
        self._urgent = threading.Event()  # a forced poke or stop: cut the pacing wait short
        self._stopping = threading.Event()
        self._force = False  # draw on the next wake even if the version is the same
        self._drawn: int | None = None  # the version last drawn
        self._drawing = False  # a draw is under way (its messages not all sent)
        name = name or f"labkit-writer-{next(_ids)}"
        self.catch_ups = 0  # draws made on the catch-up thread (the view was behind)
        # made here, by the maker's thread, so it keeps the maker's priority
        self._catch_up = _CatchUp(f"{name}-catch-up") if _can_tell_lag(tracker) else None
        self._thread = threading.Thread(target=self._main, daemon=True, name=name)
        self._thread.start()
        _WRITERS.add(self)

    # -- for subscribers -------------------------------------------------------------

    def poke(self, force: bool = False) -> None:
        """Wake the writer; ``force`` draws even when the tracker's version did not change."""
        if force:
            self._force = True
            self._urgent.set()
        # Set only if not set: setting takes the event's lock and wakes its waiters, and a
        # hundred trial threads poke at once.  The writer clears the flag before it reads the
        # version, so a poke skipped here is drawn by the draw that flag already asked for.
        if not self._wake.is_set():
            self._wake.set()

    def __call__(self, event=None) -> None:
        """Subscribe the writer itself (after the tracker) to be poked by every event."""
        if not self._wake.is_set():
            self._wake.set()

    @property
    def running(self) -> bool:
        """Whether the thread is still going."""
        return self._thread.is_alive()

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called: the next draw is the last."""
        return self._stopping.is_set()

    @property
    def caught_up(self) -> bool:
        """Whether the last draw finished and showed the tracker's current version."""
        return not (self._drawing or self._force) and self._drawn == self.tracker.version

    def stop(self, timeout: float | None = 10.0) -> None:
        """Draw once more and end the thread; waits for it unless called from it."""
        self._stopping.set()
        self._urgent.set()
        self._wake.set()
        here = threading.current_thread()
        # from a draw (on either thread) the writer is waiting for that draw: no join
        if here is not self._thread and not (self._catch_up and self._catch_up.runs_here()):
            self._thread.join(timeout)

    # -- the thread --------------------------------------------------------------------

    def _main(self) -> None:
        """Wait for a poke, draw if anything changed, then hold off for the rate limit."""
        lower_this_thread()  # drawing never takes a core from the work
        while not self._stopping.is_set():
            self._wake.wait(self.heartbeat)
            if self._stopping.is_set():
                break
            beat = not self._wake.is_set()  # woken by the heartbeat, not by a poke
            self._wake.clear()
            self._draw_if_changed(force=beat)
            # Sleep out the rest of the gap; pokes meanwhile just leave the flag set,
            # so a burst of events costs one draw.  stop() or a forced poke (a run's
            # end, a new view) cut the sleep short.
            self._urgent.wait(self._gap)
            self._urgent.clear()
        self._draw_if_changed(force=True)  # the final state, always
        if self._catch_up is not None:
            self._catch_up.close()

    def _draw_if_changed(self, force: bool = False) -> None:
        """One draw when the version moved (or when forced); errors are logged."""
        version = self.tracker.version
        force, self._force = force or self._force, False
        if not force and version == self._drawn:
            return
        if self._catch_up is not None and self._behind():
            self.catch_ups += 1
            self._gap = self._pacer.gap_after(self._catch_up.run(self._draw_once, version))
        else:
            self._gap = self._pacer.timed(self._draw_once, version)

    def _behind(self) -> bool:
        """Whether the oldest change not drawn yet waited longer than :data:`CATCH_UP`."""
        try:
            waited = self.tracker.behind()
        except Exception:  # a view never fails for its clock
            return False
        return waited is not None and waited > CATCH_UP

    def _draw_once(self, version) -> None:
        """Draw one snapshot; errors are logged."""
        self._drawing = True
        try:
            snapshot = self.tracker.snapshot()
            self._drawn = snapshot.version if hasattr(snapshot, "version") else version
            self.draws += 1
            self._draw(snapshot)
        except Exception:  # a view must never die of one bad frame
            logger.exception("labkit writer: draw %r failed", self._draw)
        finally:
            self._drawing = False

    def __repr__(self):
        state = "running" if self.running else "stopped"
        return f"<labkit Writer {self._thread.name}: {state}, {self.draws} draws>"


class _CatchUp:
    """A thread at its maker's priority that draws for a writer that fell behind.

    The writer's own thread runs at a low priority, and on a loaded machine a draw
    there takes many times its CPU time; this one runs as the thread that made the
    writer does.  The writer hands it one draw at a time and waits for it.
    """

    def __init__(self, name: str):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._main, daemon=True, name=name)
        self._thread.start()

    def run(self, fn, *args) -> float:
        """Call ``fn(*args)`` on the catch-up thread and wait; its CPU seconds there."""
        done, spent = threading.Event(), [0.0]
        self._jobs.put((fn, args, done, spent))
        done.wait()
        return spent[0]

    def runs_here(self) -> bool:
        """Whether the caller is the catch-up thread."""
        return threading.current_thread() is self._thread

    def close(self, timeout: float = 10.0) -> None:
        """End the thread (after the draw it may be making) and wait for it."""
        self._jobs.put(None)
        if not self.runs_here():
            self._thread.join(timeout)

    def _main(self) -> None:
        """Run each job handed over, timing its CPU, until closed."""
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, args, done, spent = job
            start = time.thread_time()
            try:
                fn(*args)
            except Exception:  # a draw logs its own errors; this thread must live on
                logger.exception("labkit writer: catch-up draw %r failed", fn)
            finally:
                spent[0] = time.thread_time() - start
                done.set()


def _can_tell_lag(tracker) -> bool:
    """Whether ``tracker`` says how long its oldest change waited (``behind()``)."""
    return callable(getattr(tracker, "behind", None))


_WRITERS: weakref.WeakSet[Writer] = weakref.WeakSet()  # every writer, for settled()


def settled(timeout: float = 30.0) -> bool:
    """Wait until every live view has drawn what it was last told; whether it did in time.

    A view that ended drew its final state already.  For a notebook (or a test)
    that shows a view's final numbers: an event, not a sleep, says they are drawn.
    """
    deadline = time.monotonic() + timeout
    while True:
        behind = [w for w in list(_WRITERS) if w.running and not w.caught_up]
        if not behind:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
