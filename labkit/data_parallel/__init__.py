"""Data-parallel torch training across devices, in-process or on Dask workers.

One concept a module, after ``torch.nn.parallel``: :mod:`.split` (work-load
slices), :mod:`.devices`, :mod:`.replicate` (persistent replicas, broadcast),
:mod:`.parallel_apply` (replicas on threads), :mod:`.reduce` (weighted
gradients, exact batch-norm statistics), :mod:`.balance` (the "auto" work
load), :mod:`.reporting` (events for the views), :mod:`.monitors` (user
functions after each replica's backward), :mod:`.loops` (fit and
evaluate), :mod:`.bucketing` (variable-length batches by bucket key),
:mod:`.guards` (argument checks, the non-finite loss policy) and
:mod:`.distributed` with :mod:`.replica_worker` (replicas on Dask workers with
``torch.distributed``), composed by :mod:`.trainer`.

``split_batch`` needs no torch; everything else imports it when first used.
"""

from __future__ import annotations

from .split import split_batch

__all__ = ["split_batch", "DataParallelTrainer", "Balancer", "ReplicaStep", "DaskReplicaGroup",
           "NonFiniteLossError", "NonFiniteLossWarning", "bucket_batches", "BucketBatch",
           "BucketBatches"]

_LAZY = {"DataParallelTrainer": "trainer", "ReplicaStep": "monitors", "Balancer": "balance",
         "DaskReplicaGroup": "distributed", "NonFiniteLossError": "guards",
         "NonFiniteLossWarning": "guards", "bucket_batches": "bucketing",
         "BucketBatch": "bucketing", "BucketBatches": "bucketing"}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
