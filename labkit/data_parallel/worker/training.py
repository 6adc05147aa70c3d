"""What a rank trains on its Dask worker: client-fed steps, and whole epochs of its own rows.

The loops are long: :func:`run_epoch` trains a whole epoch on the rows the rank
reads (:mod:`.inputs`), following the epoch's
:class:`~labkit.data_parallel.plan.PlannedEpoch`, and :func:`run_steps` several
steps of batches the client sent ahead; both leave the worker's thread pool
(``secede``) so that other work, another trainer's loop among it, runs beside
them.  Rank 0 streams its reports (:mod:`..reports`).  A collective that fails
because a peer is gone ends the loop with ``{"status": "broken"}``: the client
then re-forms the group from the last commit.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

import numpy as np
import torch
from distributed import get_worker, secede

from ...checkpoints import atomic_dump
from ...errors import LabkitError
from ...scheduling.workers.shared import SharedChunk, unmap
from ..guards import NonFiniteLossError
from ..plan import PlannedEpoch
from ..reports import ReportStream, StepReport, batch_number
from ..split import row_weights
from .inputs import Input, inputs_of
from .lifecycle import to_cpu
from .rank import RANKS, Rank, StepOutcome, rank_error, train_step

__all__ = ["run_steps", "run_epoch", "evaluate", "evaluate_rows"]

logger = logging.getLogger("labkit.data_parallel")


def _leave_pool() -> None:
    """Free this worker thread's slot: a loop is long, other tasks may run beside it."""
    # not in a worker task (tests call it directly): nothing to leave
    with contextlib.suppress(ValueError, KeyError, ImportError):
        secede()


def _stream(rank: Rank, topic, run: str):
    """Rank 0's report stream (its messages name ``run``); the others report nothing."""
    if rank.rank != 0 or topic is None:
        return ReportStream(None, None)
    return ReportStream(topic, get_worker().log_event, run=run)


def _step(rank: Rank, x, y, weight, key, epoch, step, policy, shares, stream):
    """One step and its report; raises the step's error, returns the outcome otherwise."""
    started = time.perf_counter()
    outcome = train_step(rank, x, y, weight, key, rank.steps)
    wall = time.perf_counter() - started
    if outcome.error is not None:
        raise outcome.error.locate(epoch=epoch, batch=batch_number(step))
    if outcome.nonfinite and policy == "raise" and not np.isfinite(outcome.local_loss):
        raise NonFiniteLossError.of(outcome.local_loss, rank.rank, rank.name).locate(
            epoch=epoch, batch=batch_number(step)
        )
    stream.add(
        StepReport(
            epoch,
            step,
            outcome.loss if outcome.ok else float("nan"),
            tuple(outcome.rows),
            tuple(outcome.seconds),
            wall,
            time.time(),
            skipped=outcome.nonfinite,
            key=key,
            shares=tuple(shares),
            losses=tuple(outcome.losses),
        )
    )
    return outcome


def run_steps(gid, rank_no, run, commands, policy="raise", after=None):
    """Client-fed steps of ``run``: ``commands`` lists ``(epoch, step, x, y, weight, key, shares)``
    (a :class:`~labkit.scheduling.workers.shared.SharedChunk` of them: mapped here).

    Returns ``{"status": "done" | "stopped" | "failed" | "error" | "broken" | "halted",
    "done": steps, "reports": [...], "unmapped": bool}`` (reports from rank 0 only;
    ``unmapped``: nothing here still views the shared-memory segments, so the client
    may reuse them).  ``after`` is the command sent before (so that commands run in
    order); a halted run skips the rest.  A step's own error (located) comes back as
    ``"error"`` with the reports of the steps before it, so the client counts those as
    done before it raises.
    """
    rank = RANKS[gid]
    _leave_pool()
    if not rank.enter(run):
        return {"status": "halted", "done": 0, "reports": [], "rank": rank.rank, "unmapped": True}
    mapped: list = []
    if isinstance(commands, SharedChunk):
        commands = commands.materialize(mapped)
    result = _run_commands(rank, commands, policy)
    del commands  # its views of the segments, before they are unmapped
    return {**result, "unmapped": unmap(mapped)}


