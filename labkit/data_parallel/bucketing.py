"""Bucketing: variable-length sequences in batches of a few padded widths.

After MXNet's bucketing iterators: each sequence goes to the smallest bucket
at least as long as it, batches are formed within a bucket and padded to the
bucket's width, and each batch carries that width as its bucket key, so that
a trainer with ``bucket_model`` runs the network built for that key.
:class:`BucketModules` keeps those networks: one per replica and key, built
lazily around the replica's own parameters (shared, never copied), so every
bucket trains the same parameters with one optimizer.

Examples
--------
>>> import torch
>>> seqs = [torch.arange(n) + 1 for n in (3, 7, 4, 9, 2)]
>>> batches = bucket_batches(seqs, torch.arange(5), buckets=[5, 10], batch_size=2)
>>> [(b.key, tuple(b.x.shape), b.lengths.tolist()) for b in batches]
[(5, (2, 5), [3, 4]), (5, (1, 5), [2]), (10, (2, 10), [7, 9])]
>>> next(iter(batches)).x
tensor([[1, 2, 3, 0, 0],
        [1, 2, 3, 4, 0]])
"""

from __future__ import annotations

import bisect
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import InputError, located

__all__ = [
    "BucketBatch",
    "BucketBatches",
    "bucket_batches",
    "BucketModules",
    "check_key",
    "build_bucket",
]


@dataclass(frozen=True)
class BucketBatch:
    """One batch of a bucket: ``x`` padded to ``key`` steps, ``y``, the true ``lengths``.

    ``index`` holds the positions of the batch's sequences in the input.
    """

    key: int
    x: torch.Tensor
    y: torch.Tensor
    lengths: torch.Tensor
    index: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self.x)


