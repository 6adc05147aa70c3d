"""A sweep's workers over time, for the board's small step plot (issue 47's "seen").

:class:`WorkerSteps` folds a sweep run's :class:`~labkit.events.SweepWorkers`
(its usable workers changed: joins, retirements, an adaptive cluster's scaling;
first said at its start) and its end, and writes the board's ``workers`` frame
part: a paint's every step, a delta's new steps only (none: no part), so a frame
costs what changed.  A step is ``[time, workers, threads]`` (``time.time()``
to the millisecond); ``until`` is when the sweep ended (the page holds the last
step flat until then, or until now while it runs).  A sweep on this process's
threads, or a stored sweep (its store keeps no worker counts), has no steps and
the page draws no plot.  No UI library is imported here.

Examples
--------
>>> from labkit.events import SweepWorkers
>>> steps = WorkerSteps("r")
>>> steps(SweepWorkers("r", "demo", 1, 2, time=10.0))
>>> steps.paint()
{'steps': [[10.0, 1, 2]], 'until': None}
>>> steps(SweepWorkers("r", "demo", 2, 4, time=12.5)); steps.delta()
{'steps': [[12.5, 2, 4]]}
>>> steps.delta() is None
True
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, ClassVar

from ...events import Event, RunFinished, SweepWorkers, handles

__all__ = ["WorkerSteps"]


class WorkerSteps:
    """One sweep run's usable workers over time (``run`` its id; None: any run's)."""

    def __init__(self, run: str | None = None):
        self.run = run
        self._steps: list[tuple[float, int, int]] = []  # (time, workers, threads), by time
        self._until: float | None = None  # when the sweep ended
        self._sent = 0  # steps a frame carried so far
        self._until_sent = False
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        """Fold one event in (others pass by)."""
        handler = self._HANDLERS.get(type(event))
        if handler is None or (self.run is not None and getattr(event, "run", None) != self.run):
            return
        with self._lock:
            handler(self, event)

    def steps(self) -> list[tuple[float, int, int]]:
        """Every step so far: ``(time, workers, threads)``."""
        with self._lock:
            return list(self._steps)

    def counts(self) -> list[int]:
        """The workers of each step, in order."""
        return [n for _, n, _ in self.steps()]

    def paint(self) -> dict | None:
        """A paint's part: every step and the end (None: no step, no plot)."""
        with self._lock:
            self._sent, self._until_sent = len(self._steps), self._until is not None
            if not self._steps:
                return None
            return {"steps": [_step(s) for s in self._steps], "until": _ms(self._until)}

    def delta(self) -> dict | None:
        """A delta's part: the steps and the end not sent yet (None: nothing new)."""
        with self._lock:
            part: dict[str, Any] = {}
            if len(self._steps) > self._sent:
                part["steps"] = [_step(s) for s in self._steps[self._sent :]]
                self._sent = len(self._steps)
            if self._until is not None and not self._until_sent and self._steps:
                part["until"], self._until_sent = _ms(self._until), True
            return part or None

    # -- event handlers (under the lock) --------------------------------------------------------

    def _on_sweep_workers(self, e: SweepWorkers) -> None:
        last = self._steps[-1] if self._steps else None
        if last is not None and (last[1], last[2]) == (e.workers, e.threads):
            return  # said again (a replay): no step
        if last is not None and e.time < last[0]:
            return  # an older one, heard late (a replay after the live ones)
        self._steps.append((e.time, e.workers, e.threads))

    def _on_run_finished(self, e: RunFinished) -> None:
        self._until = e.time

    #: Each event class the fold takes -> its handler.
    _HANDLERS: ClassVar[dict[type[Event], Callable[[Any, Any], None]]] = dict(
        [
            handles(SweepWorkers, _on_sweep_workers),
            handles(RunFinished, _on_run_finished),
        ]
    )


def _ms(t: float | None) -> float | None:
    """A ``time.time()`` stamp to the millisecond (6 significant digits would be 10 s)."""
    return None if t is None else round(t, 3)


def _step(step: tuple[float, int, int]) -> list:
    """A step as the page reads it: ``[time, workers, threads]``."""
    t, n, threads = step
    return [_ms(t), n, threads]
