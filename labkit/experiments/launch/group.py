"""Trials that are groups of worker processes: each running trial holds ``workers_per_trial`` of its own.

With ``workers_per_trial=k`` (k >= 2) on a cluster of worker processes,
:class:`GroupLauncher` starts a trial when k workers are free and gives it
those k alone until it ends: no two running trials share a worker.  The
trial sees them as ``trial.workers`` and ``trial.scheduler``, a scheduler
over them alone on the sweep's client
(:meth:`~labkit.scheduling.DaskScheduler.restricted`): what it runs, a
``DataParallelTrainer``'s ranks (one a worker) and the data they hold,
stays on them.  The store and the board name the group as the trial's
worker.  Where some workers have a ``GPU`` resource, groups are made of
those alone, as a trainer picks them.

The trial's function runs on a thread of the client, not on one of its
workers: its work runs on the workers anyway (a trainer's epochs, the tasks
of ``trial.scheduler``), the function only drives it.  Here its reports go
straight to the sweep (no socket, the rule decides within ``trial.report``)
and ``trial.scheduler`` shares the client's connection; on a worker it would
need a client of its own there, and hold a rank's process while it waits.
One thing follows: running trials share this process's torch global
generator, so a trial that must be repeatable builds its model from a
``torch.Generator`` of its own rather than after ``torch.manual_seed``.

**Stops.**  A trial stopped (by its rule, by hand, by a cancel) has its
scheduler shut down at once: a fit running on the group ends after its
current step and raises :class:`~.trial.TrialStopped` in the trial (as
``trial.report`` would), the tasks it left are cancelled, a trainer made on
it is closed (quietly: its model keeps what its last call copied back), and
its workers are free for the next trial, whether its function has returned
yet or not.  The trial ends ``stopped``.

**Lost workers.**  The group is watched (every :data:`WATCH_EVERY`
seconds): when one of its workers leaves the cluster, the trial's scheduler
is shut down (whatever waited on that worker returns), the workers left are
freed, and the trial is queued again: it restarts from its last checkpoint
(``trial.restore()``) on a whole new group, waiting for k free workers if
need be, at most ``max_failures`` times.  This restart is what acts under
a sweep, a fit over data on the workers included: the trainer's own in-fit
recovery (exact too) would go on over fewer workers than the trial asked
for, so the trial gets a whole group again instead.

**Leaving workers.**  A worker of the group that left gracefully (the
scheduler retired it: ``client.retire_workers``, its ``lifetime``, an
adaptive scale-down, as the scheduler's events on its topic say), or that is
being retired, makes the trial *move*: it regroups the same way, but the
restart is counted in its record's ``moves``, never against ``max_failures``.

**Workers that come and go.**  On a cluster whose workers have a
``lifetime``, each worker says when it will retire, and fresh workers import
torch and labkit's rank code in the background as they start
(:func:`~labkit.scheduling.dask.warming.warm_workers`).  A group is made of
free workers that are not leaving and have enough life left for a group to
reach its first checkpoint (1.5 times the quickest of the sweep's recent
groups did, within :data:`~.placement.LIFE_LEAST` and
:data:`~.placement.LIFE_NEEDED` seconds), warm ones first, then the
longest-lived (:func:`~.placement.pick_group`).  A trial whose group has a worker that will
retire before the trial's next checkpoint (the time between its last two)
moves right after the checkpoint it just wrote, rather than losing the work
after it.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ...scheduling.dask.connect import scheduler_identity
from ...scheduling.dask.dask_adapter import left_gracefully, watch_retirements
from ...scheduling.dask.preemption import retires_in
from ...scheduling.dask.warming import warm_workers
from ..trials.trial import TrialStopped
from .channel import TrialChannel
from .launcher import ASK_EVERY, Launcher, Recent
from .placement import (
    LIFE_LEAST,
    LIFE_NEEDED,
    check_group_size,
    group_pool,
    pick_group,
    retiring_now,
    usable_workers,
)
from .sinks import new_execution

__all__ = [
    "GroupLauncher",
    "Hold",
    "HeldSink",
    "check_group_size",
    "group_pool",
    "shut_down",
    "ASK_EVERY",
    "LOST_WAIT",
    "WATCH_EVERY",
    "MOVE_BEFORE",
    "RANK_MODULES",
]

logger = logging.getLogger("labkit.experiments")

#: Seconds between two looks, while groups are held, for workers that left the cluster.
WATCH_EVERY = 0.5

#: Seconds a group whose rank saw its worker lost waits for the cluster to drop that worker.
LOST_WAIT = 10.0

#: A trial moves after a checkpoint when a worker of its group retires within this many
#: times the seconds between its last two checkpoints.
MOVE_BEFORE = 1.5

#: What the workers import as they start (see warming): what a DataParallelTrainer's rank
#: runs, and torch's first optimizer.
RANK_MODULES = (
    "labkit.data_parallel.worker.training",
    "labkit.data_parallel.worker.lifecycle:warm_up",
)


@dataclass
class Hold:
    """What a running trial holds: its group, its execution, its thread and scheduler."""

    trial: int
    group: tuple
    execution: str
    thread: threading.Thread | None = None
    scheduler: Any = None  # once made, on the trial's thread
    ended: str | None = None  # "stopped", "lost" or "moved": the group was taken back early
    why: str = ""
    checkpointed: float | None = None  # when its trial last wrote a checkpoint (monotonic)
    started: float = field(default_factory=time.monotonic)


class HeldSink:
    """A trial's sink while it holds its group; once the group is taken back, a closed door.

    A trial whose group was taken back (a lost worker, a stop) may still run
    for a while on the client; what it reports then (a loss from a broken
    group) is not the trial's: its next report raises ``TrialStopped``.
    """

    def __init__(self, sink, hold: Hold, written=None):
        self._sink, self._hold, self._written = sink, hold, written

    def start(self) -> None:
        self._sink.start()

    def report(self, step, metrics, t) -> bool:
        return self._hold.ended is not None or self._sink.report(step, metrics, t)

    def checkpoint(self, step, blob) -> None:
        if self._hold.ended is None:
            self._sink.checkpoint(step, blob)
            if self._written is not None:
                self._written(self._hold)

    def restore(self):
        return self._sink.restore()

    def stopped(self) -> bool:
        return self._hold.ended is not None or self._sink.stopped()

    def end(self, outcome: dict) -> None:
        self._sink.end(outcome)


class GroupLauncher(Launcher):
    """Each trial on a group of ``workers_per_trial`` free workers, its function on a client thread."""

    def __init__(self, *args):
        super().__init__(*args)
        self.held: dict[int, Hold] = {}  # trial -> what it holds, while it holds it
        ask = lambda: self._pool(  # noqa: E731  (a restricted scheduler's workers alone)
            scheduler_identity(self.scheduler.client)["workers"]
        )
        self._workers = Recent(ask)
        self._alive = Recent(ask, every=WATCH_EVERY)
        self.closed = False
        #: seconds the last groups took from their start to their trial's first checkpoint
        self.firsts: collections.deque = collections.deque(maxlen=8)

    def _pool(self, workers: dict) -> dict:
        """The workers groups are made of (of the cluster's ``workers``), sorted, with
        the scheduler's record of each."""
        return {a: workers[a] for a in group_pool(usable_workers(self.scheduler, workers))}

    def needed(self) -> float:
        """Seconds of life a worker must have left to join a new group: 1.5 times the quickest
        recent group's time to its first checkpoint, within LIFE_LEAST and LIFE_NEEDED."""
        if not self.firsts:
            return LIFE_NEEDED
        return min(LIFE_NEEDED, max(LIFE_LEAST, MOVE_BEFORE * min(self.firsts)))

    def workers(self) -> tuple:
        """The cluster's workers, sorted (asked at most every :data:`ASK_EVERY` seconds)."""
        return tuple(self._workers())

    def threads(self) -> int:
        return len(self.workers()) or 1

    def open(self, scope) -> None:
        self.placement.check_room()  # workers may have left since the sweep was placed
        watch_retirements(self.scheduler.client)  # a retired worker's trial moves, not fails
        # fresh workers ready sooner where workers come and go (lifetimes warm on their own)
        warm_workers(self.scheduler.client, RANK_MODULES, every_worker=self.scheduler.adaptive)
        super().open(scope)

    def fill(self) -> None:
        """Start trials while ``workers_per_trial`` workers are free (and fit, see pick_group).

        The workers as last watched (every :data:`WATCH_EVERY` s): on workers that come
        and go, a group of a worker that just left would only be taken back.
        """
        pool, k, engine = self._alive(), self.workers_per_trial, self.engine
        while True:
            with engine.lock:
                if self.closed or (self.max_concurrent and len(self.held) >= self.max_concurrent):
                    return
                busy = {w for hold in self.held.values() for w in hold.group}
                group = pick_group(pool, [w for w in pool if w not in busy], k, None, self.needed())
                if group is None:
                    return
                state = engine.take()
                if state is None:
                    return
                hold = self.held[state.id] = Hold(state.id, group, new_execution())
                hold.thread = threading.Thread(
                    target=self._run, args=(state, hold), daemon=True,
                    name=f"labkit-trial-{state.id}-group",
                )  # fmt: skip
            hold.thread.start()

    def _run(self, state, hold: Hold) -> None:
        """On the trial's thread: its scheduler, its function, then its workers freed."""
        try:
            scheduler = self.scheduler.restricted(hold.group)
        except Exception as exc:  # a worker of the group left meanwhile: another group
            self._workers.forget()
            gone = self._gone(hold.group, wait=0.0)  # a retired one: a move, as under a trial
            ended, why = self._leaving(gone) if gone else ("lost", "")
            hold.ended, hold.why = ended, why or f"{type(exc).__name__}: {exc}"
            execution, outcome = None, {"status": "failed"}
        else:
            with self.engine.lock:
                hold.scheduler = scheduler
                taken_back = hold.ended is not None  # stopped before its scheduler was made
            if taken_back:
                execution, outcome = hold.execution, {"status": "stopped"}
            else:
                execution, outcome = self.execute_here(
                    state, ", ".join(hold.group), hold.group, scheduler, hold.execution
                )
                if outcome["status"] == "failed":
                    self._lost_under(hold, outcome.get("error") or "")
        self._release(hold)
        self.engine.finished(state.id, execution, _outcome(hold, outcome))

    def _lost_under(self, hold: Hold, error: str) -> None:
        """Mark ``hold`` lost if its trial failed for a worker of its group that left.

        The trainer can see a broken collective before the watch sees the worker gone.
        """
        gone = self._gone(
            hold.group, wait=LOST_WAIT if error.startswith("WorkerLostError") else 0.0
        )
        with self.engine.lock:
            lost = hold.ended is None and (gone or error.startswith("WorkerLostError"))
        if lost:
            self._workers.forget()
            ended, why = self._leaving(gone) if gone else ("lost", "its group lost worker (a rank)")
            with self.engine.lock:
                if hold.ended is None:
                    hold.ended, hold.why = ended, why

    def _leaving(self, gone: list) -> tuple[str, str]:
        """How a group that lost the workers ``gone`` ends: ``moved`` if each left gracefully."""
        graceful = left_gracefully(self.scheduler.client, gone)
        if len(graceful) == len(gone):
            return "moved", f"its group's worker {', '.join(gone)} left"
        return "lost", f"its group lost worker {', '.join(gone)}"

    @staticmethod
    def _retiring(workers: list) -> tuple[str, str]:
        """How a group whose ``workers`` are being retired (still listed) ends: it moves."""
        return "moved", f"its group's worker {', '.join(workers)} is retiring"

    def _gone(self, group: tuple, wait: float) -> list:
        """The workers of ``group`` no longer in the cluster; waits up to ``wait`` s for one to leave.

        A rank's broken connection is seen before the scheduler removes its
        worker: asked at once, the cluster still lists the dead worker, and the
        next group would be made with it (and fail in turn).
        """
        deadline = time.monotonic() + wait
        while True:
            self._alive.forget()
            alive = set(self._alive())
            gone = [w for w in group if w not in alive]
            if gone or time.monotonic() >= deadline:
                return gone
            time.sleep(0.1)

    def sink(self, state, execution: str, worker: str = "") -> TrialChannel:
        """The engine's sink, closed to the trial once its group is taken back."""
        sink = super().sink(state, execution, worker)
        return HeldSink(sink, self.held[state.id], self._checkpointed)

    def _checkpointed(self, hold: Hold) -> None:
        """On the trial's thread: it wrote a checkpoint; it moves now if a worker of its group
        retires before its next one would be written (see :data:`MOVE_BEFORE`)."""
        now, last = time.monotonic(), hold.checkpointed
        hold.checkpointed = now
        if last is None:  # the first since its group formed: no pace known
            self.firsts.append(now - hold.started)
            return
        pool = self._alive()
        left = {w: retires_in(pool[w]) if w in pool else 0.0 for w in hold.group}
        soonest = min(left, key=left.__getitem__)
        if left[soonest] < MOVE_BEFORE * (now - last):
            why = f"its group's worker {soonest} retires in {max(0.0, left[soonest]):.1f} s"
            self.engine.inbox.put(("move", hold.trial, hold.execution, why))

    def _release(self, hold: Hold) -> None:
        """Shut the trial's scheduler down (cancels its tasks, closes its trainer); free its workers."""
        stopped = (
            f"trial {hold.trial} was stopped by the sweep" if hold.ended == "stopped" else None
        )
        shut_down(hold.scheduler, stopped)
        with self.engine.lock:  # free before the engine hears: the loop's next fill sees it
            if self.held.get(hold.trial) is hold:
                del self.held[hold.trial]

    def _take_back(self, hold: Hold, ended: str, why: str) -> None:
        """End ``hold``'s use of its group now (``ended``: stopped or lost); free its workers."""
        with self.engine.lock:
            if hold.ended is not None or self.held.get(hold.trial) is not hold:
                return
            hold.ended, hold.why = ended, why
        self._release(hold)
        self.engine.wake()

    # -- the engine's and the loop's hooks --------------------------------------------------------

    def stop(self, state) -> None:
        self.engine.inbox.put(("stop", state.id))  # handled on the loop: not under the lock

    def handle(self, item) -> None:
        hold = self.held.get(item[1]) if item[0] in ("stop", "move") else None
        if hold is None:
            return
        if item[0] == "stop":
            self._take_back(hold, "stopped", "stopped")
        elif hold.execution == item[2]:  # a move asked by this hold's trial, not a later one's
            logger.info("labkit: trial %d: %s", hold.trial, item[3])
            self._take_back(hold, "moved", item[3])

    def poll(self) -> None:
        """Take back the groups that lost a worker (their trials run again elsewhere)."""
        if not self.held or self.closed:
            return
        alive = self._alive()
        for hold in list(self.held.values()):
            gone = [w for w in hold.group if w not in alive]
            retiring = [w for w in hold.group if w in alive and retiring_now(alive[w])]
            if gone or retiring:
                self._workers.forget()
                ended, why = self._leaving(gone) if gone else self._retiring(retiring)
                log = logger.info if ended == "moved" else logger.warning
                log("labkit: trial %d: %s", hold.trial, why)
                self._take_back(hold, ended, why)

    def close(self) -> None:
        """Shut down the schedulers of trials still running (the loop waited for them)."""
        with self.engine.lock:
            self.closed = True
            holds = list(self.held.values())
        for hold in holds:
            shut_down(hold.scheduler, f"trial {hold.trial} was stopped: the sweep ended")
        for hold in holds:
            if hold.thread is not None:
                hold.thread.join(timeout=2.0)
        super().close()


def shut_down(scheduler, stopped: str | None = None) -> None:
    """Shut a trial's ``scheduler`` down; ``stopped``: why its trial was stopped.

    A stopped trial's scheduler is cancelled with :class:`~.trial.TrialStopped`
    first, so that what waits on it inside the trial (a trainer's fit, its
    ``get_results``) raises that, as a stop raises on every other placement.
    """
    if scheduler is None:
        return
    if stopped is not None:
        for batch in scheduler.window.owners():
            with contextlib.suppress(Exception):  # a batch that ended meanwhile
                batch.cancel(TrialStopped(stopped))
    with contextlib.suppress(Exception):
        scheduler.shutdown()


def _outcome(hold: Hold, outcome: dict) -> dict:
    """What the engine hears: a group taken back early ends as such, unless the trial completed.

    A stopped trial's fit or tasks fail when its scheduler is shut down under
    them; that is its stop, not an error of its own.
    """
    if hold.ended is None or outcome["status"] == "completed":
        return outcome
    if hold.ended in ("lost", "moved"):  # moved: a worker of its group left gracefully
        return {"status": hold.ended, "error": hold.why}
    return {"status": "stopped"}
