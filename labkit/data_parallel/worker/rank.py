"""One rank of a replica group on a Dask worker: its replica, and one training step.

A worker keeps a :class:`Rank` for every replica group that has a rank on
it (several trainers may share a worker), in ``RANKS`` by group id.  A step
(:func:`train_step`) runs forward and backward on this rank's rows; the
:class:`~labkit.data_parallel.overlap.OverlappedReducer` sums the weighted
gradients bucket by bucket during backward and carries the step's own
numbers with the last bucket: failures, non-finite losses, a stop request,
the weighted loss, the rows, each rank's seconds, which parameters had a
gradient, and the batch-norm statistics.  So every rank knows, without a
collective of its own, whether the step holds: if any rank failed (or its
loss was not finite) every rank undoes the step (gradients dropped, buffers
as before), and the replicas stay identical.  Batch-norm running statistics
are pooled exactly, as one device that saw the whole batch would have them.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from ...errors import LabkitError, located
from ..batchnorm import BatchNormJoin
from ..bucketing import BucketModules
from ..guards import check_loss
from ..monitors import ReplicaStep
from ..reports import step_number
from .overlap import OverlappedReducer
from .process_group import ProcessGroup

__all__ = ["Rank", "RANKS", "StepOutcome", "train_step", "rank_error"]

RANKS: dict[str, Rank] = {}  # group id -> this worker's Rank of it

# the agreement vector: its fixed head, then rows, seconds, losses and a non-finite loss's
# kind per rank, which parameters had a gradient, the batch-norm statistics
_FAILED, _NONFINITE, _STOP, _LOSS, _CHANGED, _HEAD = 0, 1, 2, 3, 4, 5
_KINDS = ("finite", "nan", "inf", "-inf")  # a non-finite loss, by its code in the agreement


def rank_error(exc: BaseException, rank: int, name: str) -> LabkitError:
    """``exc`` as a labkit error naming the replica and its worker."""
    return located(exc, f"replica {rank}", replica=rank, device=name)


@dataclass
class StepOutcome:
    """What every rank knows of a step once it is over."""

    loss: float  # the batch's loss (rows-weighted mean of the ranks', or their sum)
    rows: list  # each rank's rows
    seconds: list  # each rank's forward and backward, in seconds
    failed: bool = False  # some rank raised: the step was undone everywhere
    nonfinite: bool = False  # some rank's loss was NaN or infinite: undone everywhere
    stop: bool = False  # some rank was asked to stop after this step
    error: LabkitError | None = None  # this rank's own error, if it raised (located)
    local_loss: float = 0.0
    losses: list = field(default_factory=list)  # each rank's own loss

    @property
    def nonfinite_rank(self) -> int | None:
        """The first rank whose loss was NaN or infinite."""
        return next((r for r, v in enumerate(self.losses) if not math.isfinite(v)), None)

    @property
    def ok(self) -> bool:
        return not (self.failed or self.nonfinite)


@dataclass
class Rank:
    """What one worker keeps of one replica group between tasks."""

    name: str
    device: torch.device
    model: torch.nn.Module
    loss_fn: Any
    optimizer: torch.optim.Optimizer
    bucket_model: Any = None
    rank: int = 0
    world: int = 1
    group: ProcessGroup | None = None
    reducer: OverlappedReducer | None = None
    monitors: list = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    commit: dict | None = None  # the last commit: state and where the fit was
    earlier: dict | None = None  # the commit before it (the ranks left may not all hold the last)
    data: dict = field(default_factory=dict)  # cached inputs (blocks, datasets) by key
    steps: int = 0
    run: str | None = None  # the run (a fit, a step) whose commands this rank takes now
    halted: bool = False  # that run stopped or failed at a step all ranks agreed on
    forming: int | None = None  # the generation of the process group this rank waits to form
    called_off: int | None = None  # the generation whose forming was called off (a peer left)

    def __post_init__(self):
        self.buckets = BucketModules(self.bucket_model, [self.model])
        self.params = list(self.model.parameters())
        named = list(self.model.named_buffers())
        self.buffers = [b for _, b in named]
        self.bn = BatchNormJoin(self.model, [self.model])
        pooled = {
            f"{layer}.{n}" if layer else n
            for layer in self.bn.layers
            for n in ("running_mean", "running_var", "num_batches_tracked")
        }
        self.floating = [
            k for k, (n, b) in enumerate(named) if b.is_floating_point() and n not in pooled
        ]
        modules = dict(self.model.named_modules())
        self.bn_sizes = [modules[name].num_features for name in self.bn.layers]
        self.sum_loss = getattr(self.loss_fn, "reduction", "mean") == "sum"

    def enter(self, run: str) -> bool:
        """Take commands of ``run``; False when that run already halted (skip the command).

        Every rank halts a run at the same agreed step, so commands sent ahead
        are skipped alike everywhere and no rank waits alone in a collective.
        """
        if run != self.run:
            self.run, self.halted = run, False
            self.stop.clear()
        return not self.halted

    def join(self, group, rank: int, world: int) -> None:
        """Take ``group`` (rank ``rank`` of ``world``); the reducer is made for it."""
        self.close_group()
        self.group, self.rank, self.world = group, rank, world
        self.halted = False  # a group formed anew (after a lost peer) takes the run up again
        extra = _HEAD + 4 * world + len(self.params) + sum(1 + 2 * c for c in self.bn_sizes)
        self.reducer = OverlappedReducer(self.params, group, extra=extra)

    def close_group(self) -> None:
        """Let go of the process group (this group only); the replica stays."""
        if self.reducer is not None:
            self.reducer.close()
            self.reducer = None
        if self.group is not None:
            self.group.close()
            self.group = None

    def close(self) -> None:
        self.close_group()
        self.bn.remove()

    # -- commits: the state every rank can go back to ------------------------------------

    def take_commit(self, position: dict) -> None:
        """Keep a copy of the state after the step described by ``position``.

        The commit before it is kept too: a peer that dies during a step's
        collective may let some ranks finish that step (and commit after it)
        and not others, so the ranks left hold either commit, never older.
        """
        self.earlier, self.commit = (
            self.commit,
            {
                "model": _copy(self.model.state_dict()),
                "optimizer": _copy(self.optimizer.state_dict()),
                "position": dict(position),
            },
        )

    def commits(self) -> list:
        """The positions of the commits this rank holds, the last first."""
        return [dict(c["position"]) for c in (self.commit, self.earlier) if c is not None]

    def restore_commit(self, position: dict | None = None) -> dict:
        """Go back to the commit at ``position`` (the last by default); its position."""
        chosen = self.commit
        if position is not None:
            chosen = next(
                c
                for c in (self.commit, self.earlier)
                if c is not None and same_position(c["position"], position)
            )
            if chosen is self.earlier:  # what came after it is undone
                self.commit, self.earlier = self.earlier, None
        if chosen is None:
            raise LookupError("this rank holds no commit to go back to")
        self.model.load_state_dict(chosen["model"])
        self.optimizer.load_state_dict(_copy(chosen["optimizer"]))
        self.steps = chosen["position"].get("steps", self.steps)
        return dict(chosen["position"])


def same_position(a: dict, b: dict) -> bool:
    """Whether two commit positions name the same point of a fit (run, epoch and step)."""
    return all(a.get(k) == b.get(k) for k in ("run", "epoch", "step"))


def _copy(state):
    """A deep copy of a state dict, tensors cloned (on their device)."""
    if isinstance(state, torch.Tensor):
        return state.detach().clone()
    if isinstance(state, dict):
        return {k: _copy(v) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(_copy(v) for v in state)
    return state


def train_step(rank: Rank, x, y, weight: float, key=None, step: int = 0) -> StepOutcome:
    """One step on this rank's rows ``(x, y)``; its gradient counts ``weight`` in the sum.

    Every rank of the group calls this for the same step (a rank without rows
    passes empty tensors), so that the collectives match.
    """
    rank.bn.start()
    before = [b.detach().clone() for b in rank.buffers]
    rank.optimizer.zero_grad(set_to_none=True)
    state: dict[str, Any] = {
        "error": None,
        "loss": 0.0,
        "seconds": 0.0,
        "output": None,
        "changed": False,
    }
    start, rows = time.perf_counter(), len(x)

    # the reducer keeps this until the next step: it must not keep x (a mapped share
    # would stay mapped, see .dask_steps)
    def numbers(present):  # called as the last bucket leaves: the end of backward
        state["seconds"] = time.perf_counter() - start
        _monitor(rank, state, rows, key, step)
        state["changed"] = any(not torch.equal(before[k], rank.buffers[k]) for k in rank.floating)
        return _agreement(rank, state, present, rows)

    reducer = rank.reducer
    assert reducer is not None, "a step needs the rank to have joined its group"
    reducer.start(weight, numbers)
    try:
        model = rank.buckets.get(
            0, key, replica=rank.rank, device=rank.name, step=step_number(step)
        )
        if len(x):
            _forward_backward(rank, model, x, y, state)
    except Exception as exc:  # still take part in every collective below
        state["error"] = exc
    summed = reducer.finish()
    assert summed is not None  # the agreement vector always rides along
    outcome = _outcome(rank, summed, state)
    if not outcome.ok:
        _undo(rank, before)
        return outcome
    present = _HEAD + 4 * rank.world
    reducer.drop_unused(summed[present : present + len(rank.params)])
    with torch.no_grad():
        rank.optimizer.step()
        _pool_batchnorm(rank, summed[present + len(rank.params) :])
        if summed[_CHANGED] > 0.5:
            _average_buffers(rank, len(x) / max(sum(outcome.rows), 1))
    rank.steps += 1
    return outcome


def _forward_backward(rank: Rank, model, x, y, state: dict) -> None:
    xd = x.to(rank.device, non_blocking=True)
    yd = None if y is None else y.to(rank.device, non_blocking=True)
    output = model(xd)
    loss = rank.loss_fn(output, yd)
    check_loss(loss)
    state["output"], state["loss"] = output.detach(), float(loss.detach())
    if math.isfinite(state["loss"]):
        loss.backward()


def _monitor(rank: Rank, state: dict, rows: int, key, step: int) -> None:
    """The user's monitors, after backward; one that raises fails the step like the replica."""
    if not rank.monitors or state["error"] is not None or state["output"] is None:
        return
    record = ReplicaStep(
        step,
        rank.rank,
        rank.name,
        rows,
        torch.tensor(state["loss"]),
        state["output"],
        state["seconds"],
        key,
    )
    try:
        for fn in rank.monitors:
            fn(record)
    except Exception as exc:
        state["error"] = exc