class BucketBatches:
    """Batches of padded sequences grouped by bucket, re-iterable (a new order a pass).

    Made by :func:`bucket_batches`; ``len()`` is the number of batches a pass.
    """

    def __init__(
        self,
        padded: dict,
        targets: torch.Tensor,
        batch_size: int,
        shuffle: bool,
        seed,
        drop_last: bool,
    ):
        self._padded, self._targets = padded, targets
        self.batch_size, self.shuffle, self.seed, self.drop_last = (
            batch_size,
            shuffle,
            seed,
            drop_last,
        )
        self.buckets = sorted(padded)
        self.passes = 0  # each pass of a shuffled iterator draws a new order from the seed

    def counts(self) -> dict[int, int]:
        """The number of sequences in each bucket."""
        return {key: len(self._padded[key][2]) for key in self.buckets}

    def __len__(self) -> int:
        per = (
            (lambda n: n // self.batch_size)
            if self.drop_last
            else (lambda n: -(-n // self.batch_size))
        )
        return sum(per(n) for n in self.counts().values())

    def __iter__(self) -> Iterator[BucketBatch]:
        rng = np.random.default_rng(None if self.seed is None else [self.seed, self.passes])
        self.passes += 1
        plan: list[tuple[int, torch.Tensor]] = []
        for key in self.buckets:
            order = np.arange(len(self._padded[key][2]))
            if self.shuffle:
                order = rng.permutation(order)
            for start in range(0, len(order), self.batch_size):
                part = order[start : start + self.batch_size]
                if len(part) == self.batch_size or not self.drop_last:
                    plan.append((key, torch.as_tensor(part)))
        if self.shuffle:
            plan = [plan[k] for k in rng.permutation(len(plan))]
        for key, taken in plan:
            yield self._batch(key, taken)

    def _batch(self, key: int, rows: torch.Tensor) -> BucketBatch:
        """The batch of rows ``rows`` of bucket ``key``."""
        x, lengths, index = self._padded[key]
        taken = index[rows]
        return BucketBatch(key, x[rows], self._targets[taken], lengths[rows], taken)

    def __repr__(self):
        return (
            f"<BucketBatches {len(self)} batches of up to {self.batch_size}; "
            f"sequences per bucket {self.counts()}>"
        )


def bucket_batches(
    sequences,
    targets,
    buckets,
    batch_size: int,
    pad_value=0,
    shuffle: bool = False,
    seed: int | None = None,
    drop_longer: bool = False,
    drop_last: bool = False,
) -> BucketBatches:
    """Group ``sequences`` by bucket into padded batches of :class:`BucketBatch`.

    Parameters
    ----------
    sequences : list of 1-D arrays or tensors
        Of varying length (a sequence of vectors, shape ``(length, features...)``,
        works too: every sequence then needs the same trailing shape).
    targets : array or tensor
        One row per sequence, of any trailing shape.
    buckets : list of int
        The padded widths; a sequence goes to the smallest one at least its length.
    batch_size : int
        Largest batch; the last batch of a bucket may be smaller (unless ``drop_last``).
    pad_value : number
        What fills ``x`` past a sequence's end.
    shuffle, seed
        Shuffle the sequences within each bucket and the order of the batches,
        anew each pass; the same ``seed`` gives the same passes.
    drop_longer : bool
        Drop (with a warning) sequences longer than the largest bucket instead of raising.
    drop_last : bool
        Drop each bucket's last batch when it is smaller than ``batch_size``.

    Returns
    -------
    BucketBatches
        Re-iterable (``fit`` over several epochs): each pass yields every
        sequence exactly once.
    """
    buckets = _check_buckets(buckets)
    _check_batch_size(batch_size)
    seqs = _as_sequences(sequences)
    targets = _as_targets(targets, len(seqs))
    lengths = [len(s) for s in seqs]
    keep = _fitting(lengths, buckets[-1], drop_longer)
    if not keep:
        raise InputError(
            f"no sequences left to bucket: all {len(seqs)} are longer than the "
            f"largest bucket ({buckets[-1]})",
            argument="sequences",
        )
    members: dict[int, list[int]] = {}
    for i in keep:
        members.setdefault(buckets[bisect.bisect_left(buckets, lengths[i])], []).append(i)
    padded = {
        key: _pad([seqs[i] for i in rows], key, pad_value) + (torch.as_tensor(rows),)
        for key, rows in members.items()
    }
    return BucketBatches(padded, targets, batch_size, bool(shuffle), seed, bool(drop_last))


def _check_buckets(buckets) -> list[int]:
    """``buckets`` as a sorted list of distinct positive ints."""
    try:
        values = list(buckets)
    except TypeError:
        raise InputError(
            f"buckets must be a list of positive ints, got {buckets!r}", argument="buckets"
        ) from None
    bad = [
        b for b in values if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 1
    ]
    if not values or bad:
        raise InputError(
            f"buckets must be a non-empty list of positive ints, got {values!r}", argument="buckets"
        )
    if len(set(values)) != len(values):
        raise InputError(f"buckets must be distinct, got {values!r}", argument="buckets")
    return sorted(int(b) for b in values)


def _check_batch_size(batch_size) -> None:
    """An ``InputError`` unless ``batch_size`` is a positive int."""
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, (int, np.integer))
        or batch_size < 1
    ):
        raise InputError(
            f"batch_size must be a positive int, got {batch_size!r}", argument="batch_size"
        )


def _as_sequences(sequences) -> list[torch.Tensor]:
    """Each sequence as a tensor of at least one step, all with one trailing shape."""
    if isinstance(sequences, (torch.Tensor, np.ndarray, str, bytes)) or not hasattr(
        sequences, "__len__"
    ):
        raise InputError(
            "sequences must be a list of 1-D arrays or tensors of varying length, "
            f"got {type(sequences).__name__}",
            argument="sequences",
        )
    if len(sequences) == 0:
        raise InputError("no sequences to bucket: sequences is empty", argument="sequences")
    out: list[torch.Tensor] = []
    for i, s in enumerate(sequences):
        try:
            t = torch.as_tensor(s)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise InputError(
                f"sequence {i} is not an array of numbers ({exc})", argument="sequences", index=i
            ) from None
        if t.dim() == 0 or len(t) == 0:
            raise InputError(
                f"sequence {i} is {'a scalar' if t.dim() == 0 else 'empty'}: "
                "each sequence needs at least one step",
                argument="sequences",
                index=i,
            )
        if out and t.shape[1:] != out[0].shape[1:]:
            raise InputError(
                f"sequence {i} has steps of shape {tuple(t.shape[1:])}, sequence 0 "
                f"of shape {tuple(out[0].shape[1:])}: all must match",
                argument="sequences",
                index=i,
            )
        out.append(t)
    return out


def _as_targets(targets, n: int) -> torch.Tensor:
    """``targets`` as a tensor with one row per sequence."""
    try:
        t = torch.as_tensor(np.asarray(targets) if isinstance(targets, (list, tuple)) else targets)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise InputError(
            f"targets must be an array or tensor ({exc})", argument="targets"
        ) from None
    if t.dim() == 0 or len(t) != n:
        rows = "a scalar" if t.dim() == 0 else f"{len(t)} rows"
        raise InputError(
            f"targets has {rows} for {n} sequences: one row per sequence", argument="targets"
        )
    return t


def _fitting(lengths: list[int], longest: int, drop_longer: bool) -> list[int]:
    """Indices of the sequences that fit the largest bucket; the others raise or are dropped."""
    over = [i for i, n in enumerate(lengths) if n > longest]
    if over and not drop_longer:
        i = over[0]
        raise InputError(
            f"sequence {i} has length {lengths[i]}, longer than the largest "
            f"bucket ({longest}); add a larger bucket or pass drop_longer=True"
            + (f" ({len(over)} sequences are too long)" if len(over) > 1 else ""),
            argument="sequences",
            index=i,
            length=lengths[i],
        )
    if over:
        warnings.warn(
            f"dropped {len(over)} sequences longer than the largest bucket "
            f"({longest}), the first being sequence {over[0]}",
            RuntimeWarning,
            stacklevel=3,
        )
    return [i for i, n in enumerate(lengths) if n <= longest]


def _pad(seqs: list[torch.Tensor], width: int, pad_value) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, lengths)``: the sequences padded with ``pad_value`` to ``width`` steps."""
    dtype = seqs[0].dtype
    for s in seqs[1:]:
        dtype = torch.promote_types(dtype, s.dtype)
    x = torch.full((len(seqs), width, *seqs[0].shape[1:]), pad_value, dtype=dtype)
    for row, s in enumerate(seqs):
        x[row, : len(s)] = s
    return x, torch.tensor([len(s) for s in seqs])


# ---------------------------------------------------------------- the modules of the buckets


def check_key(key, step=None):
    """``key``, checked: a bucket key must be hashable (it names a cached module)."""
    try:
        hash(key)
    except TypeError:
        raise InputError(
            f"bucket_key must be hashable (an int such as the padded length), "
            f"got a {type(key).__name__}",
            argument="bucket_key",
            step=step,
        ) from None
    return key


def build_bucket(bucket_model, model: torch.nn.Module, key, **where) -> torch.nn.Module:
    """``bucket_model(model, key)``, checked to train ``model``'s own parameters."""
    try:
        module = bucket_model(model, key)
    except Exception as exc:
        raise located(exc, f"bucket_model(model, {key!r})", bucket_key=key, **where) from exc
    if not isinstance(module, torch.nn.Module):
        raise InputError(
            f"bucket_model(model, {key!r}) must return a torch.nn.Module, got "
            f"{type(module).__name__}",
            argument="bucket_model",
            bucket_key=key,
            **where,
        )
    own = {id(p) for p in model.parameters()}
    foreign = [n for n, p in module.named_parameters() if id(p) not in own]
    if foreign:
        raise InputError(
            f"bucket_model(model, {key!r}) returned a module whose parameter "
            f"{foreign[0]!r} is not one of the model's: build the bucket's module "
            "around the model it is given (e.g. keep it as a submodule) so that "
            "every bucket trains the same parameters; do not copy them",
            argument="bucket_model",
            bucket_key=key,
            **where,
        )
    return module.train(model.training)


