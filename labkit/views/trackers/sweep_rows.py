"""What a sweep's tracker keeps and hands out: trials' rows and views, loads, the best trials.

:class:`TrialRow` is one trial as the tracker keeps it while events come (a
record's fields, changed in place: a report costs no new record); the
tracker hands out frozen :class:`~labkit.experiments.TrialRecord` made from
it (:meth:`TrialRow.frozen`) only when a reader asks.
:class:`TrialView`, :class:`WorkerLoad` and :class:`SweepSnapshot` are frozen
data for views that redraw everything; :class:`SweepChanges` and
:class:`SweepState` for views that send what changed; :func:`best_trial` picks the best as
``SweepResult.best`` does; :class:`Leaders` keeps the best few as values come,
so a frame never ranks every trial again.

Examples
--------
>>> top = Leaders(k=2)
>>> for trial, value in [(0, 0.5), (1, 0.9), (2, 0.7), (3, float("nan"))]:
...     top.set(trial, value if ok(value) else None)
>>> top.top()
[1, 2]
>>> top.mode = "min"
>>> top.top()
[0, 2]
>>> top.set(4, 0.5); top.set(0, None); top.top()   # ties: the lower id first; None leaves
[4, 2]
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import operator
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from ...experiments.trials.record import TrialRecord
from ...experiments.trials.status import RANKED

__all__ = [
    "TrialRow",
    "TrialView",
    "WorkerLoad",
    "SweepSnapshot",
    "SweepChanges",
    "SweepState",
    "Leaders",
    "WorkerLoads",
    "best_trial",
    "ok",
    "worker_name",
    "worker_names",
]


#: A record's fields, in its order: what a row holds.
FIELDS = tuple(f.name for f in dataclasses.fields(TrialRecord))
_DEFAULTS = {
    f.name: f.default for f in dataclasses.fields(TrialRecord) if f.name not in ("id", "config")
}
_VALUES = operator.attrgetter(*FIELDS)  # a row's fields in FIELDS' order, in one call


class TrialRow:
    """One trial as a tracker keeps it: a record's fields, changed in place (``history`` a list).

    A tracker changes many trials many times a second; a row changes in place
    and :meth:`frozen` makes the record a reader is handed.
    """

    __slots__ = FIELDS

    id: int
    config: dict
    status: Any  # a Status
    metrics: dict | None
    history: list  # (step, metrics, time): the tracker's own list, grown in place
    value: float | None
    best: float | None
    step: int | float | None
    attempts: int
    worker: str | None
    error: str | None
    traceback: str | None
    reason: str | None
    started: float | None
    ended: float | None
    moves: int  # how often its worker left under it (a move, not a failure)

    def __init__(self, id: int, config: dict):
        self.id, self.config = id, config
        for name, default in _DEFAULTS.items():
            setattr(self, name, default)
        self.history = []

    def frozen(self) -> TrialRecord:
        """The row as a frozen record (its reports a tuple: a copy).

        A frame freezes every changed trial (1,700 a sweep of 100 trials x 40 reports, twice
        with the dashboard).  Made as ``TrialRecord.replace`` makes one: its fields set at
        once, then what ``__init__`` checks checked (4 us a row, against 10 us through the
        frozen ``__init__``, measured).
        """
        record = object.__new__(TrialRecord)
        record.__dict__.update(zip(FIELDS, _VALUES(self), strict=True))
        record.__post_init__()
        return record


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
    moves: int = 0  # how often its worker left under it (it went on elsewhere)

    @classmethod
    def of(cls, t: TrialRecord | TrialRow, metric: str | None) -> TrialView:
        """The view of the record (or a tracker's row) ``t`` (its status a plain word)."""
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
            moves=t.moves,
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


@dataclass(frozen=True)
class SweepChanges:
    """What changed since the last :meth:`SweepTracker.take`: trials by id, and the sweep itself."""

    version: int
    trials: frozenset  # ids whose row or curve changed (new trials too)
    sweep: bool = False  # name, metric, mode, space or rule changed


@dataclass(frozen=True)
class SweepState:
    """The sweep at one moment, without its trials: what a frame's status line and plots need."""

    time: float
    version: int
    total: int
    counts: dict  # status -> trials
    best: int | None  # the best trial's id (as SweepResult.best picks it)
    leaders: tuple  # the best trials' ids, best first (at most Leaders.k)
    running: frozenset  # ids of the running trials
    workers: tuple  # WorkerLoad, by name
    ended: bool
    rows: tuple  # the TrialRecords asked for (frozen when asked)
    waiting: bool = False  # the sweep waits for workers (its cluster has none)


def ok(value) -> bool:
    """Whether ``value`` can rank: a number, not NaN (infinities rank)."""
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def worker_name(worker: str | None) -> str:
    """A worker's name without its slot (``tcp://a:1 #0`` → ``tcp://a:1``)."""
    return (worker or "local").split(" #")[0]


def worker_names(worker: str | None) -> list[str]:
    """The workers a trial ran on: one, or each of a group (``"tcp://a:1, tcp://b:2"``).

    >>> worker_names("tcp://a:1, tcp://b:2")
    ['tcp://a:1', 'tcp://b:2']
    >>> worker_names("tcp://a:1 #0")
    ['tcp://a:1']
    """
    return [worker_name(w) for w in (worker or "local").split(", ")]


def best_trial(trials, mode: str) -> TrialView | None:
    """The best trial as ``SweepResult.best`` picks it; while none ended, the best running."""
    sign = 1 if mode == "max" else -1
    ranked = [t for t in trials if t.status in RANKED and ok(t.value)]
    if not ranked:
        ranked = [t for t in trials if t.status == "running" and ok(t.best)]
        return max(ranked, key=lambda t: (sign * t.best, -t.id)) if ranked else None
    return max(ranked, key=lambda t: (sign * t.value, -t.id))


class Leaders:
    """The ``k`` best ranked trials, kept as values come (ties: the lower id first).

    Adding a trial costs ``O(k)``; all values are ranked again only when one of
    the leaders changes or leaves, or the mode changes.
    """

    def __init__(self, k: int = 10, mode: str = "max"):
        self.k = k
        self._mode = mode
        self._values: dict[int, float] = {}  # every ranked trial's value
        self._top: list[int] | None = []  # None: to rank again

    @property
    def mode(self) -> str:
        """``"max"`` or ``"min"``: which way is better."""
        return self._mode

    @mode.setter
    def mode(self, mode: str) -> None:
        if mode != self._mode:
            self._mode, self._top = mode, None

    def _key(self, trial: int) -> tuple:
        value = self._values[trial]
        return (value if self._mode == "max" else -value, -trial)

    def set(self, trial: int, value: float | None) -> None:
        """``trial`` ranks with ``value`` now (None: it does not rank)."""
        old = self._values.pop(trial, None)
        if value is None:
            if old is not None and self._top is not None and trial in self._top:
                self._top = None
            return
        self._values[trial] = value
        if self._top is None:
            return
        if trial in self._top:
            self._top = None  # a leader's value moved: rank again (rare: values end once)
        elif len(self._top) < self.k or self._key(trial) > self._key(self._top[-1]):
            self._top.append(trial)
            self._top.sort(key=self._key, reverse=True)
            del self._top[self.k :]

    def top(self) -> list[int]:
        """The leaders' ids, best first."""
        if self._top is None:
            self._top = heapq.nlargest(self.k, self._values, key=self._key)
        return list(self._top)

    def __len__(self) -> int:
        return len(self._values)


class WorkerLoads:
    """Per worker: the sweep's trials done, and its reports in the last ``window`` seconds."""

    def __init__(self, window: float = 5.0):
        self.window = window
        self._reports: dict[str, deque] = {}  # worker -> report times in the window
        self._done: dict[str, int] = {}
        self._names: dict[str | None, list[str]] = {}  # a trial's worker -> its workers' names

    def reported(self, worker: str | None, n: int) -> None:
        """``worker`` (each worker of a group) sent ``n`` reports now."""
        names = self._names.get(worker)
        if names is None:  # split once a worker, not once a report
            names = self._names[worker] = worker_names(worker)
        for name in names:
            self._reports.setdefault(name, deque()).extend([time.time()] * n)

    def finished(self, worker: str) -> None:
        """``worker`` (each worker of a group) ended a trial."""
        for name in worker_names(worker):
            self._done[name] = self._done.get(name, 0) + 1

    def loads(self, workers: list, now: float, ended: bool) -> tuple:
        """Each worker's :class:`WorkerLoad` (``workers``: those of the running trials)."""
        running: dict[str, int] = {}
        for worker in workers:
            if worker is not None:
                for name in worker_names(worker):
                    running[name] = running.get(name, 0) + 1
        out = []
        for name in sorted(set(running) | set(self._done) | set(self._reports)):
            times: deque = self._reports.get(name, deque())
            while times and times[0] < now - self.window:
                times.popleft()
            rate = 0.0 if ended else len(times) / self.window
            busy = 0 if ended else running.get(name, 0)
            out.append(WorkerLoad(name, busy, self._done.get(name, 0), rate))
        return tuple(out)