def _agreement(rank: Rank, state: dict, present: list[bool], rows: int) -> torch.Tensor:
    """This rank's part of the vector the ranks sum with the last bucket."""
    head = [
        state["error"] is not None,
        state["error"] is None and not math.isfinite(state["loss"]),
        rank.stop.is_set(),
        0.0 if state["error"] is not None else state["loss"] * _loss_weight(rank, rows),
        state["changed"],
    ]
    counts, seconds, losses, kinds = ([0.0] * rank.world for _ in range(4))
    loss = state["loss"]
    counts[rank.rank], seconds[rank.rank] = rows, state["seconds"]
    losses[rank.rank] = loss if math.isfinite(loss) else 0.0
    kinds[rank.rank] = _KINDS.index(str(loss)) if not math.isfinite(loss) else 0.0
    parts = [
        torch.tensor(
            head + counts + seconds + losses + kinds + [float(p) for p in present],
            dtype=torch.float64,
        )
    ]
    parts += _batchnorm_part(rank)
    buckets = rank.reducer.buckets if rank.reducer is not None else []
    dtype = buckets[-1].flat.dtype if buckets else torch.float64
    return torch.cat(parts).to(dtype)


def _loss_weight(rank: Rank, rows: int) -> float:
    """How this rank's loss counts in the batch's: its rows (a sum loss: as it is)."""
    return 1.0 if rank.sum_loss else float(rows)