def _run_commands(rank: Rank, commands, policy: str) -> dict:
    """The steps of ``commands`` on ``rank``: ``run_steps``'s result (without ``unmapped``)."""
    kept: list = []
    stream = ReportStream(
        "commands", lambda topic, message: kept.append(message), every=float("inf")
    )
    done, status = 0, "done"
    extra: dict[str, Any] = {}
    try:
        for epoch, step, x, y, weight, key, shares in commands:
            x, y = _tensor(x), None if y is None else _tensor(y)
            outcome = _step(rank, x, y, weight, key, epoch, step, policy, shares, stream)
            if not outcome.ok and policy == "raise":
                status = "failed"
                break
            done += 1
            if outcome.stop:
                status = "stopped"
                break
    except Exception as exc:  # raised by a collective (a peer is gone), or the step's own
        if _is_user_error(exc):
            status, extra = "error", {"error": exc}
        else:
            status, extra = "broken", {"reason": f"{type(exc).__name__}: {exc}"}
    rank.halted = status != "done"
    stream.flush()
    reports = [r for message in kept for r in message["reports"]] if rank.rank == 0 else []
    return {"status": status, "done": done, "reports": reports, "rank": rank.rank, **extra}


def _tensor(value):
    """A share as sent (a numpy array, or a tensor) as a tensor, 64-byte aligned.

    A share that came by socket is a view into its frame at any byte offset,
    and MKL's float64 results change in their last bit with the alignment of
    their input: the same step would differ between a share from shared
    memory (aligned) and one by socket.  A misaligned share is copied once.
    """
    tensor = torch.from_numpy(value) if isinstance(value, np.ndarray) else value
    return tensor.clone() if tensor.data_ptr() % 64 else tensor


def _is_user_error(exc: BaseException) -> bool:
    """Errors of the step itself come out located (labkit errors), peers' losses do not."""
    return isinstance(exc, LabkitError)


# -- an epoch on the rows the rank reads ---------------------------------------------------


def run_epoch(gid: str, rank_no: int, epoch: PlannedEpoch, xs=(), ys=(), after=None) -> dict:
    """Train ``epoch`` (from its first step on) on the rows this rank reads.

    ``xs``/``ys`` are this rank's blocks (Dask hands them over where they lie);
    a dataset made on the worker takes their place when ``epoch`` names one.
    ``after`` is the epoch before (so that epochs run in order).
    """
    rank = RANKS[gid]
    _leave_pool()
    if not rank.enter(epoch.run):
        return {"status": "halted", "step": 0, "rank": rank.rank}
    if rank.commit is None or rank.commit["position"].get("run") != epoch.run:
        rank.take_commit(
            {"run": epoch.run, "epoch": epoch.epoch, "step": 0, "steps": rank.steps}
        )  # where a fit that loses a worker goes back
    source = inputs_of(rank, epoch, xs, ys)
    stream = _stream(rank, epoch.topic, epoch.run)
    started, skipped = time.perf_counter(), 0
    for step, x, y, key, counts in source.steps(epoch, rank):
        outcome, ended = _epoch_step(rank, epoch, stream, step, x, y, key, counts)
        if ended is not None:
            return ended
        assert outcome is not None
        skipped += not outcome.ok
        _maybe_commit(rank, epoch, step + 1, last=step + 1 == source.total(epoch))
        if outcome.stop:
            rank.halted = True
            stream.flush(stopped=step + 1)
            return {"status": "stopped", "step": step + 1, "rank": rank.rank}
    seconds = time.perf_counter() - started
    stream.flush(epoch_end=epoch.epoch, seconds=seconds)
    return {
        "status": "done",
        "step": source.total(epoch),
        "rank": rank.rank,
        "seconds": seconds,
        "skipped": skipped,
    }


