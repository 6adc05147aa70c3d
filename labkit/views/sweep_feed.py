"""One sweep as a dashboard follows it: its trials folded in, and what changed since a mark.

A :class:`SweepFeed` folds one sweep's events (``SweepStarted``,
``TrialsAdded``, ``TrialStarted``, ``TrialReported``, ``TrialFinished``,
``RunFinished``) or rows read from its store into one row a trial (status,
step, latest and best value, worker, attempts, the curve of the sweep's
metric).  Every change stamps its trial with a sequence number, so a reader
(a browser session) asks :meth:`SweepFeed.changes` for the trials changed
after the last mark it drew and sends only those: a tick costs what
changed, not the sweep's size.  A view seeded after the sweep began merges
what the live sweep holds (:meth:`SweepFeed.seed`); rows and events merge
step by step (a longer history wins, an ended status is kept).

The engine's threads only fold (a few dict updates an event); what readers
derive (the ranking, the best, which trials are lines and the quantile band
of the others) is settled by them, from the trials changed since the last
settling (:meth:`SweepFeed.settle`).  No UI library is imported here.

Examples
--------
>>> from labkit.events import SweepStarted, TrialStarted, TrialReported
>>> feed = SweepFeed("r")
>>> feed(SweepStarted("r", "demo", "acc", "max", {}, ({"id": 0, "config": {"x": 1}},), 2))
>>> mark = feed.mark
>>> feed(TrialStarted("r", 0, {"x": 1}, "tcp://w:1 #0"))
>>> feed(TrialReported("r", 0, (0, 1), ({"acc": 0.5}, {"acc": 0.7}), 0.7, 0.7))
>>> feed.changes(mark)[1], feed.trials([0])[0].curve, feed.counts()
([0], ((0, 0.5), (1, 0.7)), {'running': 1})
"""

from __future__ import annotations

import collections
import math
import threading
from dataclasses import dataclass, field
from typing import Any

from ..events import (
    RunFinished,
    SweepStarted,
    TrialFinished,
    TrialReported,
    TrialsAdded,
    TrialStarted,
)
from .sweep_band import Band
from .sweep_rank import Ranking
from .sweep_tracker import TrialView

__all__ = ["SweepFeed", "LINES", "BEST_LINES"]

#: Up to this many trials every curve is a line; beyond, the running and the best ones.
LINES = 300
#: The best trials drawn as lines beyond :data:`LINES`.
BEST_LINES = 10

_ENDED = frozenset({"completed", "stopped", "failed", "cancelled"})
_RANKED = frozenset({"completed", "stopped"})


@dataclass
class _Trial:
    """One trial as the feed keeps it (changed in place, under the feed's lock)."""

    id: int
    config: dict
    status: str = "pending"
    step: Any = None
    value: float | None = None
    best: float | None = None
    worker: str | None = None
    attempts: int = 0
    reason: str | None = None
    error: str | None = None
    started: float | None = None  # when it began (its latest execution, once heard)
    ended: float | None = None
    curve: list = field(default_factory=list)  # [(step, value of the metric), ...]

    def view(self) -> TrialView:
        return TrialView(
            id=self.id,
            config=self.config,
            status=self.status,
            step=self.step,
            value=self.value,
            best=self.best,
            curve=tuple(self.curve),
            worker=self.worker,
            attempts=self.attempts,
            error=self.error,
            reason=self.reason,
            reports=len(self.curve),
        )


