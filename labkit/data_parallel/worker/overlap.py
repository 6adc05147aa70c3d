"""Gradient all-reduce that overlaps backward, as torch's DDP does, plus one small vector.

Each rank packs its parameters' gradients into buckets (the last layers
first: their gradients are ready first) and starts the all-reduce of a bucket
as soon as backward has produced all of its gradients, while backward goes on
with the earlier layers.  Buckets start in the same order on every rank, so
the collectives match whatever each rank's autograd did; a parameter that
got no gradient (unused in this step's module, or a rank that failed before
backward) is sent as zeros when :meth:`OverlappedReducer.finish` closes the
step.

Gradients are scaled by each rank's weight before they are summed (its share
of the batch's rows for a mean loss), so uneven shares give the gradient of
the whole batch.  A small vector of the step's own numbers (failures, losses,
rows, seconds, which parameters had a gradient, batch-norm statistics) rides
in the tail of the last bucket, summed but never scaled: the ranks agree on
the step without a collective of its own.

Examples
--------
On one rank, through a file store:

>>> import os, shutil, tempfile, torch
>>> from labkit.data_parallel.worker.process_group import open_group
>>> folder = tempfile.mkdtemp()
>>> group = open_group("file://" + os.path.join(folder, "s"), 0, 1, "gloo", 10.0, "doc")
>>> layer = torch.nn.Linear(3, 1)
>>> reducer = OverlappedReducer(list(layer.parameters()), group, extra=2)
>>> reducer.start(weight=0.5, extra=lambda present: torch.tensor([1.0, sum(present)]))
>>> layer(torch.ones(4, 3)).sum().backward()
>>> reducer.finish().tolist()
[1.0, 2.0]
>>> layer.bias.grad.tolist()     # 4 rows of 1, weighted by 0.5
[2.0]
>>> reducer.close(); group.close(); shutil.rmtree(folder)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["OverlappedReducer", "FIRST_BUCKET_BYTES", "BUCKET_BYTES"]

#: Bytes of the first bucket (small, so that the first all-reduce starts early) and of the others.
FIRST_BUCKET_BYTES = 2**20
BUCKET_BYTES = 25 * 2**20

# dtypes in which the agreement vector (counts, flags) is exact enough to ride along
_EXACT = (torch.float32, torch.float64)


class _Bucket:
    """Gradients of some parameters of one dtype and device, in one flat buffer."""

    def __init__(self, params: list, extra: int = 0):
        self.params = params
        self.size = sum(p.numel() for p in params)
        first = params[0]
        self.flat = torch.zeros(self.size + extra, dtype=first.dtype, device=first.device)
        self.extra = extra
        self.offsets: dict[torch.Tensor, int] = {}
        offset = 0
        for p in params:
            self.offsets[p] = offset
            offset += p.numel()
        self.pending = len(params)
        self.work: Any = None  # the all-reduce in flight (a torch Work)

    def put(self, p: torch.Tensor) -> None:
        """Copy ``p``'s gradient (zeros if it has none) into the buffer."""
        view = self.flat[self.offsets[p] : self.offsets[p] + p.numel()]
        if p.grad is None:
            view.zero_()
        else:
            view.copy_(p.grad.reshape(-1))
        self.pending -= 1

    def unpack(self) -> None:
        """The summed gradients back into the parameters' ``grad``."""
        for p in self.params:
            view = self.flat[self.offsets[p] : self.offsets[p] + p.numel()].view_as(p)
            if p.grad is None:
                p.grad = view.clone()
            else:
                p.grad.copy_(view)


