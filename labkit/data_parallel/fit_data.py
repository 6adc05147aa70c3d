"""What ``fit`` and ``evaluate`` take: batches from the client, or data that lives on the workers.

* batches (a list, a ``DataLoader``, :func:`~labkit.bucket_batches`...): the
  client splits each batch by the devices' shares and sends the shares;
* ``(X, y)`` with ``batch_size=``: a global batch of ``batch_size`` rows a
  step, every row once an epoch, shuffled by ``seed``.  Dask arrays (rows x
  features and rows, chunked by rows) are read by each replica on its own
  worker (:mod:`.dask.blocks`); numpy arrays or tensors are split by the
  client as batches would be;
* :func:`on_workers` ``(make_dataset)``: a ``torch.utils.data.Dataset``
  made on every worker (or once, in-process), each sample once an epoch
  across the ranks, as ``DistributedSampler`` gives, but with uneven shares.

Examples
--------
>>> import numpy as np
>>> source = as_source((np.zeros((10, 2)), np.zeros(10)), batch_size=4)
>>> type(source).__name__, source.rows
('LocalArrays', 10)
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import cloudpickle
import dask
import numpy as np
import torch
from torch.utils.data import default_collate

from ..errors import InputError, pulled
from ..scheduling.dask.dask_adapter import is_dask_array
from .bucketing import BucketBatch
from .guards import check_batch, check_batches, pair
from .plan import EpochPlan, check_batch_size
from .reports import batch_number
from .split import shares as split_counts

__all__ = [
    "on_workers",
    "WorkerDataset",
    "LocalArrays",
    "DaskArrays",
    "Batches",
    "as_source",
    "PlannedStep",
    "Source",
]

#: ``shares_of(bucket key)``: each device's current fraction of a batch.
SharesOf = Callable[..., list]


@dataclass
class PlannedStep:
    """One step as the trainer planned it: the batch, each device's rows, where it belongs."""

    x: Any
    y: Any
    counts: list
    key: Any = None
    epoch: int | None = None
    batch: int | None = None
    number: int | None = None  # the trainer's count of steps when it is taken


class Source:
    """What every source of a fit offers the loops (see the module docstring).

    ``on_workers``: the data lives on (or is made by) the workers, so a replica
    group that runs epochs there trains on it in place; :meth:`local` gives the
    same data in this process, for replicas that are threads here.
    """

    on_workers: ClassVar[bool] = False

    def local(self) -> Any:
        """The source in this process: an object whose ``steps(epoch, shares_of)`` plans steps."""
        return self

    @property
    def epoch_batches(self) -> int | None:
        """Batches an epoch, when known."""
        return None


@dataclass
class WorkerDataset(Source):
    """A dataset made by ``make`` on each worker (see :func:`on_workers`)."""

    on_workers: ClassVar[bool] = True

    make: Callable
    batch_size: int | None = None
    shuffle: bool = True
    seed: Any = None
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    _made: Any = field(default=None, init=False, repr=False, compare=False)

    def pickled(self) -> bytes:
        """``make``, pickled for the workers."""
        return cloudpickle.dumps(self.make)

    def local(self) -> LocalDataset | Batches:
        """The dataset (or batches) made in this process, for replicas that are threads here."""
        if self._made is None:
            obj = self.make()
            self._made = LocalDataset(obj, self) if hasattr(obj, "__getitem__") else Batches(obj)
        return self._made


class LocalDataset:
    """A dataset made here, drawn in global batches of its source's ``batch_size``."""

    def __init__(self, dataset, source: WorkerDataset):
        if source.batch_size is None:
            raise InputError(
                "a dataset made by on_workers needs batch_size=", argument="batch_size"
            )
        self.dataset, self.source, self._collate = dataset, source, default_collate
        try:
            self.rows = len(dataset)
        except TypeError as exc:
            raise InputError(
                f"on_workers needs a dataset with a length, got {type(dataset).__name__}",
                argument="make_dataset",
            ) from exc

    def steps(self, epoch: int | None, shares_of: SharesOf) -> Iterator[PlannedStep]:
        """The epoch's planned steps, each batch collated from the dataset's samples."""
        source = self.source
        assert source.batch_size is not None  # checked when made
        plan = EpochPlan.shared(
            self.rows, source.batch_size, [1.0], source.shuffle, source.seed, epoch or 0
        )
        for step in range(plan.steps):
            x, y = self._collate([self.dataset[int(i)] for i in plan.rows(step, 0)])
            yield PlannedStep(x, y, _split(len(x), shares_of()), None, epoch, step)