class SweepFeed:
    """Follows one sweep (``run`` its run's id); read it from any thread."""

    def __init__(self, run: str, name: str | None = None, metric: str | None = None):
        self.run = run
        self.name, self.metric, self.mode = name, metric, "max"
        self.space: dict = {}
        self.rule: str | None = None
        self.status = "running"
        self.started: float | None = None
        self._trials: dict[int, _Trial] = {}
        self._counts: collections.Counter = collections.Counter()
        self._running: set[int] = set()
        self._log: collections.OrderedDict[int, int] = collections.OrderedDict()  # trial -> mark
        self._mark = 0
        self._meta = 0  # the mark of the last change of name, status or metric
        self._lock = threading.RLock()
        # settled by readers (under the lock): the ranking, the lines and the band
        self._settled = 0
        self.ranking = Ranking(self.mode)
        self._top: list[int] = []
        self.band = Band()

    # -- marks ---------------------------------------------------------------------------------

    @property
    def mark(self) -> int:
        """Grows with every change; :meth:`changes` since one tells what changed after it."""
        return self._mark

    @property
    def meta_mark(self) -> int:
        """The mark of the last change of the sweep's name, metric or status."""
        return self._meta

    def changes(self, since: int) -> tuple[int, list[int]]:
        """``(mark now, ids of the trials changed after mark since)``, newest change first."""
        with self._lock:
            ids = []
            for trial, mark in reversed(self._log.items()):
                if mark <= since:
                    break
                ids.append(trial)
            return self._mark, ids

    def _touch(self, t: _Trial) -> None:
        self._mark += 1
        self._log[t.id] = self._mark
        self._log.move_to_end(t.id)

    def _changed_meta(self) -> None:
        self._mark += 1
        self._meta = self._mark

    # -- reading -------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._trials)

    def trials(self, ids=None) -> list[TrialView]:
        """The trials ``ids`` (every trial, in id order, by default) as frozen views."""
        with self._lock:
            if ids is None:
                ids = sorted(self._trials)
            return [self._trials[i].view() for i in ids if i in self._trials]

    def counts(self) -> dict[str, int]:
        """Trials by status (those with none left out)."""
        with self._lock:
            return {s: n for s, n in self._counts.items() if n}

    def running(self) -> list[int]:
        """Ids of the running trials."""
        with self._lock:
            return sorted(self._running)

    def timeline(self) -> list[tuple]:
        """``(id, status, worker, started, ended)`` of each trial that ran (None: not known)."""
        with self._lock:
            return [
                (t.id, t.status, t.worker, t.started, t.ended)
                for t in self._trials.values()
                if t.status != "pending"
            ]

    # -- folding events (the engine's threads) -------------------------------------------------

    def __call__(self, event) -> None:
        """Fold one event of this sweep's run in (others pass by)."""
        if getattr(event, "run", None) != self.run:
            return
        handler = getattr(self, "_on_" + type(event).__name__, None)
        if handler is not None:
            with self._lock:
                handler(event)

    def describe(self, name, metric, mode, space, rule=None) -> None:
        """What the sweep is: its name, metric, mode, space and early-stopping rule."""
        with self._lock:
            self.name, self.metric, self.mode = name, metric, mode
            self.space, self.rule = dict(space or {}), rule
            self._changed_meta()

    def ended(self, status: str) -> None:
        """The sweep's run ended (``finished``, ``failed``, ``cancelled``)."""
        with self._lock:
            if self.status != status:
                self.status = status
                self._changed_meta()

    def seed(self, live) -> None:
        """Merge what ``live`` (a live or stored sweep) holds now, histories included."""
        rows = live.snapshot(history=True)
        self.describe(live.name, live.metric, live.mode, live.space, getattr(live, "rule", None))
        with self._lock:
            for row in rows:
                self.merge(row)

    def merge(self, row: dict, exact: bool = False) -> None:
        """One trial's row (an engine's or a store's): known steps kept, newer ones taken.

        An ended status is kept against a row that says otherwise (an event may come
        before a snapshot's row), unless the row is ``exact`` (a store's, read in order).
        """
        with self._lock:
            t = self._trial(row["id"], row.get("config"))
            history = row.get("history")
            if history is not None and len(history) >= len(t.curve):
                t.curve = _curve(((s, m) for s, m, *_ in history), self.metric)
            status = str(row.get("status") or t.status)
            if exact or (
                not (t.status in _ENDED and status not in _ENDED)
                and not (status == "pending" and t.status == "running")
            ):
                self._set_status(t, status)
            for key in ("step", "value", "best", "worker", "error", "reason", "started", "ended"):
                if row.get(key) is not None:
                    setattr(t, key, row[key])
            t.attempts = max(t.attempts, row.get("attempts") or 0)
            self._touch(t)

    def report(self, trial: int, reports, replace: bool = False) -> None:
        """Reports ``[(step, metrics), ...]`` of ``trial`` (a store's rows): its curve goes on
        (``replace``: they are all its reports, a restarted trial's)."""
        with self._lock:
            t = self._trial(trial)
            if replace:
                t.curve = []
            self._extend(t, [s for s, _ in reports], [m for _, m in reports])
            self._touch(t)

    def _on_SweepStarted(self, e: SweepStarted) -> None:
        self.name, self.metric, self.mode, self.space = e.name, e.metric, e.mode, dict(e.space)
        self.rule = e.rule
        self._changed_meta()
        for row in e.trials:
            self.merge(row)

    def _on_TrialsAdded(self, e: TrialsAdded) -> None:
        for row in e.trials:
            self.merge(row)

    def _on_TrialStarted(self, e: TrialStarted) -> None:
        t = self._trial(e.trial, e.config)
        if t.status in _ENDED:
            return
        if e.step is not None:  # a restart goes on from its checkpoint's step
            t.curve = [p for p in t.curve if p[0] <= e.step]
        self._set_status(t, "running")
        t.worker, t.attempts, t.started = e.worker, max(t.attempts, e.attempt + 1), e.time
        self._touch(t)

    def _on_TrialReported(self, e: TrialReported) -> None:
        t = self._trial(e.trial)
        self._extend(t, e.steps, e.metrics)
        t.value, t.best = e.value, e.best
        if t.status == "pending":
            self._set_status(t, "running")
        self._touch(t)

    def _on_TrialFinished(self, e: TrialFinished) -> None:
        r = e.record
        t = self._trial(r.id, r.config)
        self._set_status(t, str(r.status))
        t.value, t.best, t.attempts = r.value, r.best, r.attempts
        t.step = r.step if r.step is not None else t.step
        t.error, t.reason, t.ended = r.error, r.reason, r.ended or e.time
        self._touch(t)

    def _on_RunFinished(self, e: RunFinished) -> None:
        self.status = "cancelled" if e.cancelled else "finished" if e.ok else "failed"
        self._changed_meta()

    def _trial(self, trial: int, config: dict | None = None) -> _Trial:
        t = self._trials.get(trial)
        if t is None:
            t = self._trials[trial] = _Trial(trial, dict(config or {}))
            self._counts["pending"] += 1
        elif config and not t.config:
            t.config = dict(config)
        return t

    def _set_status(self, t: _Trial, status: str) -> None:
        if status == t.status:
            return
        self._counts[t.status] -= 1
        self._counts[status] += 1
        t.status = status
        if status == "running":
            self._running.add(t.id)
        else:
            self._running.discard(t.id)

    def _extend(self, t: _Trial, steps, metrics) -> None:
        """Append a trial's reports to its curve (reported again from a step: from there)."""
        steps = list(steps)
        if steps and t.curve and steps[0] <= t.curve[-1][0]:
            t.curve = [p for p in t.curve if p[0] < steps[0]]
        t.curve.extend(_curve(zip(steps, metrics, strict=True), self.metric))
        if steps and t.status not in _ENDED:  # an ended trial's row says how it ended
            t.step = steps[-1]
            if t.curve:
                t.value = t.curve[-1][1]

    # -- what readers settle (the ranking, the best, the lines, the band) ---------------------

    def settle(self) -> None:
        """Bring the ranking and the band up to the trials changed since the last settling."""
        with self._lock:
            if self.mode != self.ranking.mode:  # ranked the other way round: rank every trial
                self.ranking, self._settled = Ranking(self.mode), 0
            _, changed = self.changes(self._settled)
            self._settled = self._mark
            if not changed:
                return
            for i in changed:
                t = self._trials[i]
                self.ranking.place(i, t.value if t.status in _RANKED else None)
            top = self.ranking.top(BEST_LINES)
            moved = set(top).symmetric_difference(self._top)
            self._top = top
            entering = {}
            for i in {*changed, *moved}:
                curve = self._place(self._trials[i])
                if curve is not None:
                    entering[i] = curve
            self.band.update(entering)

    def _place(self, t: _Trial) -> list | None:
        """Out of the band, or the curve it enters with: ended, with a curve, not among the best."""
        inside = t.status in _ENDED and bool(t.curve) and t.id not in self._top
        if not inside:
            self.band.remove(t.id)
            return None
        if self.band.curve(t.id) != tuple((s, v) for s, v in t.curve if _finite(v)):
            return t.curve
        return None

    def best(self) -> TrialView | None:
        """The best trial as ``SweepResult.best`` picks it; while none ended, the best running."""
        with self._lock:
            self.settle()
            if len(self.ranking):
                return self._trials[self.ranking.top(1)[0]].view()
            sign = 1 if self.mode == "max" else -1
            running = [self._trials[i] for i in self._running if _finite(self._trials[i].best)]
            if not running:
                return None
            return max(running, key=lambda t: (sign * (t.best or 0.0), -t.id)).view()

    def lines(self) -> set[int]:
        """The trials drawn as lines: every one up to :data:`LINES`, else the running and best."""
        with self._lock:
            self.settle()
            if len(self._trials) <= LINES:
                return {i for i, t in self._trials.items() if t.curve}
            return {*self._running, *self._top}


def _finite(value) -> bool:
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value)


def _curve(reports, metric: str | None) -> list:
    """``[(step, value of metric), ...]`` of ``(step, metrics)`` reports that hold it."""
    if metric is None:
        return []
    return [(s, m[metric]) for s, m in reports if metric in m]
