"""The live comparison board of a sweep: one message a frame, each only what changed.

``SweepBoard(run)`` follows a sweep's run (``lk.sweep(..., wait=False)``, a
finished run, a stored sweep's ``finished_run``) as a
:class:`~labkit.views.live.LiveView`: a :class:`~.sweep_tracker.SweepTracker`
folds the sweep's events and keeps what changed; each draw takes that and
sends ONE custom message through the board's widget
(:class:`~.sweep_widget.SweepBoardWidget`): first a ``paint`` (the whole
state), then ``delta`` frames (the changed rows, the new points, the counts;
:class:`~.sweep_frames.FrameEncoder`), so a frame costs what changed, not the
size of the sweep, and the status line, table and plots drawn from one
message never disagree.  A page that appears, or that missed a frame, says
``hello`` and is sent a paint.  Every frame carries the run's status, whether
it ended, and the clock of the events it is the first to show.  Once the
sweep ends the board keeps its last frame; the page's controls (stop, add,
cancel) answer that the sweep ended.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time

from ...experiments.live import live_sweep
from ..fold_queue import FoldQueue
from ..live import LiveView, State
from ..trackers.device_names import DeviceNames
from ..trackers.sweep_tracker import SweepChanges, SweepTracker
from .frames import FrameEncoder
from .pareto import pareto_frames
from .workers import WorkerSteps

__all__ = ["SweepBoard", "sweep_board"]

logger = logging.getLogger("labkit.views")


def sweep_board(run, reference=None) -> SweepBoard:
    """The live comparison board of a sweep's run."""
    return SweepBoard(run, reference=reference)


