"""The tracker of a sweep: its events in, a plain snapshot of its trials out.

:class:`SweepTracker` folds ``SweepStarted``, ``TrialsAdded``,
``TrialStarted``, ``TrialReported`` and ``TrialFinished`` of one sweep run
into a :class:`SweepSnapshot`: per trial its configuration, status, step,
latest and best value of the sweep's metric, its curve ``(step, value)``,
its error or the reason it stopped (each trial a
:class:`~labkit.experiments.TrialRecord`, as the engine keeps it); the sweep's name, metric, mode and
space; counts by status; the best trial; the load of each worker.  A view
that starts after the sweep (most do) is seeded from the live sweep
(:meth:`SweepTracker.seed`); events and the seed merge, step by step.
No UI library is imported here, and the engine never imports this module.

Examples
--------
>>> from labkit.events import SweepStarted, TrialStarted, TrialReported, TrialFinished
>>> from labkit.experiments import TrialRecord
>>> t = SweepTracker("r")
>>> t(SweepStarted("r", "demo", "acc", "max", {}, ({"id": 0, "config": {"x": 1}},), 2))
>>> t(TrialStarted("r", 0, {"x": 1}, "tcp://w:1 #0"))
>>> t(TrialReported("r", 0, (0, 1), ({"acc": 0.5}, {"acc": 0.7}), 0.7, 0.7))
>>> t(TrialFinished("r", TrialRecord(id=0, config={"x": 1}, status="completed", value=0.7,
...                                  best=0.7, step=1, attempts=1, worker="tcp://w:1 #0")))
>>> snap = t.snapshot()
>>> snap.trials[0].curve, snap.best.id, snap.counts, snap.workers[0].done
(((0, 0.5), (1, 0.7)), 0, {'completed': 1}, 1)
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from ..events import (
    RunFinished,
    SweepStarted,
    TrialFinished,
    TrialReported,
    TrialsAdded,
    TrialStarted,
)
from ..experiments.record import TrialRecord
from ..experiments.status import ENDED, ORDER, RANKED, Status

__all__ = ["SweepTracker", "SweepSnapshot", "TrialView", "WorkerLoad", "STATUSES"]

#: Statuses in the order a board counts them.
STATUSES = tuple(str(s) for s in ORDER)


@dataclass(frozen=True)
class TrialView:
    """One trial as a board shows it: its record's row, with the curve of the sweep's metric."""

    id: int
    config: dict
    status: str = "pending"
    step: int | float | None = None
    value: float | None = None  # the metric's latest (final, once ended) value
    best: float | None = None  # its best value reported
    curve: tuple = ()  # ((step, value), ...) of the sweep's metric
    worker: str | None = None
    attempts: int = 0
    error: str | None = None
    traceback: str | None = None
    reason: str | None = None
    reports: int = 0

    @classmethod
    def of(cls, t: TrialRecord, metric: str | None) -> TrialView:
        """The view of the record ``t`` (its status a plain word)."""
        curve = tuple((s, m[metric]) for s, m, _ in t.history if metric in m)
        return cls(
            id=t.id,
            config=dict(t.config),
            status=str(t.status),
            step=t.step,
            value=t.value,
            best=t.best,
            curve=curve,
            worker=t.worker,
            attempts=t.attempts,
            error=t.error,
            traceback=t.traceback,
            reason=t.reason,
            reports=len(t.history),
        )


@dataclass(frozen=True)
class WorkerLoad:
    """What one worker does for the sweep: trials running and done, reports a second."""

    name: str
    running: int = 0
    done: int = 0
    reports_per_s: float = 0.0


@dataclass(frozen=True)
class SweepSnapshot:
    """A sweep at one moment."""

    time: float
    version: int
    name: str | None
    metric: str | None
    mode: str
    space: dict
    rule: str | None
    slots: int | None
    trials: tuple  # TrialView, by id
    counts: dict
    best: TrialView | None
    workers: tuple = ()  # WorkerLoad, by name
    ended: bool = False  # the run ended


class SweepTracker:
    """Follows one sweep run's events (``run`` its id); :meth:`snapshot` from any thread."""

    def __init__(self, run: str | None = None, window: float = 5.0):
        self.run, self.window = run, window
        self.name: str | None = None
        self.metric: str | None = None
        self.rule: str | None = None
        self.slots: int | None = None
        self.mode: str = "max"
        self.space: dict = {}
        self.ended = False
        self._trials: dict[int, TrialRecord] = {}
        self._reports: dict[str, deque] = {}  # worker -> report times in the window
        self._done: dict[str, int] = {}
        self._lock = threading.Lock()
        self._version = 0

    @property
    def version(self) -> int:
        """Changes whenever the snapshot would."""
        return self._version

    def __call__(self, event) -> None:
        """Fold one event in (others pass by)."""
        handler = getattr(self, "_on_" + type(event).__name__, None)
        if handler is None or (self.run is not None and getattr(event, "run", None) != self.run):
            return
        with self._lock:
            handler(event)
            self._version += 1

    # -- seeding from a live sweep -----------------------------------------------------------

    def seed(self, live) -> None:
        """Merge what ``live`` (a :class:`~labkit.experiments.LiveSweep`) holds now."""
        rows = live.snapshot(history=True)
        with self._lock:
            self.name, self.metric, self.mode = live.name, live.metric, live.mode
            self.space = dict(live.space)
            self.rule = getattr(live, "rule", None) or self.rule
            for row in rows:
                self._merge(row)
            self._version += 1

    def _merge(self, row: dict) -> None:
        """One engine row: known steps kept, newer ones taken; an ended status wins."""
        t = self._trial(row["id"], row.get("config"))
        history = row.get("history") or ()
        if len(history) > len(t.history):
            t = self._set(t, history=[(s, m, *rest) for s, m, *rest in history])  # its copies
        status = row.get("status")
        if (t.status in ENDED and status not in ENDED) or (
            status == Status.PENDING and t.status == Status.RUNNING
        ):
            return
        known = {k: row[k] for k in _MERGED if row.get(k) is not None}
        self._set(
            t,
            status=status or t.status,
            attempts=max(t.attempts, row.get("attempts") or 0),
            **known,
        )

    # -- event handlers (under the lock) --------------------------------------------------------

    def _on_SweepStarted(self, e: SweepStarted) -> None:
        self.name, self.metric, self.mode, self.space = e.name, e.metric, e.mode, dict(e.space)
        self.rule, self.slots = e.rule, e.slots
        for row in e.trials:
            self._merge(row)

    def _on_TrialsAdded(self, e: TrialsAdded) -> None:
        for row in e.trials:
            self._merge(row)

    def _on_TrialStarted(self, e: TrialStarted) -> None:
        t = self._trial(e.trial, e.config)
        if t.status in ENDED:
            return
        history = t.history
        if e.step is not None:  # a restart goes on from its checkpoint's step
            history = [h for h in t.history if h[0] <= e.step]
        self._set(
            t,
            status=Status.RUNNING,
            worker=e.worker,
            attempts=max(t.attempts, e.attempt + 1),
            history=history,
        )

    def _on_TrialReported(self, e: TrialReported) -> None:
        t = self._trial(e.trial)
        history = t.history
        if e.steps and history and e.steps[0] <= history[-1][0]:
            history = [h for h in history if h[0] < e.steps[0]]  # reported again
        # an event's dicts are never changed: kept as they are
        history.extend(
            (step, metrics, e.time) for step, metrics in zip(e.steps, e.metrics, strict=True)
        )
        status = Status.RUNNING if t.status == Status.PENDING else t.status
        step = e.steps[-1] if e.steps else t.step
        self._set(t, history=history, step=step, value=e.value, best=e.best, status=status)
        self._reports.setdefault(_worker(t.worker), deque()).extend([time.time()] * len(e.steps))

    def _on_TrialFinished(self, e: TrialFinished) -> None:
        t = self._trial(e.trial)
        r = e.record
        self._set(
            t,
            status=r.status,
            value=r.value,
            best=r.best,
            step=r.step if r.step is not None else t.step,
            attempts=r.attempts,
            error=r.error,
            traceback=r.traceback,
            reason=r.reason,
        )
        if t.worker is not None:
            name = _worker(t.worker)
            self._done[name] = self._done.get(name, 0) + 1

    def _on_RunFinished(self, e: RunFinished) -> None:
        self.ended = True

    def _trial(self, trial: int, config: dict | None = None) -> TrialRecord:
        t = self._trials.get(trial)
        if t is None:
            t = self._trials[trial] = TrialRecord(id=trial, config=dict(config or {}))
        return t

    def _set(self, t: TrialRecord, **changes: Any) -> TrialRecord:
        """The trial ``t`` with ``changes``, kept."""
        t = self._trials[t.id] = t.replace(**changes)
        return t

    # -- reading ------------------------------------------------------------------------------

    def snapshot(self, now: float | None = None) -> SweepSnapshot:
        """The sweep now, as frozen data."""
        now = time.time() if now is None else now
        with self._lock:
            trials = tuple(TrialView.of(self._trials[i], self.metric) for i in sorted(self._trials))
            workers = self._workers(now)
            version = self._version
        counts: dict[str, int] = {}
        for t in trials:
            counts[t.status] = counts.get(t.status, 0) + 1
        return SweepSnapshot(
            now,
            version,
            self.name,
            self.metric,
            self.mode,
            dict(self.space),
            self.rule,
            self.slots,
            trials,
            counts,
            best_trial(trials, self.mode),
            workers,
            self.ended,
        )

    def history(self, trial: int) -> list:
        """Every report of ``trial``: ``[(step, metrics), ...]``."""
        with self._lock:
            t = self._trials.get(trial)
            return [(s, dict(m)) for s, m, _ in t.history] if t is not None else []

    def _workers(self, now: float) -> tuple:
        running: dict[str, int] = {}
        for t in self._trials.values():
            if t.status == Status.RUNNING and t.worker is not None:
                running[_worker(t.worker)] = running.get(_worker(t.worker), 0) + 1
        names = sorted(set(running) | set(self._done) | set(self._reports))
        out = []
        for name in names:
            times: deque = self._reports.get(name, deque())
            while times and times[0] < now - self.window:
                times.popleft()
            rate = 0.0 if self.ended else len(times) / self.window
            out.append(
                WorkerLoad(
                    name, 0 if self.ended else running.get(name, 0), self._done.get(name, 0), rate
                )
            )
        return tuple(out)


def best_trial(trials, mode: str) -> TrialView | None:
    """The best trial as ``SweepResult.best`` picks it; while none ended, the best running."""
    sign = 1 if mode == "max" else -1

    def ok(v):
        return v is not None and not math.isnan(v)

    ranked = [t for t in trials if t.status in RANKED and ok(t.value)]
    if not ranked:
        ranked = [t for t in trials if t.status == "running" and ok(t.best)]
        return max(ranked, key=lambda t: (sign * t.best, -t.id)) if ranked else None
    return max(ranked, key=lambda t: (sign * t.value, -t.id))


#: The fields of an engine row a tracker takes when the row has them.
_MERGED = ("step", "value", "best", "worker", "error", "traceback", "reason")


def _worker(worker: str | None) -> str:
    """A worker's name without its slot (``tcp://a:1 #0`` → ``tcp://a:1``)."""
    return (worker or "local").split(" #")[0]
