"""The one live loop every view shares: subscribe, pace, ``draw(snapshot)``, stop.

After ``distributed.diagnostics.progressbar``: a :class:`LiveView` subscribes
a :class:`~labkit.views.trackers.tracker.Tracker` (or any snapshot source) to a
scheduler, a run or a trainer, and one :class:`~labkit.views.writer.Writer`
thread calls :meth:`LiveView.draw` with a snapshot, at most
:data:`~labkit.views.writer.MAX_RATE` times a second and within the writer's
share of a core, whatever the event rate.  Renderers only implement
``draw``; they never subscribe, pace or stop themselves.

A view has one state (:class:`State`): ``LIVE`` while it follows, ``ENDING``
once the run it follows has ended (its next draw is the last), ``STOPPED``
after that last draw, ``CLOSED`` once its widgets are gone.  A view of a run
follows that run's events only and ends with it; a view of a scheduler or a
trainer ends when that shuts down (or at :meth:`LiveView.stop`).  The last
draw always happens, so a view keeps the final state: the run's status, load
at zero, no node still training, its plots and errors.

Examples
--------
>>> import labkit as lk
>>> class Count(LiveView):
...     def draw(self, snapshot):
...         self.seen = len(snapshot.phases)
>>> with lk.LocalScheduler() as s:
...     view = Count(s).start()
...     lk.ParallelFlow([lk.nodes.PCA(output_dim=1)]).train([[np.eye(3) + 1]], scheduler=s)
>>> view.state is State.STOPPED and view.seen
1
"""

from __future__ import annotations

import collections
import enum
import itertools
import logging
import threading
import time
import weakref

import numpy as np  # noqa: F401  (used by the doctest)

from ..events import RunFinished, run_of
from ..runs import Run
from .trackers.subjects import check_source
from .trackers.tracker import Tracker
from .writer import Writer, check_rate, state_every

__all__ = ["LiveView", "State", "Frame", "EventClock", "clock_html"]

logger = logging.getLogger("labkit.views")


class State(enum.Enum):
    """Where a live view is in its life."""

    LIVE = "live"  # following its source, drawing as things change
    ENDING = "ending"  # its run ended: the next draw is the last
    STOPPED = "stopped"  # drew its last frame; shows it still
    CLOSED = "closed"  # its widgets (if any) are gone


class Frame(collections.namedtuple("Frame", "oldest newest events drawn")):
    """What one draw showed: the times of the oldest and newest event it was the first to
    show, how many events that was, and when it was drawn (all ``time.time()``).

    ``drawn - oldest`` is the longest an event waited for the view in that frame.
    """

    @property
    def lag(self) -> float | None:
        """Seconds from the oldest new event to the draw (None: no new event)."""
        return None if self.oldest is None else self.drawn - self.oldest