class OverlappedReducer:
    """Sums ``weight * grad`` over the ranks of ``group``, bucket by bucket during backward.

    Parameters
    ----------
    params : list of torch.Tensor
        The rank's parameters (in the model's order).
    group : labkit.data_parallel.worker.process_group.ProcessGroup
    extra : int
        Length of the vector summed with the last bucket (see :meth:`start`).
    first_bucket_bytes, bucket_bytes : int
        Bucket sizes, as DDP's ``bucket_cap_mb`` (a small first bucket).
    """

    def __init__(
        self,
        params: list,
        group,
        extra: int = 0,
        first_bucket_bytes: int = FIRST_BUCKET_BYTES,
        bucket_bytes: int = BUCKET_BYTES,
    ):
        self.params = [p for p in params if p.requires_grad]
        self.group, self.extra_size = group, extra
        self.buckets = _make_buckets(self.params, first_bucket_bytes, bucket_bytes)
        last = self.buckets[-1] if self.buckets else None
        self._ride = extra > 0 and last is not None and last.flat.dtype in _EXACT
        if self._ride and last is not None:  # room for the vector in the last bucket's buffer
            self.buckets[-1] = _Bucket(last.params, extra)
        self._bucket_of = {p: b for b in self.buckets for p in b.params}
        self._index = {p: k for k, p in enumerate(self.params)}
        self._hooks = [p.register_post_accumulate_grad_hook(self._ready) for p in self.params]
        self._armed = False
        self._weight = 1.0
        self._extra_fn: Callable[[list[bool]], torch.Tensor] | None = None
        self._extra: torch.Tensor | None = None
        self._present: list[bool] = []
        self._next = 0

    def start(
        self, weight: float = 1.0, extra: Callable[[list[bool]], torch.Tensor] | None = None
    ) -> None:
        """Arm for one backward: gradients scaled by ``weight``.

        ``extra(present)`` gives the vector to sum with the last bucket, called
        when that bucket starts (``present[k]``: whether parameter ``k`` has a
        gradient by then); its length is the ``extra`` of the constructor.
        """
        self._armed, self._weight, self._extra_fn = True, float(weight), extra
        self._present = [False] * len(self.params)
        self._next, self._extra = 0, None
        for bucket in self.buckets:
            bucket.pending, bucket.work = len(bucket.params), None

    def finish(self) -> torch.Tensor | None:
        """Start what backward did not, wait for every bucket, unpack; the summed vector.

        Parameters without a gradient on this rank are sent as zeros and get
        the sum as their gradient; :meth:`drop_unused` takes it away again
        from those that had none on any rank.
        """
        for bucket in self.buckets[self._next :]:
            self._fill(bucket)
        self._launch_ready()
        for bucket in self.buckets:
            bucket.work.wait()
            bucket.unpack()
        self._armed = False
        if not self._ride and self._extra_fn is not None:  # no bucket to ride on: its own
            self._extra = self._extra_fn(self._present).to(self._device())
            self.group.all_reduce(self._extra)
        elif self._ride:
            self._extra = self.buckets[-1].flat[-self.extra_size :].clone()
        return self._extra

    def drop_unused(self, present_sums) -> None:
        """Take the gradient away from parameters that had none on any rank."""
        for p, count in zip(self.params, present_sums, strict=True):
            if count < 0.5:
                p.grad = None

    def close(self) -> None:
        """Remove the hooks; idempotent."""
        for hook in self._hooks:
            hook.remove()
        self._hooks = []

    # -- during backward ------------------------------------------------------------------

    def _ready(self, p: torch.Tensor) -> None:
        """A parameter's gradient is complete: pack it; start every bucket now full, in order."""
        if not self._armed:
            return
        self._present[self._index[p]] = True
        self._bucket_of[p].put(p)
        self._launch_ready()

    def _fill(self, bucket: _Bucket) -> None:
        """Pack the parameters of ``bucket`` that backward did not reach (as zeros)."""
        for p in bucket.params:
            if not self._present[self._index[p]]:
                bucket.put(p)

    def _launch_ready(self) -> None:
        while self._next < len(self.buckets) and self.buckets[self._next].pending <= 0:
            bucket = self.buckets[self._next]
            grads = bucket.flat[: bucket.size]
            if self._weight != 1.0:
                grads.mul_(self._weight)
            if bucket.extra and self._extra_fn is not None:
                bucket.flat[bucket.size :].copy_(self._extra_fn(self._present))
            elif bucket.extra:
                bucket.flat[bucket.size :].zero_()
            bucket.work = self.group.all_reduce_async(bucket.flat)
            self._next += 1

    def _device(self):
        return self.params[0].device if self.params else torch.device("cpu")


def _make_buckets(params: list, first: int, cap: int) -> list[_Bucket]:
    """Buckets of parameters of one dtype and device, last parameters first."""
    buckets: list[_Bucket] = []
    current: list = []
    size, limit = 0, first
    for p in reversed(params):
        if current and (
            size >= limit or (p.dtype, p.device) != (current[0].dtype, current[0].device)
        ):
            buckets.append(_Bucket(current))
            current, size, limit = [], 0, cap
        current.append(p)
        size += p.numel() * p.element_size()
    if current:
        buckets.append(_Bucket(current))
    return buckets
