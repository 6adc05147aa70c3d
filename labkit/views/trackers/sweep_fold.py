"""How a sweep's events and its store's rows fold into its trials: the tracker's writing half.

:class:`SweepFold` keeps, per trial of one sweep run, its row
(:class:`~.sweep_rows.TrialRow`: a record's fields, changed in place; a
reader is handed a frozen :class:`~labkit.experiments.TrialRecord`) and the curve of the sweep's metric
(with an *epoch* that grows when the curve was cut back: a restart, or a
report again from an earlier step), and, as events come, the counts by
status, the running trials, the best ones (:class:`~.sweep_rows.Leaders`),
the workers' load, each trial's moves (its worker left under it: ``TrialMoved``) and
whether the sweep waits for workers (``SweepWaiting``).  Every change stamps its trial with the fold's mark (its
version), so readers ask what changed after the mark they last read.  Each
event class has its handler in one table (``_HANDLERS``), so a handler is
found by its event's class, never by a name built from it.
:class:`~.sweep_tracker.SweepTracker` is the fold with its readers; see it for
examples.  No UI library is imported here.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, ClassVar

from ...events import (
    Event,
    RunFinished,
    SweepStarted,
    SweepWaiting,
    TrialFinished,
    TrialMoved,
    TrialReported,
    TrialRequeued,
    TrialsAdded,
    TrialStarted,
    handles,
)
from ...experiments.trials.record import TrialRecord
from ...experiments.trials.status import ENDED, RANKED, Status
from .sweep_lines import LEADERS
from .sweep_rows import Leaders, TrialRow, WorkerLoads, ok

__all__ = ["SweepFold"]

#: A sweep run's statuses that are not an end.
_GOING = ("running", "pending")


class SweepFold:
    """One sweep run's events and rows folded into its trials (``run`` its id); see the module."""

    def __init__(
        self,
        run: str | None = None,
        window: float = 5.0,
        leaders: int = LEADERS,
        name: str | None = None,
    ):
        self.run, self.window = run, window
        self.leaders = leaders  # how many of the best trials state() names
        self.name: str | None = name
        self.metric: str | None = None
        self.rule: str | None = None
        self.slots: int | None = None
        self.mode: str = "max"
        self.space: dict = {}
        self.objectives: tuple = ()  # a sweep of several objectives: every one, and its mode
        self.modes: tuple = ()
        self.ended = False
        self.status = "running"  # the run's: running, finished, failed, cancelled, ended
        self.started: float | None = None  # when the sweep began (as its shelf knows it)
        self.waiting = False  # the sweep waits for workers (its cluster has none)
        self._trials: dict[int, TrialRow] = {}
        self._curves: dict[int, list] = {}  # id -> [(step, value of the metric)]
        self._epochs: dict[int, int] = {}  # id -> how often its curve was cut back
        self._log: OrderedDict[int, int] = OrderedDict()  # id -> mark of its last change
        self._records: dict[int, TrialRecord] = {}  # id -> its row frozen, until it changes
        self._said = 0  # the mark of the last change of the sweep's words
        self._meta = 0  # ... of its words or its status
        self._taken = 0  # the mark of the last take()
        self._counts: dict[str, int] = {}
        self._running: set[int] = set()
        self._leaders = Leaders(leaders)
        self._loads = WorkerLoads(window)
        self._lock = threading.Lock()
        self._version = 0

    @property
    def version(self) -> int:
        """Changes whenever the snapshot would."""
        return self._version

    @property
    def mark(self) -> int:
        """Grows with every change; :meth:`changes` since one tells what changed after it."""
        return self._version

    @property
    def meta_mark(self) -> int:
        """The mark of the last change of the sweep's name, metric, mode, space, rule or status."""
        return self._meta

    def __call__(self, event: Event) -> None:
        """Fold one event in (others pass by)."""
        handler = self._HANDLERS.get(type(event))
        if handler is None or (self.run is not None and getattr(event, "run", None) != self.run):
            return
        with self._lock:
            handler(self, event)
            self._version += 1

    # -- seeding from a live sweep, or from a store ---------------------------------------------

    def seed(self, live) -> None:
        """Merge what ``live`` (a :class:`~labkit.experiments.LiveSweep`) holds now."""
        rows = live.snapshot(history=True)
        with self._lock:
            self._describe(
                live.name, live.metric, live.mode, live.space, getattr(live, "rule", None)
            )
            self._several(getattr(live, "objectives", ()), getattr(live, "modes", ()))
            for row in rows:
                self._merge(row)
            self._version += 1

    def describe(self, name, metric, mode, space, rule=None) -> None:
        """What the sweep is: its name, metric, mode, space and early-stopping rule."""
        with self._lock:
            self._describe(name, metric, mode, space or {}, rule)
            self._version += 1

    def set_objectives(self, pairs) -> None:
        """A sweep's objectives as ``[(name, mode), ...]`` (kept only when several)."""
        with self._lock:
            self._several([n for n, _ in pairs], [m for _, m in pairs])
            self._version += 1

    def _several(self, names, modes) -> None:
        """Several objectives' names and modes (one metric: none)."""
        several = len(names) > 1 and len(modes) == len(names)
        self.objectives, self.modes = (tuple(names), tuple(modes)) if several else ((), ())

    def set_status(self, status: str) -> None:
        """The sweep's run is ``status`` now (``running``; ``finished``, ``ended``: it ended)."""
        with self._lock:
            if status != self.status:
                self.status, self.ended = status, status not in _GOING
                self._meta = self._version + 1
                self._version += 1

    def merge(self, row: dict, exact: bool = False) -> None:
        """One trial's row (an engine's or a store's): known steps kept, newer ones taken.

        An ended status is kept against a row that says otherwise (an event may come
        before a snapshot's row), unless the row is ``exact`` (a store's, read in order).
        """
        with self._lock:
            self._merge(row, exact)
            self._version += 1

    def report(self, trial: int, reports, replace: bool = False) -> None:
        """Reports ``[(step, metrics), ...]`` of ``trial`` (a store's rows): its curve goes on
        (``replace``: they are all its reports, a restarted trial's)."""
        steps, metrics = [s for s, _ in reports], [m for _, m in reports]
        with self._lock:
            t = self._trial(trial)
            if replace:
                self._set_curve(t.id, [])
                t = self._set(t, history=[])
            history = self._extend(t, steps, metrics, None)
            changes: dict[str, Any] = {"history": history}
            curve = self._curves.get(t.id)
            if steps and t.status not in ENDED:  # an ended trial's row says how it ended
                changes["step"] = steps[-1]
                changes["value"] = curve[-1][1] if curve else t.value
            self._set(t, **changes)
            self._version += 1

    def _describe(self, name, metric, mode, space, rule=None, slots=None) -> None:
        """The sweep's own words; a new metric draws every curve again."""
        before = (self.name, self.metric, self.mode, self.space, self.rule)
        metric_changed = metric != self.metric
        self.name, self.metric, self.mode, self.space = name, metric, mode, dict(space)
        self.rule, self.slots = rule or self.rule, slots if slots is not None else self.slots
        self._leaders.mode = mode
        if before != (self.name, self.metric, self.mode, self.space, self.rule):
            self._said = self._meta = self._version + 1
        if metric_changed:
            for t in self._trials.values():
                self._set_curve(t.id, [(s, m[metric]) for s, m, *_ in t.history if metric in m])

    def _merge(self, row: dict, exact: bool = False) -> None:
        """One row: known steps kept, newer ones taken; an ended status wins unless ``exact``."""
        t = self._trial(row["id"], row.get("config"))
        changes: dict[str, Any] = {}
        history = row.get("history") or ()
        if len(history) > len(t.history):
            changes["history"] = [(s, m, *rest) for s, m, *rest in history]  # its copies
            metric = self.metric
            self._set_curve(t.id, [(s, m[metric]) for s, m, *_ in history if metric in m])
        status = row.get("status")
        if exact or not (
            (t.status in ENDED and status not in ENDED)
            or (status == Status.PENDING and t.status == Status.RUNNING)
        ):
            changes.update({k: row[k] for k in _MERGED if row.get(k) is not None})
            changes["status"] = status or t.status
            changes["attempts"] = max(t.attempts, row.get("attempts") or 0)
            # only what differs: a stored sweep's board is seeded twice (its run's start
            # replays every row, then the sweep itself), and 10,000 unchanged rows cost
            changes = {k: v for k, v in changes.items() if k == "history" or getattr(t, k) != v}
        if changes:
            self._set(t, **changes)

    # -- event handlers (under the lock) --------------------------------------------------------

    def _on_sweep_started(self, e: SweepStarted) -> None:
        self._describe(e.name, e.metric, e.mode, e.space, e.rule, e.slots)
        self._several(e.objectives, e.modes)
        for row in e.trials:
            self._merge(row)

    def _on_trials_added(self, e: TrialsAdded) -> None:
        for row in e.trials:
            self._merge(row)

    def _on_trial_started(self, e: TrialStarted) -> None:
        t = self._trial(e.trial, e.config)
        if t.status in ENDED:
            return
        history = t.history
        if e.step is not None:  # a restart goes on from its checkpoint's step
            history = [h for h in t.history if h[0] <= e.step]
            self._cut_curve(t.id, lambda s: s <= e.step)
        self._set(
            t,
            config=dict(e.config) if e.config else t.config,  # in force (PBT's exploit changes it)
            status=Status.RUNNING,
            worker=e.worker,
            attempts=max(t.attempts, e.attempt + 1),
            history=history,
            started=e.time,
        )

    def _on_trial_reported(self, e: TrialReported) -> None:
        # the hot path (a board of 100 trials folds thousands a second): the row in place
        t = self._trial(e.trial)
        status, value = t.status, t.value
        t.history = self._extend(t, e.steps, e.metrics, e.time)
        if e.steps:
            t.step = e.steps[-1]
        t.value, t.best = e.value, e.best
        if status == Status.PENDING:
            t.status = Status.RUNNING
        self._follow(t, status, value)
        self._loads.reported(t.worker, len(e.steps))

    def _on_trial_requeued(self, e: TrialRequeued) -> None:
        t = self._trial(e.trial)
        if t.status not in ENDED:  # waits for a slot again (PBT): no longer running
            self._set(t, status=Status.PENDING)

    def _on_trial_moved(self, e: TrialMoved) -> None:
        t = self._trial(e.trial)
        if t.status not in ENDED:  # its worker left: it waits to go on elsewhere (no failure)
            self._set(t, status=Status.PENDING, moves=max(t.moves, e.moves))

    def _on_sweep_waiting(self, e: SweepWaiting) -> None:
        if e.waiting != self.waiting:  # the status line says so: a change of the sweep's words
            self.waiting = e.waiting
            self._meta = self._version + 1

    def _on_trial_finished(self, e: TrialFinished) -> None:
        r = e.record
        t = self._trial(r.id, r.config)
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
            ended=r.ended or e.time,
            objectives=r.objectives,  # several objectives: each one's final value
            constraints=r.constraints,
            moves=max(t.moves, r.moves),
        )
        if t.worker is not None:
            self._loads.finished(t.worker)

    def _on_run_finished(self, e: RunFinished) -> None:
        self.ended, self.waiting = True, False  # an ended sweep waits for nothing
        self.status = "cancelled" if e.cancelled else "finished" if e.ok else "failed"
        self._meta = self._version + 1

    #: Each event class the fold takes -> its handler (called with the fold and the event).
    _HANDLERS: ClassVar[dict[type[Event], Callable[[Any, Any], None]]] = dict(
        [
            handles(SweepStarted, _on_sweep_started),
            handles(TrialsAdded, _on_trials_added),
            handles(TrialStarted, _on_trial_started),
            handles(TrialReported, _on_trial_reported),
            handles(TrialRequeued, _on_trial_requeued),
            handles(TrialMoved, _on_trial_moved),
            handles(SweepWaiting, _on_sweep_waiting),
            handles(TrialFinished, _on_trial_finished),
            handles(RunFinished, _on_run_finished),
        ]
    )

    # -- keeping the indexes (under the lock) ------------------------------------------------------

    def _touch(self, trial: int) -> None:
        """``trial`` changed: stamped with the mark this change makes (its record made anew)."""
        self._log[trial] = self._version + 1
        self._log.move_to_end(trial)
        self._records.pop(trial, None)

    def _record(self, trial: int) -> TrialRecord:
        """``trial``'s row as a frozen record, made once a change (a paint asks for every one)."""
        record = self._records.get(trial)
        if record is None:
            record = self._records[trial] = self._trials[trial].frozen()
        return record

    def _trial(self, trial: int, config: dict | None = None) -> TrialRow:
        t = self._trials.get(trial)
        if t is None:
            t = self._trials[trial] = TrialRow(trial, dict(config or {}))
            self._counts["pending"] = self._counts.get("pending", 0) + 1
            self._touch(trial)
        elif config and not t.config:  # heard of before its row (a report first)
            self._set(t, config=dict(config))
        return t

    def _set(self, t: TrialRow, **changes: Any) -> TrialRow:
        """Change the row ``t`` in place; counts, running and leaders follow."""
        status, value = t.status, t.value
        for name, new in changes.items():
            setattr(t, name, new)
        if not isinstance(t.status, Status):  # one spelling, as a record's: the enum
            t.status = Status(t.status)
        self._follow(t, status, value)
        return t

    def _follow(self, t: TrialRow, status: Status, value: float | None) -> None:
        """``t`` changed (it was ``status``, its value ``value``): counts, running, leaders follow."""
        self._touch(t.id)
        if t.status != status:
            was, now = str(status), str(t.status)
            self._counts[was] -= 1
            if not self._counts[was]:
                del self._counts[was]
            self._counts[now] = self._counts.get(now, 0) + 1
            (self._running.add if t.status == Status.RUNNING else self._running.discard)(t.id)
        if t.status != status or t.value != value:
            ranked = t.status in RANKED and ok(t.value)
            self._leaders.set(t.id, t.value if ranked else None)

    def _extend(self, t: TrialRow, steps, metrics, when) -> list:
        """``t``'s history with these reports (reported again from a step: from there on);
        its curve follows."""
        history = t.history
        if steps and history and steps[0] <= history[-1][0]:
            history = [h for h in history if h[0] < steps[0]]  # reported again
            self._cut_curve(t.id, lambda s: s < steps[0])
        metric, curve = self.metric, self._curves.get(t.id)
        if curve is None:
            curve = self._curves[t.id] = []
        for step, m in zip(steps, metrics, strict=True):
            history.append((step, m, when))  # a report's dicts are never changed: kept as they are
            if metric in m:
                curve.append((step, m[metric]))
        return history

    def _set_curve(self, trial: int, points: list) -> None:
        """A trial's whole curve; a new epoch unless it only grew."""
        old = self._curves.get(trial, [])
        if points[: len(old)] != old:
            self._epochs[trial] = self._epochs.get(trial, 0) + 1
        self._curves[trial] = points
        self._touch(trial)

    def _cut_curve(self, trial: int, keep) -> None:
        """Keep the points whose step passes ``keep``; a new epoch if any went."""
        old = self._curves.get(trial, [])
        kept = [p for p in old if keep(p[0])]
        if len(kept) < len(old):
            self._curves[trial] = kept
            self._epochs[trial] = self._epochs.get(trial, 0) + 1


#: The fields of an engine row a tracker takes when the row has them.
_MERGED: tuple[str, ...] = ("step", "value", "best", "worker", "error", "traceback", "reason")
_MERGED += ("started", "ended", "objectives", "constraints")  # objectives: several's finals
_MERGED += ("moves",)  # how often its worker left under it (issue 47)
