"""Epochs on the workers, over data that lives there; a lost worker costs a few steps.

Every rank gets one task an epoch (:func:`~labkit.data_parallel.worker.training.run_epoch`): it reads
its own rows (the Dask array blocks on its worker, see :mod:`.blocks`,
or a dataset it made, see :func:`~labkit.on_workers`), follows the epoch's
plan (a :class:`~labkit.data_parallel.plan.PlannedEpoch`) step by step, and rank 0 streams the step reports.  The
client only waits: for reports, and for the tasks to end, both arriving in
one queue.  A cancel asks every rank to stop after the same step.

When a worker is lost, the ranks left find their collective broken and end
their task.  The client then re-forms the process group over them, puts every
rank back to the last commit (taken every ``commit_every`` steps and at each
epoch's end) and goes on from that step, the rest of the epoch planned over
the ranks left (the lost worker's blocks recomputed by Dask): every row is
still trained once an epoch, and at most ``commit_every`` steps are done
again.  The epoch's record says which.  A worker that left gracefully (the
scheduler retired it: ``client.retire_workers``, its ``lifetime``, an
adaptive scale-down) is recovered from the same way, but as a move: its
recovery says ``moved`` and it counts nothing against ``max_failures``.
Workers that joined the cluster are taken in at an epoch's start, unless the
group is pinned to its workers (:mod:`.growing`): the epoch's record says
``joined``.
After ``max_failures`` losses, or
when no worker is left, a :class:`~labkit.errors.WorkerLostError` names the
worker, the epoch and the step.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import time
from collections.abc import Callable

from ...errors import (
    CancelledError,
    InputError,
    SchedulerError,
    WorkerLostError,
    for_caller,
)
from ...scheduling.dask.dask_adapter import left_gracefully, watch_retirements
from ..fit_data import DaskArrays, Source, WorkerDataset
from ..plan import PlannedEpoch
from ..replica_group import COMMIT_EVERY, MAX_FAILURES, EpochOptions
from ..reports import StepReport
from ..worker import lifecycle as life
from ..worker import training
from ..worker.rank import same_position
from .blocks import WorkerBlocks, assign
from .growing import look_due, newcomers, take_in
from .tasks import client_error

__all__ = ["EpochRunner", "common_commit", "COMMIT_EVERY", "MAX_FAILURES", "SETTLE"]

#: Seconds from the first rank's end to asking the scheduler whether the others' workers live.
SETTLE = 0.05

logger = logging.getLogger("labkit.data_parallel")


class EpochRunner:
    """Runs the epochs of one fit on a :class:`~.group.DaskReplicaGroup`."""

    def __init__(self, group, source: Source):
        self.group, self.source = group, source
        self.blocks: WorkerBlocks | None = None
        self.ranks: list = []  # the rank reading each block of X now
        self.failures = 0
        self.run_id = "fit"
        self.shares: Callable[[], list] | None = None
        self.policy = "raise"
        self.options = EpochOptions()
        self.redone = 0  # steps done again in the epoch now (see its record)
        self.recoveries: list[dict] = []  # its recoveries from lost workers
        self.refused: set[str] = set()  # workers that could not join this fit's group
        self._asked = 0.0  # when the scheduler was last asked which workers live
        self._first_end: tuple = (None, 0.0)  # (an epoch's futures, when a rank was seen ended)
        self.ended: tuple | None = None  # (run, epoch) whose last report was handed on
        if isinstance(source, DaskArrays):
            self.blocks = WorkerBlocks.of(group.client, source.x, source.y)
        watch_retirements(group.client)  # a retired worker is a move, not a failure

    def configure(
        self,
        run: str | None = None,
        shares: Callable[[], list] | None = None,
        policy: str = "raise",
        options: EpochOptions | None = None,
    ) -> None:
        """The fit's run, its shares, its non-finite policy and its options."""
        self.run_id = run or self.run_id
        self.shares, self.policy = shares, policy
        self.options = options or EpochOptions()

    def release(self) -> None:
        """Let go of the blocks this runner placed on the cluster."""
        if self.blocks is not None:
            self.blocks.release()
            self.blocks = None

    # -- one epoch ----------------------------------------------------------------------------

    def run(self, epoch: int, done: Callable[[StepReport], None], check=None) -> dict:
        """Train epoch ``epoch``; ``done(report)`` per step, in order; its summary."""
        __tracebackhide__ = True
        joined = self._grow(epoch)
        planned = self._planned(epoch)
        self.redone, self.recoveries = 0, []
        seen: dict = {}
        while True:
            futures = self._submit(planned)
            outcome = self._wait(futures, planned, done, check, seen)
            if outcome["status"] == "done":
                return {
                    "seconds": outcome.get("seconds"),
                    "redone": self.redone,
                    "recoveries": self.recoveries,
                    "joined": joined,
                }
            planned = self._recover(planned, outcome)

    def _grow(self, epoch: int) -> list[dict]:
        """Workers that joined the cluster, taken in as ranks before ``epoch`` (see .growing)."""
        group, started = self.group, time.monotonic()
        due = not group.pinned and look_due(group, epoch)
        joining = newcomers(group.client, group.names) if due else []
        joining = [a for a in joining if a not in self.refused]
        taken = take_in(group, joining) if joining else []
        if not taken:
            self.refused.update(joining)  # tried once: a worker that cannot join costs no more
            return []
        logger.info(
            "labkit: %s joined the fit at epoch %d; it goes on over %d worker(s)",
            ", ".join(taken),
            epoch + 1,
            len(group.names),
        )
        seconds = round(time.monotonic() - started, 3)
        return [
            {"workers": taken, "epoch": epoch + 1, "ranks": len(group.names), "seconds": seconds}
        ]

    def _shares(self) -> list:
        n = len(self.group.names)
        shares = list(self.shares() if self.shares is not None else [1.0] * n)
        return shares if len(shares) == n else [1.0 / n] * n

    def _planned(self, epoch: int) -> PlannedEpoch:
        """What every rank needs to plan ``epoch`` the same way."""
        source = self.source
        assert isinstance(source, (DaskArrays, WorkerDataset))
        common = {
            "run": self.run_id,
            "epoch": epoch,
            "batch_size": source.batch_size or 1,
            "shuffle": source.shuffle,
            "seed": source.seed,
            "policy": self.policy,
            "commit_every": self.options.commit_every,
            "checkpoint": self.options.checkpoint,
            "topic": self.group.topic,
        }
        if isinstance(source, WorkerDataset):
            return PlannedEpoch(
                rows=self._dataset_length(source),
                dataset=source.pickled(),
                dataset_id=source.id,
                shares=tuple(self._shares()),
                **common,
            )
        assert self.blocks is not None
        self.ranks = assign(
            self.blocks.spans,
            self.blocks.holders(self.group.client, self.group.names),
            self._shares(),
        )
        table = tuple(self.blocks.table(self.ranks))
        return PlannedEpoch(rows=source.rows, first_table=table, table=table, **common)

    def _dataset_length(self, source: WorkerDataset) -> int:
        """The length of what ``make_dataset`` made on every worker (the same everywhere)."""
        tasks = self.group.tasks
        found = tasks.each(
            life.dataset_length, source.pickled(), source.id, what="making the dataset"
        )
        lengths = dict(zip(tasks.names, map(tuple, found), strict=True))
        values = set(lengths.values())
        if len(values) != 1:
            raise InputError(
                f"what make_dataset made differs between the workers: {lengths}; "
                "every worker must make the same dataset or batches",
                argument="make_dataset",
            )
        kind, length = values.pop()
        if length < 1:
            raise InputError(f"the {kind} made on the workers is empty", argument="make_dataset")
        if kind == "dataset" and not source.batch_size:
            raise InputError(
                "a dataset made on the workers needs batch_size=", argument="batch_size"
            )
        return length

    def _each_rank(self, planned: PlannedEpoch, fn, *args) -> list:
        """A task ``fn(gid, rank, planned as the rank gets it, *args, xs, ys)`` per rank."""
        group, futures = self.group, []
        for r in range(len(group.names)):
            mine, xs, ys = planned, [], []
            if self.blocks is not None:
                blocks, xs, ys = self.blocks.of_rank(self.ranks, r)
                mine = planned.for_rank(blocks, self.blocks.keys_of(blocks))
            futures.append(group.tasks.submit(r, fn, group.gid, r, mine, *args, xs, ys))
        return futures

    def _submit(self, planned: PlannedEpoch) -> list:
        """Every rank's task of the epoch, each telling the inbox when it ended."""
        futures = self._each_rank(planned, training.run_epoch)
        inbox = self.group.inbox
        for future in futures:
            future.add_done_callback(lambda f: inbox.put(("ended", f.key)))
        self.group.tasks.track(futures)
        return futures

    def _wait(self, futures: list, planned: PlannedEpoch, done, check, seen: dict) -> dict:
        """Hand on reports until every rank's task ended; what came of them."""
        __tracebackhide__ = True
        inbox = self.group.inbox
        try:
            while not all(f.done() for f in futures):
                try:
                    kind, message = inbox.get(timeout=0.25)
                except queue.Empty:
                    kind, message = None, None
                if kind == "report":
                    self._hand_on(message, planned, done, seen)
                if check is not None:
                    self._check(check, futures)
                if self._lost(futures):
                    break
            self._drain(planned, done, seen)
            return self._ended(futures, planned)
        finally:
            self.group.tasks.settle(futures)

    def _hand_on(self, message: dict, planned: PlannedEpoch, done, seen: dict) -> None:
        """The reports of rank 0's ``message`` that belong to this epoch, each once, to ``done``."""
        if message.get("run") != planned.run:  # late reports of a run that ended (cancelled)
            return
        if _last_of(message, planned):
            self.ended = (planned.run, planned.epoch)  # rank 0 sent its last report
        for values in message.get("reports", ()):
            report = StepReport.from_wire(values)
            if report.epoch == planned.epoch and report.step not in seen:
                seen[report.step] = report
                done(report)
            elif report.epoch == planned.epoch:  # done again after a recovery
                seen[report.step] = report

    def _drain(self, planned: PlannedEpoch, done, seen: dict) -> None:
        """Reports still on their way once the tasks ended (rank 0 sends before it returns).

        Nothing to wait for once rank 0's last message came (it mostly comes before
        its task's end): waiting for a quiet queue cost every fit 50 ms.
        """
        if self.ended == (planned.run, planned.epoch):
            return
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                kind, message = self.group.inbox.get(timeout=0.05)
            except queue.Empty:
                return
            if kind == "report":
                self._hand_on(message, planned, done, seen)
                if message.get("run") == planned.run and _last_of(message, planned):
                    return

    def _check(self, check, futures) -> None:
        """A cancel: every rank stops after the same step; wait for them, then raise."""
        try:
            check()
        except (CancelledError, SchedulerError):
            self.group.stop(self.run_id)
            deadline = time.monotonic() + self.group.timeout
            while not all(f.done() for f in futures) and time.monotonic() < deadline:
                time.sleep(0.02)
            raise

    def _lost(self, futures) -> bool:
        """Whether a rank's worker left, and the ranks left need not be waited for.

        The lost rank's task never ends by itself (it is bound to its worker).
        Go on once a rank ended broken (a rank still in a collective with the
        dead peer is freed when its group is torn down), or once every rank on
        a live worker ended: done, when the peer died after the epoch's last
        collective (a full-batch epoch is one step).  The scheduler is asked
        once a rank ended :data:`SETTLE` seconds ago (the others mostly end
        meanwhile: every round trip after the last step is the fit's time), else
        once a second.
        """
        now = time.monotonic()
        ended = [f for f in futures if f.done()]
        if len(ended) == len(futures):
            return False  # every rank ended: :meth:`_ended` asks once (a round trip a fit less)
        if ended and self._first_end[0] is not futures:  # this epoch's first rank seen ended
            self._first_end = (futures, now)
        due = self._first_end[1] + SETTLE if ended else self._asked + 1.0
        if now < due:
            return False
        self._asked = now
        alive = self.group.alive()
        pairs = list(zip(self.group.names, futures, strict=True))
        if not any(n not in alive and not f.done() for n, f in pairs):
            return False
        broken = any(f.status == "finished" and f.result().get("status") == "broken" for f in ended)
        return broken or all(f.done() for n, f in pairs if n in alive)

    def _ended(self, futures: list, planned: PlannedEpoch) -> dict:
        """The epoch's outcome from the ranks' tasks; a rank's own error is raised."""
        __tracebackhide__ = True
        names = self.group.names
        alive = self.group.alive()
        results = [f.result() for f in futures if f.status == "finished"]
        for r, f in enumerate(futures):
            if f.status == "error" and names[r] in alive:
                err = client_error(f, r, names[r])
                if not isinstance(err, WorkerLostError):
                    raise for_caller(err.locate(epoch=planned.epoch))
        statuses = {res["status"] for res in results}
        lost = [n for n in names if n not in alive]
        if lost or "broken" in statuses:
            step = min([res["step"] for res in results] or [0])
            return {"status": "broken", "step": step, "lost": lost}
        if any(f.status == "cancelled" for f in futures):  # by the scheduler: never "done"
            self.group.tasks.check_batch("fit")
            raise SchedulerError("the epoch's tasks were cancelled", epoch=planned.epoch)
        if "stopped" in statuses:
            raise CancelledError("the fit was stopped", epoch=planned.epoch)
        if statuses - {"done"}:
            raise SchedulerError(
                f"the epoch ended as {sorted(statuses)} on the ranks, and no "
                "rank reported an error",
                epoch=planned.epoch,
            )
        seconds = max((res.get("seconds") or 0.0) for res in results) if results else None
        return {"status": "done", "seconds": seconds}

    # -- after a lost worker --------------------------------------------------------------------

    def _recover(self, planned: PlannedEpoch, outcome: dict) -> PlannedEpoch:
        """Re-form the group over the workers left, back to the last commit; the epoch resumed."""
        group, started = self.group, time.monotonic()
        lost = outcome["lost"] or ["(a peer whose collective failed)"]
        moved = bool(outcome["lost"]) and left_gracefully(group.client, lost) == lost
        self.failures += 0 if moved else 1
        # batches count from 1 wherever a user reads them; outcome["step"] counts from 0
        lost_at = outcome["step"] + 1
        where = {"worker": ", ".join(lost), "epoch": planned.epoch, "batch": lost_at}
        alive = group.alive()
        survivors = [n for n in group.names if n in alive]
        self._check_can_go_on(bool(outcome["lost"]), survivors, where)
        group.tasks.beside(life.teardown_group, group.gid, workers=survivors)
        group.form(survivors)
        held = group.tasks.each(life.commits_held, what="recovery")
        position = common_commit(held, planned.run, planned.epoch)
        if position is None:
            raise WorkerLostError(
                f"the workers left hold no common commit of this epoch (they hold {held}); "
                "the fit cannot go on",
                **where,
            )
        group.tasks.each(life.restore_commit, position, what="recovery")
        planned = self._resumed(planned, position["step"])
        redone = max(0, outcome["step"] - position["step"])
        self.redone += redone
        self.recoveries.append(
            {
                "worker": where["worker"],
                "epoch": planned.epoch + 1,  # from 1, as the records count epochs
                "batch": lost_at,
                "resumed_from": position["step"] + 1,
                "redone": redone,
                "ranks": len(survivors),
                "moved": moved,
                "seconds": round(time.monotonic() - started, 3),
            }
        )
        logger.warning(
            "labkit: lost %s at epoch %d, batch %d; the fit goes on over %d worker(s) from batch %d",
            where["worker"],
            planned.epoch + 1,
            lost_at,
            len(survivors),
            position["step"] + 1,
        )
        return planned

    def _check_can_go_on(self, lost: bool, survivors: list, where: dict) -> None:
        """Raise when the fit cannot go on: no worker left, too many lost, or none lost."""
        if lost and survivors and self.failures <= self.options.max_failures:
            return
        why = (
            "no worker of the group is left"
            if not survivors
            else f"{self.failures} workers were lost (max_failures={self.options.max_failures})"
            if lost
            else "a collective failed while every worker lives"
        )
        raise WorkerLostError(f"worker lost and the fit cannot go on: {why}", **where)

    def _resumed(self, planned: PlannedEpoch, step: int) -> PlannedEpoch:
        """``planned`` going on from ``step`` over the current ranks."""
        if planned.made_on_workers:
            return planned.resumed(step, self._shares())
        assert self.blocks is not None
        holders = self.blocks.holders(self.group.client, self.group.names)
        self.ranks = assign(self.blocks.spans, holders, self._shares())
        return planned.resumed(step, self.blocks.table(self.ranks))

    # -- evaluation ---------------------------------------------------------------------------

    def evaluate(self, metrics: dict) -> dict:
        """Mean loss and ``metrics`` over every row, each rank on its own rows."""
        planned = dataclasses.replace(self._planned(0), shuffle=False)
        futures = self._each_rank(planned, training.evaluate_rows, metrics)
        results = self.group.tasks.run(futures, "evaluation")
        rows = sum(res["rows"] for res in results)
        names: set[str] = set().union(*(res["sums"] for res in results))
        return {k: sum(res["sums"].get(k, 0.0) for res in results) / max(rows, 1) for k in names}


def common_commit(held: list, run: str, epoch: int) -> dict | None:
    """The latest commit of ``run``'s epoch ``epoch`` that every rank left holds (``held``:
    each rank's commit positions), or None.

    A peer that died in a step's collective may have let some ranks finish the
    step, and commit after it (at an epoch's end: a commit of the next epoch),
    while others did not; going back to the commit all hold redoes that step.
    """
    mine = [p for p in held[0] if p.get("run") == run and p.get("epoch") == epoch]
    common = [p for p in mine if all(any(same_position(p, q) for q in h) for h in held[1:])]
    return max(common, key=lambda p: p["step"], default=None)


def _last_of(message: dict, planned: PlannedEpoch) -> bool:
    """Whether rank 0's ``message`` is its last of the epoch (its end, or a stop)."""
    return message.get("epoch_end") == planned.epoch or "stopped" in message