class SweepBoard(LiveView):
    """The board of one sweep run; display it (or ``board.widget``) in a notebook.

    Parameters
    ----------
    run : Run
        A sweep's run (``lk.sweep(..., wait=False)``).
    max_rate : float, optional
        Most frames per second.
    reference : sequence of float, optional
        A several-objective sweep's hypervolume reference point, one value an objective
        (default: the worst seen plus a margin; :mod:`.pareto`).
    """

    thread_name = "labkit-writer-sweep"

    def __init__(self, run, max_rate: float | None = None, reference=None):
        self.sweep_tracker = SweepTracker(run.id)
        self.worker_steps = WorkerSteps(run.id)  # the workers over time (a small plot)
        self.changes = _Changes(self.sweep_tracker, self.worker_steps)  # folded by the writer
        super().__init__(run, max_rate, tracker=self.changes)
        try:
            self.live_sweep = live_sweep(run)  # the run's own sweep
            if self.live_sweep is not None:
                self.changes.queue.drain()  # the events so far before the seed, as they came
                self.sweep_tracker.seed(self.live_sweep)  # after subscribing: nothing is lost
            self.encoder = FrameEncoder(self.sweep_tracker, names=DeviceNames(run.sources))
            self.encoder.pareto = pareto_frames(self.live_sweep, reference)  # None: one metric
            self.encoder.workers = self.worker_steps
            self._send_lock = threading.Lock()  # one frame at a time, in seq order
            self._painted = False
            self.sent = 0  # frames sent
            from .widget import SweepBoardWidget  # anywidget: when a board is made

            self.widget = SweepBoardWidget(
                self, run, self.live_sweep, self.sweep_tracker, on_change=self._poke
            )
        except BaseException:
            self._stop_listening()
            raise
        self.start()

    # -- frames --------------------------------------------------------------------------------

    def draw(self, snapshot) -> None:
        """Send one frame: a paint first, then what changed (``snapshot``: the tracker's take);
        the last one is also kept whole in the widget (:meth:`_keep`)."""
        state = self.state
        with self._send_lock:
            if self._painted:
                body = self.encoder.delta(snapshot, final=state is not State.LIVE)
            else:
                body = self.encoder.paint()
            # the ENDING draw shows every event (the run's end came before it); the writer's
            # draw after it keeps only where that one had begun before the end
            if state is State.ENDING or (state is not State.LIVE and not self.widget.last):
                painted = body["kind"] == "paint"
                key = self._keep(body if painted else self.encoder.paint(kept=True))
                if painted:  # the page draws the kept frame: the paint is not sent twice
                    body = self._named(key, body["seq"])
            self._send(body)

    def paint(self) -> None:
        """Send the whole state now (a page said hello); once the sweep ended, the kept frame
        by name (the frames after it, a writer's draw at the end, carry nothing new)."""
        self.changes.queue.drain()  # the events waiting to be folded are in it
        with self._send_lock:
            if self.widget.last:
                self._send(self._named(self.widget.kept_key, self.encoder.named()))
            else:
                self._send(self.encoder.paint())

    def curves(self, ranges: dict) -> dict:
        """Lines and band over the trials inside ``ranges`` (a page's brush)."""
        return self.encoder.brush(ranges)

    def _send(self, body: dict) -> None:
        """Add the run's status and the clock; one message (under the send lock)."""
        frame = self.frame
        body["status"] = self.run.status
        body["ended"] = self.run.done()
        body["clock"] = {
            "oldest": _stamp(frame.oldest) if frame else None,
            "newest": _stamp(frame.newest) if frame else None,
            "events": frame.events if frame else 0,
            "drawn": _stamp(frame.drawn) if frame else None,
            "sent": _stamp(time.time()),
        }
        self.widget.send(body)
        self._painted = True
        self.sent += 1

    def _keep(self, paint: dict) -> int:
        """Keep the last frame, whole, as the widget's ``last`` (sent in parts): a saved
        notebook holds it, and a page draws it while no kernel answers its hello.  Its clock
        names no event (a page that draws it later shows nothing new); its key."""
        paint = {**paint, "status": self.run.status, "ended": self.run.done()}
        paint["clock"] = {"oldest": None, "newest": None, "events": 0, "sent": _stamp(time.time())}
        return self.widget.keep(paint)

    @staticmethod
    def _named(key: int, seq: int) -> dict:
        """A paint of ``seq`` that names the kept frame of ``key`` (the page holds it)."""
        return {"kind": "paint", "seq": seq, "kept": key}

    def _poke(self) -> None:
        """A control acted: draw at once."""
        if self.writer is not None and self.writer.running:
            self.writer.poke(force=True)

    # -- lifetime and display --------------------------------------------------------------------

    def close(self) -> None:
        """Stop, and close the board's widget."""
        if self.state is State.CLOSED:
            return
        self.stop()
        self.state = State.CLOSED
        self.widget.close()

    def _ipython_display_(self) -> None:
        """Display the board's widget."""
        from IPython.display import display

        display(self.widget)

    def _repr_mimebundle_(self, **kwargs):
        """The widget's mimebundle."""
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self):
        return f"<labkit SweepBoard of run {self.run.id}: {'live' if self.live else 'stopped'}>"


class _Changes:
    """The tracker as the board's writer reads it: each snapshot is what changed since the last.

    Events are folded off the engine's threads (:class:`~labkit.views.fold_queue.FoldQueue`):
    by the writer just before it takes what changed, or when they waited too long.
    Its version moves as events come, before they are folded, so the writer wakes.
    """

    def __init__(self, tracker: SweepTracker, steps: WorkerSteps):
        self._tracker, self._steps = tracker, steps
        self.queue = FoldQueue(self._fold)

    def _fold(self, event) -> None:
        """One event into the tracker and the workers' steps (each takes its own classes)."""
        self._tracker(event)
        self._steps(event)

    def __call__(self, event) -> None:
        self.queue(event)

    @property
    def version(self) -> int:
        """Moves when an event comes (before it is folded) and when the tracker changes."""
        return self._tracker.version + self.queue.received

    def snapshot(self) -> SweepChanges:
        received = self.queue.received  # every event counted here is folded by the drain
        self.queue.drain()
        changes = self._tracker.take()
        return dataclasses.replace(changes, version=changes.version + received)


def _stamp(t: float | None) -> float | None:
    """A ``time.time()`` stamp to the millisecond (never to 6 digits: that is 10 s)."""
    return None if t is None else round(t, 3)
