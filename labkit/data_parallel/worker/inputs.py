"""What a rank reads in an epoch: its Dask blocks, a dataset it made, or batches made alike.

Each input walks the epoch's :class:`~labkit.data_parallel.plan.PlannedEpoch`
and yields, step by step, ``(step, x, y, key, counts)``: this rank's rows of
the step and every rank's row count (so that each weighs its gradient).  A
rank keeps its inputs between tasks (:data:`KEPT_INPUTS` of them, the least
recently used going first), keyed by what the data is, never only by where.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import cloudpickle
import numpy as np
import torch
from torch.utils.data import default_collate

from ..guards import pair
from ..plan import EpochPlan, PlannedEpoch
from ..split import shares as split_counts
from .rank import Rank

__all__ = ["KEPT_INPUTS", "Input", "inputs_of", "dataset_of"]

#: Inputs a rank keeps between tasks: a fit's training data and its validation data.
KEPT_INPUTS = 2

#: One step of a rank's epoch: ``(step, x, y, bucket key, every rank's rows)``.
Step = tuple[int, Any, Any, Any, list]


class Input:
    """Rows taken by the epoch's plan (:mod:`..plan`): blocks held here, or a dataset."""

    kind = "input"
    length = 0

    def __init__(self) -> None:
        self._plan: EpochPlan | None = None

    def take(self, rows: np.ndarray) -> tuple[Any, Any]:
        """This rank's ``(x, y)`` of global rows ``rows``."""
        raise NotImplementedError

    def steps(self, epoch: PlannedEpoch, rank: Rank) -> Iterator[Step]:
        """``(step, x, y, key, counts)`` of this rank for every step of ``epoch``'s plan."""
        plan = self._plan = epoch.plan()
        for step in range(plan.start, plan.steps):
            x, y = self.take(plan.rows(step, rank.rank))
            yield step, x, y, None, plan.counts(step, rank.world)

    def total(self, epoch: PlannedEpoch) -> int:
        """Steps of the epoch (of the plan the last ``steps`` walks)."""
        assert self._plan is not None, "steps() first"
        return self._plan.steps


class _Rows(Input):
    """The rows a rank holds, as tensors, and how to take some of them by global number."""

    kind = "blocks"

    def __init__(self, starts, xs, ys):
        super().__init__()
        self.starts = np.asarray(starts, dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum([len(x) for x in xs])])[:-1]
        self.x = torch.from_numpy(np.ascontiguousarray(np.concatenate(xs))) if len(xs) else None
        self.y = torch.from_numpy(np.ascontiguousarray(np.concatenate(ys))) if len(ys) else None

    def take(self, rows: np.ndarray) -> tuple[Any, Any]:
        """This rank's ``(x, y)`` of global rows ``rows`` (all held here)."""
        if self.x is None or self.y is None or not len(rows):
            empty = self.x[:0] if self.x is not None else torch.empty(0)
            return empty, (self.y[:0] if self.y is not None else None)
        block = np.searchsorted(self.starts, rows, side="right") - 1
        local = torch.from_numpy(self.offsets[block] + rows - self.starts[block])
        return self.x.index_select(0, local), self.y.index_select(0, local)


class _DatasetRows(Input):
    """A dataset made on this worker; rows taken by index and collated as a DataLoader does."""

    kind = "dataset"

    def __init__(self, dataset):
        super().__init__()
        self.dataset = dataset
        self.length = len(dataset)

    def take(self, rows: np.ndarray) -> tuple[Any, Any]:
        """The samples ``rows``, collated."""
        if not len(rows):
            x, y = default_collate([self.dataset[0]])
            return x[:0], y[:0]
        x, y = default_collate([self.dataset[int(i)] for i in rows])
        return x, y


class _WorkerBatches(Input):
    """Batches made alike on every worker (``lk.bucket_batches``): each rank its share of each.

    Every rank walks the same batches in the same order (a bucket batches'
    order is drawn from its seed and the epoch), and takes the rows the
    shares give it, so a step's bucket key is the same on every rank.
    """

    kind = "batches"

    def __init__(self, batches):
        super().__init__()
        self.batches, self.length = batches, len(batches)

    def steps(self, epoch: PlannedEpoch, rank: Rank) -> Iterator[Step]:
        """This rank's share of every batch from the epoch's (resumed) start on."""
        start, shares = 0, list(epoch.shares)
        for step, shares_then in epoch.resumes:
            start, shares = step, list(shares_then)
        if hasattr(self.batches, "passes"):  # the epoch's order, also after a recovery
            self.batches.passes = epoch.epoch
        for step, batch in enumerate(self.batches):
            if step < start:
                continue
            x, y, key = pair(batch, epoch.epoch, step)
            counts = split_counts(len(x), shares)
            begin = sum(counts[: rank.rank])
            end = begin + counts[rank.rank]
            yield step, x[begin:end], y[begin:end], key, counts

    def total(self, epoch: PlannedEpoch) -> int:
        """Steps of the epoch: every batch."""
        return self.length


def _kept(rank: Rank, key: tuple, make: Callable[[], Input]) -> Input:
    """``rank.data[key]``, made by ``make()`` when missing; the least recently used goes.

    ``key`` names the data itself (the Dask keys of the blocks, a dataset's id),
    never only its place (block numbers): other arrays chunked alike are other data.
    """
    value = rank.data.pop(key, None)
    if value is None:
        value = make()
    rank.data[key] = value  # the newest last
    while len(rank.data) > KEPT_INPUTS:
        rank.data.pop(next(iter(rank.data)))
    return value


def _made(obj) -> Input:
    """A dataset (``[i]`` and ``len``) or batches (re-iterable, with ``len``), wrapped."""
    if hasattr(obj, "__getitem__") and hasattr(obj, "__len__"):
        return _DatasetRows(obj)
    if hasattr(obj, "__iter__") and hasattr(obj, "__len__"):
        return _WorkerBatches(obj)
    raise TypeError(
        f"make_dataset must return a torch Dataset (len() and [i]) or batches "
        f"(len() and iterable, e.g. lk.bucket_batches), got {type(obj).__name__}"
    )


def dataset_of(rank: Rank, blob: bytes, dataset_id: str) -> Input:
    """What the pickled ``make_dataset`` made on this worker (made once, then kept)."""
    return _kept(rank, ("dataset", dataset_id), lambda: _made(cloudpickle.loads(blob)()))


def inputs_of(rank: Rank, epoch: PlannedEpoch, xs=(), ys=()) -> Input:
    """This rank's input of ``epoch``: the dataset it made, or its blocks ``xs``/``ys``."""
    if epoch.dataset is not None:
        assert epoch.dataset_id is not None
        return dataset_of(rank, epoch.dataset, epoch.dataset_id)
    starts = [epoch.table[b][0] for b in epoch.mine]
    key = ("blocks", tuple(epoch.keys), tuple(starts))
    return _kept(rank, key, lambda: _Rows(starts, xs, ys))