class BucketModules:
    """The module of each replica and bucket key, built once by ``bucket_model``.

    Without ``bucket_model`` (or for the key ``None``) a replica runs itself.
    """

    def __init__(self, bucket_model, replicas: list[torch.nn.Module]):
        if bucket_model is not None and not callable(bucket_model):
            raise InputError(
                f"bucket_model must be callable as bucket_model(model, key), got {bucket_model!r}",
                argument="bucket_model",
            )
        self.bucket_model, self.replicas = bucket_model, replicas
        self._made: dict[tuple, torch.nn.Module] = {}

    def get(self, index: int, key, **where) -> torch.nn.Module:
        """The module ``replicas[index]`` runs for ``key`` (built on first use), in its mode.

        ``where`` locates an error (``replica`` is ``index`` unless given).
        """
        model = self.replicas[index]
        if self.bucket_model is None or key is None:
            return model
        module = self._made.get((index, key))
        if module is None:
            module = build_bucket(self.bucket_model, model, key, **{"replica": index, **where})
            self._made[(index, key)] = module
        elif module.training != model.training:  # evaluate() switched the replica's mode
            module.train(model.training)
        return module

    @property
    def keys(self) -> list:
        """The keys that have modules, in the order they were first built."""
        return list(dict.fromkeys(k for _, k in self._made))