def _outcome(rank: Rank, summed: torch.Tensor, state: dict) -> StepOutcome:
    w = rank.world
    values = summed[: _HEAD + 4 * w].double().tolist()
    rows = [int(round(v)) for v in values[_HEAD : _HEAD + w]]
    losses = [
        v if k < 0.5 else float(_KINDS[int(round(k))])
        for v, k in zip(values[_HEAD + 2 * w : _HEAD + 3 * w], values[_HEAD + 3 * w :], strict=True)
    ]
    loss = values[_LOSS] if rank.sum_loss else values[_LOSS] / max(sum(rows), 1)
    error = state["error"]
    return StepOutcome(
        loss=loss,
        rows=rows,
        seconds=values[_HEAD + rank.world : _HEAD + 2 * rank.world],
        failed=values[_FAILED] > 0.5,
        nonfinite=values[_NONFINITE] > 0.5,
        stop=values[_STOP] > 0.5,
        local_loss=state["loss"],
        losses=losses,
        error=None if error is None else rank_error(error, rank.rank, rank.name),
    )


def _batchnorm_part(rank: Rank) -> list[torch.Tensor]:
    """Count, sum and sum of squares of each batch norm's input on this rank (zeros if none)."""
    parts = []
    for name, size in zip(rank.bn.layers, rank.bn_sizes, strict=True):
        part = torch.zeros(1 + 2 * size, dtype=torch.float64)
        seen = rank.bn.seen(0, name)
        if seen is not None:
            count, mean, var = seen
            mean, var = mean.double().cpu(), var.double().cpu()
            part[0] = count
            part[1 : 1 + size] = count * mean
            part[1 + size :] = count * (var + mean * mean)
        parts.append(part)
    return parts