def on_workers(make_dataset: Callable[[], Any]) -> WorkerDataset:
    """Data made where the replicas are: ``make_dataset()`` runs once on each worker.

    It returns a ``torch.utils.data.Dataset`` (``len()`` and ``[i]`` giving an
    ``(x, y)`` pair) of the same length everywhere, e.g. read from files every
    worker can reach; ``trainer.fit(lk.on_workers(make), batch_size=B)`` then
    trains every sample once an epoch, no row leaving its worker.  Or it
    returns batches that every worker makes alike, such as
    :func:`~labkit.bucket_batches` with a seed: each rank then trains its
    share of every batch (a bucket batch's key runs that bucket's module on
    every rank); no ``batch_size`` then.

    Examples
    --------
    >>> source = on_workers(lambda: [(torch.zeros(2), 0)] * 8)
    >>> callable(source.make)
    True
    """
    if not callable(make_dataset):
        raise InputError(
            f"on_workers takes a function that makes the dataset, got "
            f"{type(make_dataset).__name__}",
            argument="make_dataset",
        )
    return WorkerDataset(make_dataset)


@dataclass
class LocalArrays(Source):
    """``(X, y)`` in this process (numpy arrays or tensors), drawn in global batches."""

    x: Any
    y: Any
    batch_size: int
    shuffle: bool = True
    seed: Any = None

    @property
    def rows(self) -> int:
        """Rows of ``X``."""
        return len(self.x)

    @property
    def epoch_batches(self) -> int | None:
        """Batches an epoch: every row once."""
        return -(-self.rows // self.batch_size) if self.rows else None

    def steps(self, epoch: int | None, shares_of: SharesOf) -> Iterator[PlannedStep]:
        """The epoch's planned steps, each batch split by the shares at its start."""
        plan = EpochPlan.shared(
            self.rows, self.batch_size, [1.0], self.shuffle, self.seed, epoch or 0
        )
        for step in range(plan.steps):
            rows = torch.from_numpy(plan.rows(step, 0))
            x, y = self.x.index_select(0, rows), self.y.index_select(0, rows)
            yield PlannedStep(x, y, _split(len(x), shares_of()), None, epoch, step)


@dataclass
class DaskArrays(Source):
    """``(X, y)`` as Dask arrays chunked by rows: each replica reads its own worker's blocks."""

    on_workers: ClassVar[bool] = True

    x: Any
    y: Any
    batch_size: int
    shuffle: bool = True
    seed: Any = None
    _local: LocalArrays | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def rows(self) -> int:
        """Rows of ``X``."""
        return int(self.x.shape[0])

    @property
    def epoch_batches(self) -> int | None:
        """Batches an epoch: every row once."""
        return -(-self.rows // self.batch_size) if self.rows else None

    def local(self) -> LocalArrays:
        """The same rows in this process (for replicas that are threads here)."""
        if self._local is None:
            x, y = dask.compute(self.x, self.y)
            self._local = LocalArrays(
                torch.as_tensor(x), torch.as_tensor(y), self.batch_size, self.shuffle, self.seed
            )
        return self._local


@dataclass
class Batches(Source):
    """Batches the client hands out: ``(x, y)`` pairs or bucket batches."""

    batches: Any

    @property
    def epoch_batches(self) -> int | None:
        """Batches an epoch, when they have a length."""
        return len(self.batches) if hasattr(self.batches, "__len__") else None

    def steps(self, epoch: int | None, shares_of: SharesOf) -> Iterator[PlannedStep]:
        """The batches as planned steps, each split by its bucket's shares at its start."""
        batches = pulled(self.batches, "batch", "the batches", first=1, epoch=epoch)
        for b, batch in enumerate(batches):
            x, y, key = pair(batch, epoch, b)
            n = check_batch(x, y, what="fit", epoch=epoch, batch=batch_number(b))
            yield PlannedStep(x, y, _split(n, shares_of(key)), key, epoch, b)


def _split(rows: int, shares: list) -> list:
    return split_counts(rows, shares) if rows else [0] * len(shares)


def as_source(
    data, batch_size=None, shuffle: bool = True, seed=None, epochs: int = 1, what: str = "fit"
) -> Source:
    """The source ``data`` stands for (see the module docstring), checked."""
    if isinstance(data, WorkerDataset):  # batches made on the workers need no batch_size
        # a copy for this call: the same object given as a fit's data and as its
        # validation (or to two calls) keeps each call's own batch size and order
        return WorkerDataset(
            data.make,
            None if batch_size is None else check_batch_size(batch_size, 1),
            bool(shuffle),
            seed,
            data.id,
        )
    if (
        isinstance(data, tuple)
        and len(data) == 2
        and not isinstance(data, BucketBatch)
        and batch_size is not None
    ):
        return _arrays(data[0], data[1], batch_size, shuffle, seed, what)
    if batch_size is not None:
        raise InputError(
            f"batch_size is for (X, y) arrays or lk.on_workers(...); {what} got "
            f"{type(data).__name__}, whose batches are already made",
            argument="batch_size",
        )
    check_batches(data, epochs, what=what)
    return Batches(data)


def _arrays(x, y, batch_size, shuffle, seed, what: str = "fit"):
    """``(X, y)`` checked: Dask arrays stay where they are, others become tensors here."""
    dask_x, dask_y = _is_dask(x), _is_dask(y)
    if dask_x != dask_y:
        raise InputError("X and y must both be Dask arrays, or neither", argument="y")
    if dask_x:
        return _dask_arrays(x, y, batch_size, shuffle, seed, what)
    x, y = _tensor(x, "X"), _tensor(y, "y")
    if x.dim() < 2 or len(x) != len(y):
        raise InputError(
            f"X needs rows and features and y one target a row: got X "
            f"{tuple(x.shape)} and y {tuple(y.shape)}",
            argument="y",
        )
    return LocalArrays(x, y, check_batch_size(batch_size, len(x)), shuffle, seed)


def _dask_arrays(x, y, batch_size, shuffle, seed, what: str) -> DaskArrays:
    """Dask arrays ``(X, y)`` checked: known row blocks, rows and features, as many rows."""
    _known_rows(x, "X", what)
    _known_rows(y, "y", what)
    if x.ndim < 2 or y.ndim < 1:
        raise InputError(
            f"X must have rows and features (got shape {x.shape}) and y rows (got shape {y.shape})",
            argument="X",
        )
    if x.shape[0] != y.shape[0]:
        raise InputError(f"X has {x.shape[0]} rows but y has {y.shape[0]}", argument="y")
    return DaskArrays(x, y, check_batch_size(batch_size, int(x.shape[0])), shuffle, seed)


def _known_rows(array, name: str, what: str) -> None:
    """A Dask array whose row blocks have known lengths (``X[mask]`` does not), or a clear error."""

    sizes = [n for axis in array.chunks for n in axis]
    if any(isinstance(n, float) and math.isnan(n) for n in sizes):
        label = f"the validation's {name}" if what == "validation" else f"{name} given to {what}"
        raise InputError(
            f"{label} has blocks of unknown length ({array.ndim} dimensions), as after boolean "
            f"indexing such as X[mask]: compute them first with {name}.compute_chunk_sizes() "
            f"(or {name} = {name}.persist() and then {name}.compute_chunk_sizes())",
            argument=f"validation {name}" if what == "validation" else name,
        )


def _tensor(value, name: str) -> torch.Tensor:
    """``value`` as a tensor, or an error naming it."""
    if isinstance(value, torch.Tensor):
        return value
    try:
        return torch.as_tensor(np.asarray(value))
    except Exception as exc:
        raise InputError(
            f"{name} must be an array or a tensor, got {type(value).__name__} ({exc})",
            argument=name,
        ) from exc


def _is_dask(value) -> bool:
    """Whether ``value`` is a Dask array."""
    return bool(is_dask_array(value))
