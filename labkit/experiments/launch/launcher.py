"""What every launcher does: the hooks the engine and the loop call, and running a trial here.

A launcher (one a :class:`~.placement.Where`, see :mod:`.launchers`) starts
trials as slots free up and makes the engine's stops happen; it reads its
:class:`~.placement.Placement` (``self.placement``) for where they go.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from typing import Any

from ...events import SweepWaiting, SweepWorkers, TaskInfo
from ..trials.trial import Trial
from .channel import TrialChannel
from .execution import execute
from .placement import Placement, usable_workers
from .sinks import DirectSink

__all__ = ["Launcher", "Recent", "WorkerWait", "ASK_EVERY", "usable_workers"]

logger = logging.getLogger("labkit.experiments")


#: Seconds a launcher trusts what it last asked of the cluster (its workers come and go).
ASK_EVERY = 2.0


class Recent:
    """A value of the cluster asked again at most every ``every`` seconds, or when forgotten.

    >>> asked = []
    >>> threads = Recent(lambda: asked.append(1) or len(asked))
    >>> threads(), threads(), len(asked)
    (1, 1, 1)
    >>> threads.forget(); threads()
    2
    """

    def __init__(self, ask: Any, every: float = ASK_EVERY):
        self._ask, self._every = ask, every
        self._value: Any = None
        self._at = -math.inf

    def __call__(self) -> Any:
        if time.monotonic() - self._at > self._every:
            self._value = self._ask()
            self._at = time.monotonic()
        return self._value

    def forget(self) -> None:
        """Ask again at the next call."""
        self._at = -math.inf


class WorkerWait:
    """Says when a sweep waits on a cluster with no worker, and when workers come (again).

    Dask keeps tasks while a cluster has no worker (a lifetime's end, an adaptive
    cluster at zero, jobs still queued): the sweep waits as Dask does, and says so
    once, in a log line (``labkit.experiments``) and in :attr:`waiting`, which a
    view may show.  ``count()`` gives the workers the sweep may use.
    """

    def __init__(self, count: Any, name: str, every: float = ASK_EVERY):
        self._count = Recent(count, every)
        self.name = name
        #: Whether the sweep waits for workers now (trials pending, none to run them).
        self.waiting = False

    def check(self, pending: int) -> bool:
        """Look (at most every ``every`` s) while ``pending`` trials wait; whether it waits."""
        if not pending and not self.waiting:
            return False
        try:
            workers = self._count()
        except Exception:  # a cluster that does not answer now: asked again later
            return self.waiting
        if not workers and pending and not self.waiting:
            self.waiting = True
            logger.warning(
                "labkit: sweep %s is waiting for workers: the cluster has none "
                "(%d trial(s) pending); they start as workers join",
                self.name,
                pending,
            )
        elif workers and self.waiting:
            self.waiting = False
            logger.warning(
                "labkit: sweep %s: %d worker(s) joined; trials go on", self.name, workers
            )
        return self.waiting

    def end(self) -> bool:
        """The sweep ends: it waits no more; whether it waited until now."""
        was, self.waiting = self.waiting, False
        return was


class Launcher:
    """What every launcher does; the hooks the engine and the loop call."""

    #: Whether running trials take the next one themselves (the loop need not be woken).
    pulls = False

    def __init__(self, placement: Placement, engine, fn, max_concurrent: int | None):
        self.placement, self.engine, self.fn = placement, engine, fn
        self.scheduler = placement.scheduler
        self.holds_gil, self.workers_per_trial = placement.holds_gil, placement.workers_per_trial
        self.max_concurrent = max_concurrent
        self.batch: Any = None  # the scheduler's batch of the sweep's tasks, once open
        #: Whether the sweep waits on a cluster with no worker (see :class:`WorkerWait`).
        self.workers_wait: WorkerWait | None = None
        #: The workers the sweep may use (by address: threads), asked at most every ASK_EVERY s.
        self.usable: Recent | None = None
        self._told: tuple | None = None  # (workers, threads) as last told the views
        # the ids of the executions run in this process: a count, no uuid's random bytes a
        # trial (never one of the uuids' hex ids of executions elsewhere)
        self._executions = itertools.count()

    def open(self, scope) -> None:
        """Start: a batch of the scheduler for the sweep's tasks (a cancel reaches them)."""
        self.batch = self.scheduler.batch(
            info=TaskInfo(scope.id, -1, -1, kind="trial"), control=scope.control
        )
        if self.placement.on_workers:  # worker processes come and go
            usable = self.usable = Recent(self.usable_workers, ASK_EVERY)
            # one look serves both: the wait asks the cache, never the cluster itself
            self.workers_wait = WorkerWait(lambda: len(usable()), self.engine.name, 0.0)

    def usable_workers(self) -> dict:
        """The workers the sweep's scheduler may use now, by address: their threads (asked)."""
        return usable_workers(self.scheduler, self.scheduler.client.nthreads())

    def watch_workers(self) -> bool:
        """On the loop's thread: whether the sweep waits for workers (said once, see
        :class:`WorkerWait`, and told the views in a :class:`~labkit.events.SweepWaiting`)."""
        wait = self.workers_wait
        if wait is None:
            return False
        was, pending = wait.waiting, len(self.engine.pending)
        if wait.check(pending) != was:
            self.engine.emit(SweepWaiting(self.engine.run_id, self.engine.name, not was, pending))
        self.tell_workers()
        return wait.waiting

    def tell_workers(self) -> None:
        """Tell the views the sweep's usable workers when they changed (first at its start):
        a :class:`~labkit.events.SweepWorkers`, from the look :meth:`watch_workers` shares."""
        if self.usable is None:
            return
        try:
            workers = self.usable()
        except Exception:  # a cluster that does not answer now: asked again later
            return
        now = (len(workers), sum(workers.values()))
        if now != self._told:
            self._told = now
            self.engine.emit(SweepWorkers(self.engine.run_id, self.engine.name, *now))

    def threads(self) -> int:
        return 1

    def cluster_threads(self) -> int:
        """Threads of the workers the sweep's scheduler uses (asked of the cluster); at least 1."""
        return sum(usable_workers(self.scheduler, self.scheduler.client.nthreads()).values()) or 1

    def submit_options(self) -> dict:
        """Where the sweep's own tasks may run: ``client.submit``'s words for its workers alone."""
        only = self.scheduler.workers  # a DaskScheduler's (only Dask launchers submit)
        return {} if only is None else {"workers": list(only), "allow_other_workers": False}

    def slots(self) -> int:
        """Trials that may run at once."""
        return self.placement.slots(self.threads(), self.max_concurrent)

    def fill(self) -> None:
        """Start trials while slots are free."""

    def handle(self, item) -> None:
        """An item of the engine's inbox other than a wake-up."""

    def poll(self) -> None:
        """Now and then, on the loop's thread."""

    def check(self) -> None:
        """Raise a cancel or shutdown of the scheduler."""
        if self.batch is not None:
            self.batch.check()

    def stop(self, state) -> None:
        """The engine stopped ``state`` (called under its lock; direct sinks need nothing)."""

    def checkpointed(self, state, seq: int, blob: bytes) -> None:
        """``state`` took a checkpoint (under the engine's lock)."""

    def ended(self, state) -> None:
        """``state`` ended (under the engine's lock)."""

    def close(self) -> None:
        # Trials that ran between two looks at the cluster end a wait unseen: the views
        # are told it is over all the same, so none shows a finished sweep as waiting.
        if self.workers_wait is not None and self.workers_wait.end():
            self.engine.emit(SweepWaiting(self.engine.run_id, self.engine.name, False, 0))
        if self.batch is not None:
            self.batch.close()

    def run_here(self, state, worker: str, workers: tuple = (), scheduler=None) -> None:
        """Run ``state`` on this thread (direct sink) and tell the engine how it ended.

        ``workers`` and ``scheduler``: the trial's (``trial.workers``, ``trial.scheduler``).
        """
        execution, outcome = self.execute_here(state, worker, workers, scheduler)
        self.engine.finished(state.id, execution, outcome)

    def sink(self, state, execution: str, worker: str = "") -> TrialChannel:
        """Where a trial run on this thread reports: straight to the engine."""
        return DirectSink(self.engine, state.id, execution, worker)

    def execute_here(
        self, state, worker: str, workers: tuple = (), scheduler=None, execution=None
    ) -> tuple:
        """Run ``state`` on this thread (direct sink); ``(execution, outcome)``."""
        engine = self.engine
        execution = execution or f"here-{next(self._executions)}"
        try:
            sink = self.sink(state, execution, worker)
            sink.start()
            attempt = engine.attempt(state.id)
            reported = engine.sweep.reported  # the metric, or every objective
            trial = Trial(state.id, state.config, sink, attempt, reported, workers, scheduler)
            outcome = execute(self.fn, trial)
        except Exception as exc:  # not the trial's own error (those are in the outcome)
            logger.exception("labkit: running trial %d failed", state.id)
            outcome = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        except BaseException as exc:
            if threading.current_thread() is threading.main_thread():
                raise  # the user's Ctrl-C in the sweep's own thread: the loop winds down
            outcome = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        return execution, outcome
