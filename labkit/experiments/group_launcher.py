"""Trials that are groups of worker processes: each running trial holds ``workers_per_trial`` of its own.

With ``workers_per_trial=k`` (k >= 2) on a cluster of worker processes,
:class:`GroupLauncher` starts a trial when k workers are free and gives it
those k alone until it ends: no two running trials share a worker.  The
trial sees them as ``trial.workers`` and ``trial.scheduler``, a scheduler
over them alone on the sweep's client
(:meth:`~labkit.scheduling.DaskScheduler.restricted`): what it runs, a
``DataParallelTrainer``'s ranks (one a worker) and the data they hold,
stays on them.  The store and the board name the group as the trial's worker.

The trial's function runs on a thread of the client, not on one of its
workers: its work runs on the workers anyway (a trainer's epochs, the tasks
of ``trial.scheduler``), the function only drives it.  Here its reports go
straight to the sweep (no socket, the rule decides within ``trial.report``)
and ``trial.scheduler`` shares the client's connection; on a worker it would
need a client of its own there, and hold a rank's process while it waits.
One thing follows: running trials share this process's torch global
generator, so a trial that must be repeatable builds its model from a
``torch.Generator`` of its own rather than after ``torch.manual_seed``.

A trial's end (completed, failed, stopped by the rule or by hand at its
next report) shuts its scheduler down: the tasks it left running are
cancelled and a trainer made on it is closed, so its workers are free for
the next trial at once.  The cluster's workers are counted afresh every
:data:`ASK_EVERY` seconds (workers come and go).
"""

from __future__ import annotations

import contextlib
import logging
import threading

from ..errors import InputError
from ..scheduling.connect import scheduler_identity
from .launcher import ASK_EVERY, Launcher, Recent

__all__ = ["GroupLauncher", "check_group_size", "ASK_EVERY"]

logger = logging.getLogger("labkit.experiments")


def check_group_size(scheduler, workers_per_trial: int) -> None:
    """An :class:`~labkit.errors.InputError` if no group of ``workers_per_trial`` fits.

    Only worker processes count (``workers_per_trial`` counts threads on an
    in-process cluster, where trials share them).
    """
    if workers_per_trial < 2 or not hasattr(scheduler, "client") or scheduler.in_process:
        return
    n = len(scheduler_identity(scheduler.client).get("workers", {}))
    if workers_per_trial > n:
        raise InputError(
            f"workers_per_trial={workers_per_trial}, but the cluster has {n} worker "
            f"process(es): a trial holds workers_per_trial workers of its own; give at "
            f"most {n}, or a bigger cluster",
            argument="workers_per_trial",
        )


class GroupLauncher(Launcher):
    """Each trial on a group of ``workers_per_trial`` free workers, its function on a client thread."""

    def __init__(self, *args):
        super().__init__(*args)
        self.held: dict[int, tuple] = {}  # trial -> the workers it holds
        self.runners: dict[int, threading.Thread] = {}
        self.schedulers: dict[int, object] = {}  # trial -> its scheduler, while it runs
        self._workers = Recent(
            lambda: tuple(sorted(scheduler_identity(self.scheduler.client)["workers"]))
        )
        self.closed = False

    def workers(self) -> tuple:
        """The cluster's workers, sorted (asked at most every :data:`ASK_EVERY` seconds)."""
        return self._workers()

    def threads(self) -> int:
        return len(self.workers()) or 1

    def open(self, scope) -> None:
        check_group_size(self.scheduler, self.workers_per_trial)
        super().open(scope)

    def fill(self) -> None:
        """Start trials while ``workers_per_trial`` workers are free."""
        workers, k, engine = self.workers(), self.workers_per_trial, self.engine
        while True:
            with engine.lock:
                if self.closed or (self.max_concurrent and len(self.held) >= self.max_concurrent):
                    return
                busy = {w for group in self.held.values() for w in group}
                free = [w for w in workers if w not in busy]
                if len(free) < k:
                    return
                state = engine.take()
                if state is None:
                    return
                group = self.held[state.id] = tuple(free[:k])
                runner = self.runners[state.id] = threading.Thread(
                    target=self._run,
                    args=(state, group),
                    daemon=True,
                    name=f"labkit-trial-{state.id}-group",
                )
            runner.start()

    def _run(self, state, group: tuple) -> None:
        """On the trial's thread: its scheduler, its function, then its workers freed."""
        scheduler = None
        try:
            scheduler = self.scheduler.restricted(group)
        except Exception as exc:  # a worker of the group left meanwhile: another group
            self._workers.forget()
            execution, outcome = None, {"status": "lost", "error": f"{type(exc).__name__}: {exc}"}
        else:
            with self.engine.lock:
                self.schedulers[state.id] = scheduler
            execution, outcome = self.execute_here(state, ", ".join(group), group, scheduler)
        finally:
            if scheduler is not None:  # cancels what the trial left running; closes its trainer
                with contextlib.suppress(Exception):
                    scheduler.shutdown()
            with self.engine.lock:  # free before the engine hears: the loop's next fill sees it
                self.held.pop(state.id, None)
                self.runners.pop(state.id, None)
                self.schedulers.pop(state.id, None)
        self.engine.finished(state.id, execution, outcome)

    def close(self) -> None:
        """Shut down the schedulers of trials still running (the loop waited for them)."""
        with self.engine.lock:
            self.closed = True
            schedulers = list(self.schedulers.values())
            runners = list(self.runners.values())
        for scheduler in schedulers:
            with contextlib.suppress(Exception):
                scheduler.shutdown()  # type: ignore[attr-defined]
        for runner in runners:
            runner.join(timeout=2.0)
        super().close()