class LiveView:
    """Follows ``source`` and calls :meth:`draw` with its snapshots; subclass and draw.

    Parameters
    ----------
    source : Scheduler, Run or trainer
        What to follow (anything with ``subscribe``).
    max_rate : float, optional
        Most draws a second (:data:`~labkit.views.writer.MAX_RATE`).
    heartbeat : float, optional
        Also draw every so many seconds while nothing happens (rates, ETAs and
        elapsed times stay current); by default 1 s for a run, none otherwise.
    tracker : optional
        What turns events into snapshots: anything callable with an event and
        with ``snapshot()`` and ``version``; a :class:`Tracker` by default.
    """

    #: The writer thread's name.
    thread_name = "labkit-writer"

    def __init__(
        self, source, max_rate: float | None = None, heartbeat: float | None = None, tracker=None
    ):
        check_source(source, f"a {type(self).__name__}")
        self.max_rate = check_rate(max_rate)  # before subscribing: a refusal leaves nothing
        self.source = source
        self._run = source if _is_run(source) else None
        self.heartbeat = heartbeat if heartbeat is not None else (1.0 if self._run else None)
        self.tracker = tracker if tracker is not None else Tracker()
        self.state = State.LIVE
        self.writer: Writer | None = None
        self._lock = threading.Lock()
        self._clock = EventClock()  # which events each snapshot is the first to show
        self.frame: Frame | None = None  # the frame being drawn, then the last
        self.frames: collections.deque = collections.deque(maxlen=2000)  # every frame's timing
        # Listen first: a run is already going, and each moment spent building loses events.
        self._unsubscribe = source.subscribe(self._on_event, state_every=state_every())
        # a scheduler outlives its views: it holds a weak reference, never the view
        ended = weakref.WeakMethod(self._source_ended)
        for s in self.sources:
            if callable(getattr(s, "on_shutdown", None)):
                s.on_shutdown(lambda: _call_if_alive(ended))
        # What ended before the view was made sends no more events nor shutdowns: the
        # view draws its final state once and stops (no writer thread stays behind).
        if self._run is not None and self._run.done():
            self._end()
        elif self._run is None and any(_closed(s) for s in self.sources):
            self._source_ended()

    @property
    def run(self):
        """The run the view follows (None: it follows a scheduler, trainer or program)."""
        return self._run

    @property
    def sources(self) -> list:
        """What the view's source emits through: a run's schedulers and trainers, or itself."""
        return list(self._run.sources) if self._run is not None else [self.source]

    def start(self) -> LiveView:
        """Start drawing (the first frame at once); returns the view."""
        if self.writer is None:
            with self._lock:  # stopped before its first draw: that draw is its last
                if self.state is State.STOPPED and not self.frames:
                    self.state = State.ENDING
            self.writer = Writer(
                _Timed(self.tracker, self._clock),
                self._frame,
                self.max_rate,
                heartbeat=self.heartbeat,
                name=self.thread_name,
            )
        self.writer.poke(force=True)
        return self

    # -- what a renderer implements -------------------------------------------------------

    def draw(self, snapshot) -> None:
        """Draw one snapshot (in the writer thread); the last one has ``self.state`` ENDING."""
        raise NotImplementedError

    def fold(self, event) -> None:
        """Fold one event into the tracker (a view may fold more it derives from it)."""
        self.tracker(event)

    def on_stopped(self) -> None:
        """Called once after the last draw (in the writer thread): tidy what the draw left."""

    # -- events (engine threads) -------------------------------------------------------------

    def _on_event(self, event) -> None:
        """Feed the tracker (a run's view: that run's events only) and wake the writer."""
        if self._run is not None:
            run = run_of(event)
            if run is not None and run != self._run.id:
                return
        self._clock.note(getattr(event, "time", None) or time.time())
        self.fold(event)
        ending = self._run is not None and isinstance(event, RunFinished)
        if ending:
            self._end()
        writer = self.writer
        if writer is not None:  # events before it exists are drawn by its first draw
            writer.poke(force=ending)

    def _source_ended(self) -> None:
        """A scheduler or trainer shut down: a run's view waits for its run, others end."""
        ended = getattr(self.tracker, "source_ended", None)
        if callable(ended):  # no load is shown for what shut down
            ended()
        if self._run is None:
            self.stop()  # its last frame drawn before this returns
        elif self.writer is not None:
            # The run's own thread may be the one shutting down (a scheduler it owns):
            # waiting for the writer here could wait on that very run, so only wake it.
            self.writer.poke(force=True)

    def _end(self) -> None:
        with self._lock:
            if self.state is State.LIVE:
                self.state = State.ENDING

    # -- the writer thread ------------------------------------------------------------------

    def _frame(self, snapshot) -> None:
        """One draw; after the last one, stop listening and end the writer."""
        if self.state is State.ENDING and self._run is not None:
            self._run.wait(5.0)  # RunFinished comes just before the run's thread ends
        oldest, newest, n = self._clock.taken
        self.frame = Frame(oldest, newest, n, time.time())
        try:
            self.draw(snapshot)
        finally:
            self.frames.append(self.frame)
            if self.state is State.ENDING:
                self._finish()

    def _finish(self) -> None:
        with self._lock:
            if self.state is not State.ENDING:
                return
            self.state = State.STOPPED
        self._stop_listening()
        try:
            self.on_stopped()
        except Exception:  # a view never fails its source
            logger.exception("labkit view %r: on_stopped failed", self)
        if self.writer is not None:
            self.writer.stop()

    # -- lifetime -----------------------------------------------------------------------------

    def _stop_listening(self) -> None:
        unsubscribe, self._unsubscribe = self._unsubscribe, None
        if unsubscribe is not None:
            unsubscribe()

    def stop(self) -> None:
        """Stop following the source; the view draws its last frame and keeps showing it."""
        self._end()
        if self.writer is not None and self.writer.running:
            self.writer.poke(force=True)
            self.writer.stop()
        with self._lock:
            if self.state is State.ENDING:  # no writer drew the last frame: nothing to show
                self.state = State.STOPPED
        self._stop_listening()

    @property
    def live(self) -> bool:
        """Whether the view still follows its source."""
        return self.state in (State.LIVE, State.ENDING)

    def __repr__(self):
        what = f"run {self._run.id}" if self._run is not None else type(self.source).__name__
        return f"<labkit {type(self).__name__} of {what}: {self.state.value}>"


