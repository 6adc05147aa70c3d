"""The tracker of a sweep: its events (or its store's rows) in; what changed, or a snapshot, out.

:class:`SweepTracker` folds ``SweepStarted``, ``TrialsAdded``,
``TrialStarted``, ``TrialReported``, ``TrialFinished`` and ``RunFinished`` of
one sweep run, or rows read from its store (:meth:`SweepTracker.merge`,
:meth:`SweepTracker.report`): per trial its configuration, status, step,
latest and best value of the sweep's metric, its curve ``(step, value)``, its
error or the reason it stopped (each trial a row of a
:class:`~labkit.experiments.TrialRecord`'s fields, handed out frozen); the
sweep's name, metric, mode, space and status; counts by status; the best
trials; the load of each worker.  A view that starts after the sweep (most
do) is seeded from the live sweep (:meth:`SweepTracker.seed`); events and the
seed merge, step by step.

Every change stamps its trial with the tracker's mark, so any number of
readers each ask what changed since they last drew: :meth:`SweepTracker.changes`
(a browser session of the dashboard) or :meth:`SweepTracker.take` (the one
reader of a notebook board), then :meth:`SweepTracker.state` or
:meth:`SweepTracker.trials` for those trials and :meth:`SweepTracker.curves`
for their new points: the counts, the best trials and the running ones are
kept as events come, so none of these costs more with the number of trials.
:meth:`SweepTracker.lines` and :meth:`SweepTracker.band` are the lines and
quantile band a dashboard draws (:mod:`.sweep_lines`), settled once for all
its readers; :meth:`SweepTracker.snapshot` copies every trial.  No UI library
is imported here, and the engine never imports this module.

Examples
--------
>>> from labkit.events import SweepStarted, TrialStarted, TrialReported, TrialFinished
>>> from labkit.experiments import TrialRecord
>>> t = SweepTracker("r")
>>> t(SweepStarted("r", "demo", "acc", "max", {}, ({"id": 0, "config": {"x": 1}},), 2))
>>> mark = t.mark
>>> t(TrialStarted("r", 0, {"x": 1}, "tcp://w:1 #0"))
>>> t(TrialReported("r", 0, (0, 1), ({"acc": 0.5}, {"acc": 0.7}), 0.7, 0.7))
>>> t.changes(mark)[1], t.trials([0])[0].curve, t.counts(), t.changes(t.mark)[1]
([0], ((0, 0.5), (1, 0.7)), {'running': 1}, [])
>>> t(TrialFinished("r", TrialRecord(id=0, config={"x": 1}, status="completed", value=0.7,
...                                  best=0.7, step=1, attempts=1, worker="tcp://w:1 #0")))
>>> snap = t.snapshot()
>>> snap.trials[0].curve, snap.best.id, snap.counts, snap.workers[0].done
(((0, 0.5), (1, 0.7)), 0, {'completed': 1}, 1)
>>> changes = t.take()
>>> sorted(changes.trials), t.take().trials, t.curves({0: (0, 1)})
([0], frozenset(), {0: (0, 1, [(1, 0.7)])})

A store's rows merge the same way (``exact``: as the store says, an ended trial run again):

>>> t.merge({"id": 0, "config": {"x": 1}, "status": "running"}, exact=True)
>>> t.report(0, [(0, {"acc": 0.2})], replace=True)
>>> t.trials([0])[0].curve, t.trials([0])[0].status, t.best().id
(((0, 0.2),), 'running', 0)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping

from ...experiments.trials.status import ORDER, Status
from .sweep_fold import SweepFold
from .sweep_lines import LEADERS, LINES, LineSplit
from .sweep_rows import (
    SweepChanges,
    SweepSnapshot,
    SweepState,
    TrialView,
    WorkerLoad,
    best_trial,
    ok,
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


class SweepTracker(SweepFold):
    """Follows one sweep run's events (``run`` its id); read it from any thread."""

    def __init__(
        self,
        run: str | None = None,
        window: float = 5.0,
        leaders: int = LEADERS,
        name: str | None = None,
        lines: int = LINES,
    ):
        super().__init__(run, window, leaders, name)
        self._split = LineSplit(lines, leaders)
        self._settling = threading.Lock()  # one reader settles the lines at a time

    # -- reading what changed -------------------------------------------------------------------

    def changes(self, since: int) -> tuple[int, list[int]]:
        """``(mark now, ids of the trials changed after mark since)``, newest change first."""
        with self._lock:
            return self._version, self._since(since)

    def _since(self, since: int) -> list[int]:
        ids = []
        for trial, mark in reversed(self._log.items()):
            if mark <= since:
                break
            ids.append(trial)
        return ids

    def take(self) -> SweepChanges:
        """The trials changed since the last take (and whether the sweep's words did)."""
        with self._lock:
            changed, sweep = self._since(self._taken), self._said > self._taken
            self._taken = self._version
            return SweepChanges(self._version, frozenset(changed), sweep)

    def state(self, trials: Iterable[int] | None = (), now: float | None = None) -> SweepState:
        """Counts, best, leaders, running ones, workers, and the rows of ``trials`` (None: all)."""
        now = time.time() if now is None else now
        with self._lock:
            # the rows asked for, frozen: the fold changes its own rows in place
            if trials is None:
                rows = tuple(self._record(i) for i in sorted(self._trials))
            else:
                rows = tuple(self._record(i) for i in trials if i in self._trials)
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
                self.waiting and not self.ended,
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

    def trials(self, ids: Iterable[int] | None = None) -> list[TrialView]:
        """The trials ``ids`` (every trial, in id order, by default) as frozen views."""
        with self._lock:
            ids = sorted(self._trials) if ids is None else ids
            return [TrialView.of(self._trials[i], self.metric) for i in ids if i in self._trials]

    def counts(self) -> dict[str, int]:
        """Trials by status (those with none left out)."""
        with self._lock:
            return dict(self._counts)

    def best(self) -> TrialView | None:
        """The best trial as ``SweepResult.best`` picks it; while none ended, the best running."""
        with self._lock:
            best = self._best()
            return TrialView.of(self._trials[best], self.metric) if best is not None else None

    def timeline(self) -> list[tuple]:
        """``(id, status, worker, started, ended)`` of each trial that ran (None: not known)."""
        with self._lock:
            return [
                (t.id, str(t.status), t.worker, t.started, t.ended)
                for t in self._trials.values()
                if t.status != Status.PENDING
            ]

    def __len__(self) -> int:
        return len(self._trials)

    # -- the lines and the band, settled for every reader ------------------------------------------

    def lines(self) -> frozenset[int]:
        """The trials drawn as lines: every one up to ``lines`` (300), else the running and best."""
        with self._settling:
            self._split.settle(self)
            return self._split.drawn

    def band(self) -> tuple[int, dict | None]:
        """``(version, quantiles)`` of the trials not drawn as lines (None: no such trial);
        the version changes whenever the quantiles do."""
        with self._settling:
            self._split.settle(self)
            return self._split.version, self._split.band

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
        workers = [self._trials[i].worker for i in self._running]
        return self._loads.loads(workers, now, self.ended)
