"""Data-parallel torch training across devices, in-process or on Dask workers.

One concept a module, after ``torch.nn.parallel``: :mod:`.split` (work-load
slices), :mod:`.devices`, :mod:`.replicate` (persistent replicas, broadcast),
:mod:`.parallel_apply` (replicas on threads), :mod:`.reduce` (weighted
gradients, exact batch-norm statistics), :mod:`.balance` (the "auto" work
load), :mod:`.reporting` (events for the views), :mod:`.monitors` (user
functions after each replica's backward), :mod:`.bucketing` (variable-length
batches by bucket key), :mod:`.guards` (argument checks, the non-finite loss
policy); the replica groups, one contract for both: :mod:`.thread_group`
(devices of this process) and :mod:`.distributed` (Dask workers, with their
process groups :mod:`.groups`, the overlapped reduction :mod:`.overlap`, the
rank and its tasks :mod:`.rank` and :mod:`.rank_tasks`, client-fed commands
:mod:`.dask_steps`, epochs on the workers :mod:`.dask_epochs` over the plan
:mod:`.plan` and the blocks :mod:`.worker_data`); what fit takes
(:mod:`.sources`), the step reports (:mod:`.reports`) and the loops
(:mod:`.loops`), composed by :mod:`.trainer`.

``split_batch`` needs no torch; everything else imports it when first used.
"""

from __future__ import annotations

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
    "DaskReplicaGroup": "distributed",
    "NonFiniteLossError": "guards",
    "NonFiniteLossWarning": "guards",
    "bucket_batches": "bucketing",
    "BucketBatch": "bucketing",
    "BucketBatches": "bucketing",
    "on_workers": "sources",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
