"""The tracker of a sweep: its events in; what changed, or a plain snapshot, out.

:class:`SweepTracker` folds ``SweepStarted``, ``TrialsAdded``,
``TrialStarted``, ``TrialReported`` and ``TrialFinished`` of one sweep run:
per trial its configuration, status, step, latest and best value of the
sweep's metric, its curve ``(step, value)``, its error or the reason it
stopped (each trial a :class:`~labkit.experiments.TrialRecord`, as the engine
keeps it); the sweep's name, metric, mode and space; counts by status; the
best trials; the load of each worker.  A view that starts after the sweep
(most do) is seeded from the live sweep (:meth:`SweepTracker.seed`); events
and the seed merge, step by step.

Two ways to read it.  :meth:`SweepTracker.snapshot` copies every trial (a
dashboard that redraws all).  A view that sends only what changed calls
:meth:`SweepTracker.take` (the ids of the trials changed since the last take),
then :meth:`SweepTracker.state` for those trials and :meth:`SweepTracker.curves`
for their new points: the counts, the best trials and the running ones are
kept as events come, so none of these costs more with the number of trials.
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
>>> changes = t.take()
>>> sorted(changes.trials), t.take().trials, t.curves({0: (0, 1)})
([0], frozenset(), {0: (0, 1, [(1, 0.7)])})
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
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
from .sweep_rows import (
    Leaders,
    SweepChanges,
    SweepSnapshot,
    SweepState,
    TrialView,
    WorkerLoad,
    best_trial,
    ok,
    worker_name,
)

__all__ = [
    "SweepTracker",
    "SweepSnapshot",
    "SweepChanges",
    "SweepState",
    "TrialView",
    "WorkerLoad",
    "STATUSES",
    "best_trial",
]

#: Statuses in the order a board counts them.
STATUSES = tuple(str(s) for s in ORDER)


class SweepTracker:
    """Follows one sweep run's events (``run`` its id); read it from any thread."""

    def __init__(self, run: str | None = None, window: float = 5.0, leaders: int = 10):
        self.run, self.window = run, window
        self.leaders = leaders  # how many of the best trials state() names
        self.name: str | None = None
        self.metric: str | None = None
        self.rule: str | None = None
        self.slots: int | None = None
        self.mode: str = "max"
        self.space: dict = {}
        self.ended = False
        self._trials: dict[int, TrialRecord] = {}
        self._curves: dict[int, list] = {}  # id -> [(step, value of the metric)]
        self._epochs: dict[int, int] = {}  # id -> how often its curve was cut back
        self._changed: set[int] = set()
        self._sweep_changed = False
        self._counts: dict[str, int] = {}
        self._running: set[int] = set()
        self._leaders = Leaders(leaders)
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
            self._describe(
                live.name, live.metric, live.mode, live.space, getattr(live, "rule", None)
            )
            for row in rows:
                self._merge(row)
            self._version += 1

    def _describe(self, name, metric, mode, space, rule=None, slots=None) -> None:
        """The sweep's own words; a new metric draws every curve again."""
        before = (self.name, self.metric, self.mode, self.space, self.rule)
        metric_changed = metric != self.metric
        self.name, self.metric, self.mode, self.space = name, metric, mode, dict(space)
        self.rule, self.slots = rule or self.rule, slots if slots is not None else self.slots
        self._leaders.mode = mode
        if before != (self.name, self.metric, self.mode, self.space, self.rule):
            self._sweep_changed = True
        if metric_changed:
            for t in self._trials.values():
                self._set_curve(t.id, [(s, m[metric]) for s, m, *_ in t.history if metric in m])

    def _merge(self, row: dict) -> None:
        """One engine row: known steps kept, newer ones taken; an ended status wins."""
        t = self._trial(row["id"], row.get("config"))
        changes: dict[str, Any] = {}
        history = row.get("history") or ()
        if len(history) > len(t.history):
            changes["history"] = [(s, m, *rest) for s, m, *rest in history]  # its copies
            metric = self.metric
            self._set_curve(t.id, [(s, m[metric]) for s, m, *_ in history if metric in m])
        status = row.get("status")
        if not (
            (t.status in ENDED and status not in ENDED)
            or (status == Status.PENDING and t.status == Status.RUNNING)
        ):
            changes.update({k: row[k] for k in _MERGED if row.get(k) is not None})
            changes["status"] = status or t.status
            changes["attempts"] = max(t.attempts, row.get("attempts") or 0)
        if changes:
            self._set(t, **changes)

    # -- event handlers (under the lock) --------------------------------------------------------

    def _on_SweepStarted(self, e: SweepStarted) -> None:
        self._describe(e.name, e.metric, e.mode, e.space, e.rule, e.slots)
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
            self._cut_curve(t.id, lambda s: s <= e.step)
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
            self._cut_curve(t.id, lambda s: s < e.steps[0])
        # an event's dicts are never changed: kept as they are
        history.extend(
            (step, metrics, e.time) for step, metrics in zip(e.steps, e.metrics, strict=True)
        )
        metric = self.metric
        self._curves.setdefault(t.id, []).extend(
            (s, m[metric]) for s, m in zip(e.steps, e.metrics, strict=True) if metric in m
        )
        status = Status.RUNNING if t.status == Status.PENDING else t.status
        step = e.steps[-1] if e.steps else t.step
        self._set(t, history=history, step=step, value=e.value, best=e.best, status=status)
        self._reports.setdefault(worker_name(t.worker), deque()).extend(
            [time.time()] * len(e.steps)
        )

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
            name = worker_name(t.worker)
            self._done[name] = self._done.get(name, 0) + 1

    def _on_RunFinished(self, e: RunFinished) -> None:
        self.ended = True

    # -- keeping the indexes (under the lock) ------------------------------------------------------

    def _trial(self, trial: int, config: dict | None = None) -> TrialRecord:
        t = self._trials.get(trial)
        if t is None:
            t = self._trials[trial] = TrialRecord(id=trial, config=dict(config or {}))
            self._counts["pending"] = self._counts.get("pending", 0) + 1
            self._changed.add(trial)
        return t

    def _set(self, t: TrialRecord, **changes: Any) -> TrialRecord:
        """The trial ``t`` with ``changes``, kept; counts, running and leaders follow."""
        new = self._trials[t.id] = t.replace(**changes)
        self._changed.add(t.id)
        if new.status != t.status:
            was, now = str(t.status), str(new.status)
            self._counts[was] -= 1
            if not self._counts[was]:
                del self._counts[was]
            self._counts[now] = self._counts.get(now, 0) + 1
            (self._running.add if new.status == Status.RUNNING else self._running.discard)(t.id)
        if new.status != t.status or new.value != t.value:
            ranked = new.status in RANKED and ok(new.value)
            self._leaders.set(t.id, new.value if ranked else None)
        return new

    def _set_curve(self, trial: int, points: list) -> None:
        """A trial's whole curve; a new epoch unless it only grew."""
        old = self._curves.get(trial, [])
        if points[: len(old)] != old:
            self._epochs[trial] = self._epochs.get(trial, 0) + 1
        self._curves[trial] = points
        self._changed.add(trial)

    def _cut_curve(self, trial: int, keep) -> None:
        """Keep the points whose step passes ``keep``; a new epoch if any went."""
        old = self._curves.get(trial, [])
        kept = [p for p in old if keep(p[0])]
        if len(kept) < len(old):
            self._curves[trial] = kept
            self._epochs[trial] = self._epochs.get(trial, 0) + 1

    # -- reading what changed -------------------------------------------------------------------

    def take(self) -> SweepChanges:
        """The trials changed since the last take (and whether the sweep's words did)."""
        with self._lock:
            changed, self._changed = self._changed, set()
            sweep, self._sweep_changed = self._sweep_changed, False
            return SweepChanges(self._version, frozenset(changed), sweep)

    def state(self, trials: Iterable[int] | None = (), now: float | None = None) -> SweepState:
        """Counts, best, leaders, running ones, workers, and the rows of ``trials`` (None: all)."""
        now = time.time() if now is None else now
        with self._lock:
            if trials is None:
                rows = tuple(self._trials[i] for i in sorted(self._trials))
            else:
                rows = tuple(self._trials[i] for i in trials if i in self._trials)
            return SweepState(
                now,
                self._version,
                len(self._trials),
                dict(self._counts),
                self._best(),
                tuple(self._leaders.top()),
                frozenset(self._running),
                self._workers(now),
                self.ended,
                rows,
            )

    def curves(self, known: Mapping[int, tuple[int, int]]) -> dict[int, tuple[int, int, list]]:
        """For each ``trial: (epoch, n)`` a page holds: ``(epoch, start, points from start)``.

        The same epoch: the points after the ``n`` known; another: the whole curve, from 0.
        """
        out = {}
        with self._lock:
            for trial, (epoch, n) in known.items():
                now = self._epochs.get(trial, 0)
                start = n if now == epoch else 0
                out[trial] = (now, start, self._curves.get(trial, [])[start:])
        return out

    def trial(self, trial: int) -> TrialView | None:
        """One trial as a board shows it (None: no such trial)."""
        with self._lock:
            t = self._trials.get(trial)
            return TrialView.of(t, self.metric) if t is not None else None

    # -- reading everything ------------------------------------------------------------------

    def snapshot(self, now: float | None = None) -> SweepSnapshot:
        """The sweep now, as frozen data (every trial copied: for views that redraw all)."""
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

    def _best(self) -> int | None:
        """The best trial as :func:`best_trial` picks it, from the kept leaders."""
        top = self._leaders.top()
        if top:
            return top[0]
        sign = 1 if self.mode == "max" else -1
        running = [
            (sign * best, -i)
            for i in self._running
            if (best := self._trials[i].best) is not None and ok(best)
        ]
        return -max(running)[1] if running else None

    def _workers(self, now: float) -> tuple:
        running: dict[str, int] = {}
        for i in self._running:
            worker = self._trials[i].worker
            if worker is not None:
                running[worker_name(worker)] = running.get(worker_name(worker), 0) + 1
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


#: The fields of an engine row a tracker takes when the row has them.
_MERGED = ("step", "value", "best", "worker", "error", "traceback", "reason")
