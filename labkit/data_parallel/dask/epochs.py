"""Epochs on the workers, over data that lives there; a lost worker costs a few steps.

Every rank gets one task an epoch (:func:`~.rank_tasks.run_epoch`): it reads
its own rows (the Dask array blocks on its worker, see :mod:`.worker_data`,
or a dataset it made, see :func:`~labkit.on_workers`), follows the epoch's
plan (:mod:`.plan`) step by step, and rank 0 streams the step reports.  The
client only waits: for reports, and for the tasks to end, both arriving in
one queue.  A cancel asks every rank to stop after the same step.

When a worker is lost, the ranks left find their collective broken and end
their task.  The client then re-forms the process group over them, puts every
rank back to the last commit (taken every ``commit_every`` steps and at each
epoch's end) and goes on from that step, the rest of the epoch planned over
the ranks left (the lost worker's blocks recomputed by Dask): every row is
still trained once an epoch, and at most ``commit_every`` steps are done
again.  The epoch's record says which.  After ``max_failures`` losses, or
when no worker is left, a :class:`~labkit.errors.WorkerLostError` names the
worker, the epoch and the step.
"""

from __future__ import annotations

import logging
import queue
import time

from ...errors import CancelledError, SchedulerError, WorkerLostError
from .. import rank_tasks as w
from ..reports import StepReport
from ..sources import DaskArrays, WorkerDataset
from ..worker_data import WorkerBlocks, assign

__all__ = ["EpochRunner", "epoch_runner", "COMMIT_EVERY", "MAX_FAILURES"]

logger = logging.getLogger("labkit.data_parallel")

#: Steps between two commits (a lost worker costs at most this many steps again).
COMMIT_EVERY = 50
#: Workers a fit may lose and go on.
MAX_FAILURES = 3


def epoch_runner(group, source, **options) -> "EpochRunner":
    """The runner of ``source`` on ``group``: one per fit, kept between its epochs."""
    runner = getattr(group, "_epochs", None)
    if runner is None or runner.source is not source:
        if runner is not None:
            runner.release()
        runner = group._epochs = EpochRunner(group, source, **options)
    else:
        runner.configure(**options)
    return runner