@torch.no_grad()
def _pool_batchnorm(rank: Rank, summed: torch.Tensor) -> None:
    """Running statistics of every batch norm as if one device had seen the whole batch."""
    modules = dict(rank.model.named_modules())
    offset = 0
    for name, c in zip(rank.bn.layers, rank.bn_sizes, strict=True):
        module = modules[name]
        part = summed[offset : offset + 1 + 2 * c].double()
        offset += 1 + 2 * c
        n = float(part[0])
        before = rank.bn.before(name)
        if n < 1 or before is None:
            continue
        mean0, var0, tracked = before
        m = module.momentum if module.momentum is not None else 1.0 / (tracked + 1)
        mean = part[1 : 1 + c] / n
        unbiased = (part[1 + c :] / n - mean * mean).clamp_min(0) * n / max(n - 1, 1.0)
        module.running_mean.copy_((1 - m) * mean0 + m * mean.to(mean0))
        module.running_var.copy_((1 - m) * var0 + m * unbiased.to(var0))
        module.num_batches_tracked.fill_(tracked + 1)


@torch.no_grad()
def _average_buffers(rank: Rank, weight: float) -> None:
    """Other floating buffers a forward changed on some rank: their rows-weighted mean."""
    for k in rank.floating:
        buffer = rank.buffers[k]
        scaled = buffer.double() * weight
        assert rank.group is not None  # a step runs in a joined group
        rank.group.all_reduce(scaled)
        buffer.copy_(scaled.to(buffer.dtype))


@torch.no_grad()
def _undo(rank: Rank, before: list) -> None:
    """Back to the state before the step: no gradients, the old buffers."""
    rank.optimizer.zero_grad(set_to_none=True)
    for b, old in zip(rank.buffers, before, strict=True):
        b.copy_(old)