def _epoch_step(
    rank: Rank, epoch: PlannedEpoch, stream: ReportStream, step: int, x, y, key, counts
) -> tuple[StepOutcome | None, dict | None]:
    """One step of an epoch: ``(outcome, None)``, or ``(None, the task's result)`` when
    the epoch ends here (a collective broken by a lost peer, a step that failed)."""
    weight = 1.0 if rank.sum_loss else len(x) / max(sum(counts), 1)
    try:
        outcome = _step(
            rank, x, y, weight, key, epoch.epoch, step, epoch.policy, row_weights(counts), stream
        )
    except Exception as exc:  # the step's own error, or a collective's (a peer is gone)
        rank.halted = True
        stream.flush()
        if _is_user_error(exc):
            raise
        reason = f"{type(exc).__name__}: {exc}"
        return None, {"status": "broken", "step": step, "rank": rank.rank, "reason": reason}
    if not outcome.ok and epoch.policy == "raise":
        rank.halted = True
        stream.flush()
        return None, {"status": "failed", "step": step, "rank": rank.rank}
    return outcome, None


def _maybe_commit(rank: Rank, epoch: PlannedEpoch, next_step: int, last: bool = False) -> None:
    """Every ``commit_every`` steps and at an epoch's end: a commit every rank keeps (and
    rank 0's checkpoint); a lost worker costs at most the steps since the last one."""
    every = epoch.commit_every or 0
    if not (last or (every and rank.steps % every == 0)):
        return
    position = {
        "run": epoch.run,
        "epoch": epoch.epoch + (1 if last else 0),
        "step": 0 if last else next_step,
        "steps": rank.steps,
    }
    rank.take_commit(position)
    if rank.rank == 0 and epoch.checkpoint and rank.commit is not None:
        _write_checkpoint(rank.commit, epoch.checkpoint)


#: path -> the number of the newest checkpoint asked for (guarded by _ASKED)
_NEWEST: dict[str, int] = {}
_ASKED = threading.Lock()
_WRITING = threading.Lock()  # one checkpoint write at a time on this worker


def _write_checkpoint(commit: dict, path: str) -> None:
    """Write ``commit`` to ``path`` (labkit's safe format) from a thread of its own.

    The writes are one at a time and an older commit is never written after a
    newer one (threads may start out of order on a busy machine): the file
    always ends with the last commit.
    """
    snapshot = to_cpu(commit)
    with _ASKED:
        number = _NEWEST[path] = _NEWEST.get(path, 0) + 1

    def write():
        with _WRITING:
            if _NEWEST.get(path) != number:  # a newer commit came: it is written instead
                return
            try:
                atomic_dump(snapshot, path)
            except Exception as exc:  # a failed checkpoint must not stop the training
                logger.warning("labkit: could not write the checkpoint %s: %s", path, exc)

    threading.Thread(target=write, name="labkit-checkpoint", daemon=True).start()


# -- evaluation -------------------------------------------------------------------------------


def evaluate(gid: str, rank_no: int, x, y, metrics: dict, key=None) -> dict:
    """Mean loss and metrics of this rank's replica on ``(x, y)``, in eval mode."""
    rank = RANKS[gid]
    training = rank.model.training
    try:
        rank.model.eval()
        with torch.no_grad():
            out = rank.buckets.get(0, key, replica=rank_no, device=rank.name)(x.to(rank.device))
            y = None if y is None else y.to(rank.device)
            values = {"loss": rank.loss_fn(out, y), **{k: f(out, y) for k, f in metrics.items()}}
        return {k: float(v) for k, v in values.items()}
    except Exception as exc:
        raise rank_error(exc, rank_no, rank.name) from None
    finally:
        rank.model.train(training)


def evaluate_rows(gid: str, rank_no: int, epoch: PlannedEpoch, metrics: dict, xs=(), ys=()) -> dict:
    """Row-weighted sums of the loss and metrics over every row this rank reads, and the rows."""
    rank = RANKS[gid]
    source: Input = inputs_of(rank, epoch, xs, ys)
    sums: dict[str, float] = {}
    n = 0
    for _, x, y, key, _ in source.steps(epoch, rank):
        if not len(x):
            continue
        values = evaluate(gid, rank_no, x, y, metrics, key)
        for k, v in values.items():
            sums[k] = sums.get(k, 0.0) + v * len(x)
        n += len(x)
    return {"sums": sums, "rows": n}
