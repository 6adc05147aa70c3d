"""Which replica group a trainer gets: Dask workers, a scheduler's threads, or local devices."""

from __future__ import annotations

from .local.thread_group import SchedulerThreadGroup, ThreadGroup
from .replica_group import ReplicaGroup

__all__ = ["choose_group"]


def choose_group(model, loss_fn, optimizer, devices, scheduler, bucket_model) -> ReplicaGroup:
    """The replica group: Dask workers with a scheduler, else this process's devices.

    A scheduler whose tasks run on threads of this process (the embedded
    default, ``mode="auto"`` or ``"threads"``) trains on replicas over those
    threads: no worker process to start, and faster on a few cores (issue 38).
    """
    if scheduler is not None and getattr(scheduler, "in_process", False):
        return SchedulerThreadGroup(model, loss_fn, optimizer, scheduler, devices, bucket_model)
    if scheduler is not None:
        # imported here: ``distributed`` costs a second to import, and a trainer on
        # threads never needs it
        from .dask.group import DaskReplicaGroup

        return DaskReplicaGroup(model, loss_fn, optimizer, scheduler, bucket_model=bucket_model)
    return ThreadGroup(model, loss_fn, optimizer, devices, bucket_model)
