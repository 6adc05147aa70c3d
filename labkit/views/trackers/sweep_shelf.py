"""Every sweep a dashboard shows: those its scheduler holds, those started after it opened.

A scheduler holds the sweeps started on it by their run's id
(``scheduler.runs()``), ended ones too, until it shuts down.  A
:class:`SweepShelf` keeps a :class:`~.sweep_tracker.SweepTracker` for each:
a sweep that began while the dashboard listened is followed from its first
event; one that began before is seeded from the sweep the scheduler holds
(its trials so far) when the shelf first hears of it (an event of its run,
or :meth:`SweepShelf.refresh`).  What the dashboard's other views missed of
such a sweep (its run's start, its running trials) is told to them then, as
are its trials as tasks (:mod:`.trial_tasks`), so a worker running trials
reads busy.

:class:`Sweeps` is what a dashboard's sweep section reads: this shelf, or a
store's (:mod:`.store_shelf`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from ...events import RunFinished, RunStarted
from ...experiments.live import SweepSource
from .sweep_tracker import SweepTracker
from .trial_tasks import TrialTasks

__all__ = ["Sweeps", "SweepShelf"]


@runtime_checkable
class Sweeps(Protocol):
    """The sweeps a dashboard lists: :meth:`refresh`, then :meth:`feeds`, oldest first."""

    def refresh(self) -> None:
        """Take in sweeps that appeared since."""

    def feeds(self) -> list[SweepTracker]:
        """Every sweep's tracker, oldest first."""


class SweepShelf:
    """The sweeps of ``source`` (a scheduler, or a run: that run's sweep only).

    Parameters
    ----------
    source : Scheduler or Run
        Whose sweeps to list: a scheduler's, or those of a run's schedulers
        that are that run.
    sink : callable, optional
        Where the task events of trials go (the dashboard's tracker), and
        what such a view missed of a sweep started before it.
    """

    def __init__(self, source: Any, sink: Callable[[Any], Any] | None = None):
        self._only: str | None = None  # a run's shelf: that run's sweep only
        self._schedulers: list = []
        if callable(getattr(source, "runs", None)):
            self._schedulers = [source]
        elif isinstance(getattr(source, "id", None), str):
            self._only, self._schedulers = source.id, list(getattr(source, "schedulers", []))
        self._sink = sink
        self.tasks = TrialTasks()
        self._feeds: dict[str, SweepTracker] = {}
        self._heard: set[str] = set()  # sweep runs whose start this shelf heard
        self._lock = threading.RLock()

    def feeds(self) -> list[SweepTracker]:
        """Every sweep's tracker, in the order they started."""
        with self._lock:
            return sorted(self._feeds.values(), key=lambda f: f.started or 0.0)

    def refresh(self) -> None:
        """Take in the sweeps the scheduler holds that the shelf does not know yet."""
        for run_id, held in self._held().items():
            if run_id not in self._feeds and isinstance(held, SweepSource):
                self._adopt(run_id, held)

    def __call__(self, event) -> None:
        """Fold one event: into its sweep's tracker, and trials as tasks into the sink."""
        run = getattr(event, "run", None)
        if run is None or (self._only is not None and run != self._only):
            return
        if isinstance(event, RunStarted):
            if event.kind == "sweep":  # followed from the start: its events will say it all
                with self._lock:
                    self._heard.add(run)
                    begun = self._feeds[run] = SweepTracker(run, name=event.detail.get("name"))
                    begun.started = event.time
            return
        tracker = self._feeds.get(run)
        if tracker is None:
            if not type(event).__name__.startswith(("Trial", "Sweep")):
                return
            held = self._held().get(run)
            if not isinstance(held, SweepSource):
                return
            tracker = self._adopt(run, held)
        tracker(event)
        sink = self._sink
        if sink is not None:
            for task_event in self.tasks(event):
                sink(task_event)

    def _held(self) -> dict:
        held: dict = {}
        for s in self._schedulers:
            runs = s.runs() if callable(getattr(s, "runs", None)) else {}
            held.update({k: v for k, v in runs.items() if self._only is None or k == self._only})
        return held

    def _adopt(self, run: str, held: Any) -> SweepTracker:
        """A sweep that began before the shelf heard of it: seeded from what it holds."""
        with self._lock:
            tracker = self._feeds.get(run)
            if tracker is not None:
                return tracker
            tracker = self._feeds[run] = SweepTracker(run)
            tracker.started = getattr(held, "started", None) or time.time()
            tracker.seed(held)
            status = getattr(held, "status", "running")
            if status not in ("running", "pending"):
                tracker.set_status(status)
            if self._sink is not None and run not in self._heard:
                self._tell(run, tracker, held, status)
            return tracker

    def _tell(self, run: str, tracker: SweepTracker, held: Any, status: str) -> None:
        """What the sink missed of a sweep begun before: its run's start, its running trials."""
        sink = self._sink
        if sink is None:
            return
        for event in self.tasks.seed(run, tracker.started, held.name, tracker.timeline()):
            sink(event)
        if status not in ("running", "pending"):
            sink(RunFinished(run, ok=status == "finished", cancelled=status == "cancelled"))