def clock_html(frame: Frame | None) -> str:
    """A hidden stamp of ``frame`` for a page to measure the lag by (its ``data-*``).

    ``data-sent`` is now: a view writes the stamp last in its draw, so the page can
    tell the draw's own time from the wire's.
    """
    if frame is None:
        return ""
    oldest = "" if frame.oldest is None else f"{frame.oldest:.3f}"
    newest = "" if frame.newest is None else f"{frame.newest:.3f}"
    return (
        f'<span class="labkit-clock" style="display:none" data-oldest="{oldest}" '
        f'data-newest="{newest}" data-events="{frame.events}" '
        f'data-drawn="{frame.drawn:.3f}" data-sent="{time.time():.3f}"></span>'
    )


class EventClock:
    """Counts the events a view has not drawn yet: the oldest's and newest's time, and how many.

    Taking them (:meth:`take`, just before a snapshot) starts the count afresh and
    keeps them as :attr:`taken`, the events that snapshot is the first to show.

    :meth:`note` takes no lock: it runs on every trial's thread, for every event, often
    under the run's own lock (a run forwards its events holding it), where a second lock
    made a hundred threads queue.  The count is an ``itertools.count`` (``next`` is atomic
    under the GIL: no event is lost to the count); a time noted while a take runs goes to
    that frame or the next, which is all the clock tells.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # between takers only
        self._counter = itertools.count()  # one ``next`` an event, and one a take
        self._counted = 0  # the counter's next value after the last take
        self._oldest: float | None = None
        self._newest: float | None = None
        self.taken: tuple[float | None, float | None, int] = (None, None, 0)

    def note(self, when: float) -> None:
        """One more event, sent at ``when``."""
        if self._oldest is None:
            self._oldest = when
        self._newest = when
        next(self._counter)

    def behind(self) -> float | None:
        """Seconds the oldest event not taken yet has waited (None: none waits)."""
        oldest = self._oldest
        return None if oldest is None else time.time() - oldest

    def take(self) -> None:
        """Move the events counted so far to :attr:`taken`; count from zero again."""
        with self._lock:
            oldest, newest = self._oldest, self._newest
            self._oldest = self._newest = None
            mark = next(self._counter)  # the events noted before this one are taken
            count, self._counted = mark - self._counted, mark + 1
            if count and oldest is None:  # a note raced the take: its time is the newest
                oldest = newest
            self.taken = (oldest, newest, count) if count else (None, None, 0)


class _Timed:
    """The tracker as the writer sees it: taking a snapshot notes which events it first shows
    (the one writer thread takes a snapshot and draws it before taking the next)."""

    def __init__(self, tracker, clock: EventClock):
        self._tracker, self._clock = tracker, clock

    @property
    def version(self) -> int:
        return int(self._tracker.version)

    def behind(self) -> float | None:
        """How long the oldest event not drawn yet has waited (the writer catches up)."""
        return self._clock.behind()

    def snapshot(self):
        self._clock.take()  # before the snapshot: every counted event is in it
        return self._tracker.snapshot()


def _call_if_alive(method: weakref.WeakMethod) -> None:
    """Call a weakly held method unless its object is gone."""
    bound = method()
    if bound is not None:
        bound()


def _closed(source) -> bool:
    """Whether a scheduler or a trainer was shut down (its ``closed``)."""
    return getattr(source, "closed", False) is True


def _is_run(source) -> bool:
    return isinstance(source, Run)
