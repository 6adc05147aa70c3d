"""Data-parallel torch training across devices, in-process or on Dask workers.

The room is split by where the code runs:

* :mod:`.local`: replicas on threads of this process, as named steps (split,
  replicate, apply, reduce, after ``torch.nn.parallel``);
* :mod:`.dask`: the client's side of a group on Dask workers (set-up, its
  tasks, client-fed steps, epochs on the workers, recovery);
* :mod:`.worker`: what runs on each worker (the rank, its process group, the
  overlapped reducer, the rank's loops and inputs).

Shared by all three, at the top: :mod:`.trainer` (the one public trainer),
which holds its parts rather than mixing them in (:mod:`.calls`: the fit
loop, its steps, one call at a time, the model copied back); the declared
contract of every replica group and the capabilities only some keep, as
protocols (:mod:`.replica_group`), which group a trainer gets
(:mod:`.choose_group`), what fit takes (:mod:`.fit_data`),
an epoch's plan (:mod:`.plan`), the work load (:mod:`.split`,
:mod:`.balance`), :mod:`.devices`, :mod:`.batchnorm`, :mod:`.bucketing`,
:mod:`.monitors`, the step reports and their events (:mod:`.reports`,
:mod:`.reporting`), a trainer's checkpoint file (:mod:`.state_file`) and the
argument checks (:mod:`.guards`).

``split_batch`` needs no torch; everything else imports it when first used.
The top modules import :mod:`.local` and :mod:`.calls` (the trainer), :mod:`.dask` only
lazily (:mod:`.choose_group`) and never :mod:`.worker`; nothing here imports labkit.views.
"""

from __future__ import annotations

import importlib

from .split import split_batch

__all__ = [
    "split_batch",
    "DataParallelTrainer",
    "Balancer",
    "ReplicaStep",
    "DaskReplicaGroup",
    "NonFiniteLossError",
    "NonFiniteLossWarning",
    "bucket_batches",
    "BucketBatch",
    "BucketBatches",
    "on_workers",
]

_LAZY = {
    "DataParallelTrainer": "trainer",
    "ReplicaStep": "monitors",
    "Balancer": "balance",
    "DaskReplicaGroup": "dask.group",
    "NonFiniteLossError": "guards",
    "NonFiniteLossWarning": "guards",
    "bucket_batches": "bucketing",
    "BucketBatch": "bucketing",
    "BucketBatches": "bucketing",
    "on_workers": "fit_data",
}


def __getattr__(name: str):
    """The public names but ``split_batch``, imported when first used (they need torch)."""
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