class EpochRunner:
    """Runs the epochs of one fit on a :class:`~.distributed.DaskReplicaGroup`."""

    def __init__(self, group, source, **options):
        self.group, self.source = group, source
        self.blocks = None
        self.failures = 0
        self.run_id = None
        self._asked = 0.0  # when the scheduler was last asked which workers live
        self.ended: tuple | None = None  # (run, epoch) whose last report was handed on
        self.configure(**options)
        if isinstance(source, DaskArrays):
            self.blocks = WorkerBlocks.of(group._client, source.x, source.y)

    def configure(
        self,
        run: str | None = None,
        shares=None,
        policy: str = "raise",
        commit_every: int | None = COMMIT_EVERY,
        checkpoint=None,
        max_failures: int = MAX_FAILURES,
    ) -> None:
        self.run_id = run or self.run_id or "fit"
        self.shares, self.policy = shares, policy
        self.commit_every, self.checkpoint = commit_every, checkpoint
        self.max_failures = max_failures

    def release(self) -> None:
        """Let go of the blocks this runner placed on the cluster."""
        if self.blocks is not None:
            self.blocks.release()
            self.blocks = None

    # -- one epoch ----------------------------------------------------------------------------

    def run(self, epoch: int, done, check=None) -> dict:
        """Train epoch ``epoch``; ``done(report)`` per step, in order; its summary."""
        __tracebackhide__ = True
        spec = self._spec(epoch)
        seen: dict = {}
        while True:
            futures = self._submit(spec)
            outcome = self._wait(futures, spec, done, check, seen)
            if outcome["status"] == "done":
                return {
                    "seconds": outcome.get("seconds"),
                    "redone": spec["redone"],
                    "recoveries": spec["recoveries"],
                }
            spec = self._recover(spec, outcome)

    def _shares(self) -> list:
        n = len(self.group.names)
        shares = list(self.shares() if callable(self.shares) else (self.shares or [1.0] * n))
        return shares if len(shares) == n else [1.0 / n] * n

    def _spec(self, epoch: int) -> dict:
        """What every rank needs to plan ``epoch`` the same way."""
        source = self.source
        spec = {
            "run": self.run_id,
            "epoch": epoch,
            "batch_size": source.batch_size or 1,
            "shuffle": source.shuffle,
            "seed": source.seed,
            "policy": self.policy,
            "commit_every": self.commit_every,
            "checkpoint": self.checkpoint,
            "topic": self.group.topic,
            "resumes": [],
            "redone": 0,
            "recoveries": [],
        }
        if isinstance(source, WorkerDataset):
            spec.update(
                dataset=source.pickled(),
                dataset_id=source.id,
                rows=self._dataset_length(),
                shares=self._shares(),
            )
        else:
            ranks = assign(
                self.blocks.spans,
                self.blocks.holders(self.group._client, self.group.names),
                self._shares(),
            )
            spec.update(rows=source.rows, ranks=ranks, table=self.blocks.table(ranks))
            spec["first_table"] = spec["table"]
        return spec

    def _dataset_length(self) -> int:
        group = self.group
        found = group._run(
            [
                group._submit(r, _dataset_length, group._gid, self.source.pickled(), self.source.id)
                for r in range(len(group.names))
            ],
            "making the dataset",
        )
        from ...errors import InputError

        lengths = dict(zip(group.names, map(tuple, found)))
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
        if kind == "dataset" and not self.source.batch_size:
            raise InputError(
                "a dataset made on the workers needs batch_size=", argument="batch_size"
            )
        return length

    def _submit(self, spec: dict) -> list:
        group, futures = self.group, []
        for r in range(len(group.names)):
            mine = dict(spec, mine=[])
            xs = ys = ()
            if self.blocks is not None:
                mine["mine"], xs, ys = self.blocks.of_rank(spec["ranks"], r)
                mine["keys"] = self.blocks.keys_of(mine["mine"])
            future = group._submit(r, w.run_epoch, group._gid, r, mine, xs, ys)
            future.add_done_callback(lambda f: group.inbox.put(("ended", f.key)))
            futures.append(future)
        group._batch.track(futures)
        return futures

    def _wait(self, futures: list, spec: dict, done, check, seen: dict) -> dict:
        """Hand on reports until every rank's task ended; what came of them."""
        __tracebackhide__ = True
        group = self.group
        try:
            while not all(f.done() for f in futures):
                try:
                    kind, message = group.inbox.get(timeout=0.25)
                except queue.Empty:
                    kind, message = None, None
                if kind == "report":
                    self._hand_on(message, spec, done, seen)
                if check is not None:
                    self._check(check, futures)
                if self._lost(futures):
                    break
            self._drain(spec, done, seen)
            return self._ended(futures, spec)
        finally:
            group._batch.untrack(futures)
            pending = [f for f in futures if not f.done()]
            if pending:
                group._client.cancel(pending)

    def _hand_on(self, message: dict, spec: dict, done, seen: dict) -> None:
        if message.get("run") != spec["run"]:  # late reports of a run that ended (cancelled)
            return
        if message.get("epoch_end") == spec["epoch"] or "stopped" in message:
            self.ended = (spec["run"], spec["epoch"])  # rank 0 sent its last report
        for values in message.get("reports", ()):
            report = StepReport.from_wire(values)
            if report.epoch == spec["epoch"] and report.step not in seen:
                seen[report.step] = report
                done(report)
            elif report.epoch == spec["epoch"]:  # done again after a recovery
                seen[report.step] = report

    def _drain(self, spec, done, seen) -> None:
        """Reports still on their way once the tasks ended (rank 0 sends before it returns).

        Nothing to wait for once rank 0's last message came (it mostly comes before
        its task's end): waiting for a quiet queue cost every fit 50 ms.
        """
        if self.ended == (spec["run"], spec["epoch"]):
            return
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                kind, message = self.group.inbox.get(timeout=0.05)
            except queue.Empty:
                return
            if kind == "report":
                self._hand_on(message, spec, done, seen)
                if message.get("run") == spec["run"] and (
                    message.get("epoch_end") == spec["epoch"] or "stopped" in message
                ):
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
        once a rank ended, else once a second.
        """
        now = time.monotonic()
        ended = [f for f in futures if f.done()]
        if not ended and now - self._asked < 1.0:
            return False
        self._asked = now
        alive = self.group.alive()
        pairs = list(zip(self.group.names, futures))
        if not any(n not in alive and not f.done() for n, f in pairs):
            return False
        broken = any(f.status == "finished" and f.result().get("status") == "broken" for f in ended)
        return broken or all(f.done() for n, f in pairs if n in alive)

    def _ended(self, futures, spec) -> dict:
        """The epoch's outcome from the ranks' tasks; a rank's own error is raised."""
        __tracebackhide__ = True
        group = self.group
        alive = group.alive()
        results, errors = [], []
        for r, f in enumerate(futures):
            if f.status == "finished":
                results.append(f.result())
            elif f.status == "error" and group.names[r] in alive:
                errors.append((r, f))
        for r, f in errors:
            from ..distributed import _client_error
            from ...errors import for_caller

            err = _client_error(f, r, group.names[r])
            if not isinstance(err, WorkerLostError):
                raise for_caller(err.locate(epoch=spec["epoch"]))
        statuses = {res["status"] for res in results}
        lost = [n for n in group.names if n not in alive]
        if lost or "broken" in statuses:
            step = min([res["step"] for res in results] or [0])
            return {"status": "broken", "step": step, "lost": lost}
        if "stopped" in statuses:
            raise CancelledError("the fit was stopped", epoch=spec["epoch"])
        if statuses - {"done"}:
            raise SchedulerError(
                f"the epoch ended as {sorted(statuses)} on the ranks, and no "
                "rank reported an error",
                epoch=spec["epoch"],
            )
        seconds = max((res.get("seconds") or 0.0) for res in results) if results else None
        return {"status": "done", "seconds": seconds}

    # -- after a lost worker --------------------------------------------------------------------

    def _recover(self, spec: dict, outcome: dict) -> dict:
        """Re-form the group over the workers left, back to the last commit; the new spec."""
        group, started = self.group, time.monotonic()
        lost = outcome["lost"] or ["(a peer whose collective failed)"]
        self.failures += 1
        # batches count from 1 wherever a user reads them; outcome["step"] counts from 0
        lost_at = outcome["step"] + 1
        where = {"worker": ", ".join(lost), "epoch": spec["epoch"], "batch": lost_at}
        alive = group.alive()
        survivors = [n for n in group.names if n in alive]
        if not outcome["lost"] or not survivors or self.failures > self.max_failures:
            why = (
                "no worker of the group is left"
                if not survivors
                else f"{self.failures} workers were lost (max_failures={self.max_failures})"
                if outcome["lost"]
                else "a collective failed while every worker lives"
            )
            raise WorkerLostError(f"worker lost and the fit cannot go on: {why}", **where)
        group._client.run(w.teardown_group, group._gid, on_error="ignore", workers=survivors)
        group.form(survivors)
        ranks = range(len(survivors))
        held = group._run([group._submit(r, w.commits_held, group._gid) for r in ranks], "recovery")
        position = common_commit(held, spec["run"], spec["epoch"])
        if position is None:
            raise WorkerLostError(
                f"the workers left hold no common commit of this epoch (they hold {held}); "
                "the fit cannot go on",
                **where,
            )
        group._run(
            [group._submit(r, w.restore_commit, group._gid, position) for r in ranks],
            "recovery",
        )
        spec = self._resumed(spec, position["step"])
        redone = max(0, outcome["step"] - position["step"])
        spec["redone"] += redone
        spec["recoveries"].append(
            {
                "worker": where["worker"],
                "epoch": spec["epoch"] + 1,  # from 1, as the records count epochs
                "batch": lost_at,
                "resumed_from": position["step"] + 1,
                "redone": redone,
                "ranks": len(survivors),
                "seconds": round(time.monotonic() - started, 3),
            }
        )
        logger.warning(
            "labkit: lost %s at epoch %d, batch %d; the fit goes on over %d worker(s) from batch %d",
            where["worker"],
            spec["epoch"] + 1,
            lost_at,
            len(survivors),
            position["step"] + 1,
        )
        return spec

    def _resumed(self, spec: dict, step: int) -> dict:
        """``spec`` going on from ``step`` over the current ranks."""
        spec = dict(spec, resumes=list(spec["resumes"]))
        if "dataset" in spec:
            spec["resumes"].append((step, self._shares()))
            return spec
        holders = self.blocks.holders(self.group._client, self.group.names)
        ranks = assign(self.blocks.spans, holders, self._shares())
        spec.update(ranks=ranks, table=self.blocks.table(ranks))
        spec["resumes"].append((step, spec["table"]))
        return spec

    # -- evaluation ---------------------------------------------------------------------------

    def evaluate(self, metrics: dict) -> dict:
        """Mean loss and ``metrics`` over every row, each rank on its own rows."""
        group = self.group
        spec = self._spec(0)
        spec["shuffle"] = False
        futures = []
        for r in range(len(group.names)):
            mine = dict(spec, mine=[])
            xs = ys = ()
            if self.blocks is not None:
                mine["mine"], xs, ys = self.blocks.of_rank(spec["ranks"], r)
                mine["keys"] = self.blocks.keys_of(mine["mine"])
            futures.append(group._submit(r, w.evaluate_rows, group._gid, r, mine, metrics, xs, ys))
        results = group._run(futures, "evaluation")
        rows = sum(res["rows"] for res in results)
        names = set().union(*(res["sums"] for res in results))
        return {k: sum(res["sums"].get(k, 0.0) for res in results) / max(rows, 1) for k in names}


def common_commit(held: list, run: str, epoch: int) -> dict | None:
    """The latest commit of ``run``'s epoch ``epoch`` that every rank left holds (``held``:
    each rank's commit positions), or None.

    A peer that died in a step's collective may have let some ranks finish the
    step, and commit after it (at an epoch's end: a commit of the next epoch),
    while others did not; going back to the commit all hold redoes that step.
    """
    from ..rank import same_position

    mine = [p for p in held[0] if p.get("run") == run and p.get("epoch") == epoch]
    common = [p for p in mine if all(any(same_position(p, q) for q in h) for h in held[1:])]
    return max(common, key=lambda p: p["step"], default=None)


def _dataset_length(gid, blob, dataset_id) -> int:
    """On a worker: what its rank made (``"dataset"`` or ``"batches"``) and its length."""
    rank = w.RANKS[gid]
    made = w._dataset_of(rank, {"dataset": blob, "dataset_id": dataset_id})
    return [made.kind, made.length]
