"""What a replica group on Dask needs before it forms: its workers, one payload, their devices.

The replicas are built from one pickled payload (identical parameters
everywhere; a replica that cannot be built fails before anyone waits in a
rendezvous); two ranks on one host must not share a GPU.
"""

from __future__ import annotations

import copy
import functools
import weakref

import cloudpickle

from ...constraints import Options, check_argument
from ...errors import InputError, SchedulerError
from ...scheduling.connect import scheduler_identity
from ...scheduling.pickling import dumps
from ..worker.lifecycle import to_cpu

__all__ = [
    "check_scheduler",
    "choose_workers",
    "payload",
    "check_devices",
    "closed_with",
]


def choose_workers(scheduler, workers) -> tuple[list[str], bool]:
    """``(addresses in rank order, whether all are GPU workers)``.

    ``workers`` None: the scheduler's own ``workers`` (a scheduler over some
    workers of its cluster, such as ``trial.scheduler``), else every worker.
    """
    workers = workers or getattr(scheduler, "workers", None)
    info = scheduler_identity(scheduler.client)["workers"]
    if not info:
        raise SchedulerError("the Dask cluster has no workers")
    gpu = {a for a, w_ in info.items() if w_.get("resources", {}).get("GPU", 0) > 0}
    names = sorted(gpu or info) if workers is None else list(workers)
    for a in names:
        if a not in info:
            raise InputError(f"not a worker of this cluster: {a!r}", device=a)
    if len(set(names)) != len(names) or not names:
        raise InputError(f"workers must be distinct and at least one: {names}")
    return names, all(a in gpu for a in names)


def payload(model, loss_fn, optimizer, bucket_model=None) -> bytes:
    """One pickle of what a replica needs; the optimizer (bound to our parameters) described.

    One pickle, so objects the parts share stay shared; when it fails, the
    parts are tried alone to name the one that cannot be sent (``loss_fn``...).
    """
    index = {id(p): k for k, p in enumerate(model.parameters())}
    try:
        groups = [[index[id(p)] for p in g["params"]] for g in optimizer.param_groups]
    except KeyError:
        raise InputError(
            "the optimizer holds a parameter that is not the model's", argument="optimizer"
        ) from None
    on_cpu = all(t.device.type == "cpu" for t in [*model.parameters(), *model.buffers()])
    shipped = model if on_cpu else copy.deepcopy(model).cpu()  # workers may have no GPU
    parts = {
        "model": shipped,
        "loss_fn": loss_fn,
        "optimizer": (
            type(optimizer),
            dict(optimizer.defaults),
            groups,
            to_cpu(optimizer.state_dict()),
        ),
        "bucket_model": bucket_model,
    }
    try:
        return cloudpickle.dumps(parts)
    except Exception:
        for name, part in parts.items():
            dumps(part, name)  # raises naming the first part that cannot be pickled
        raise


def check_devices(names, hosts, devices) -> None:
    """Two ranks on one host must not share a GPU (each rank its own device)."""
    seen: dict[tuple, str] = {}
    for name, host, device in zip(names, hosts, devices, strict=True):
        if device.startswith("cuda"):
            where = (host, device.split(" ")[0])
            if where in seen:
                raise SchedulerError(
                    f"the workers {seen[where]} and {name} got the same GPU "
                    f"({device}) on {host}: give each worker its own GPU "
                    "(CUDA_VISIBLE_DEVICES per worker, or dask-cuda)",
                    device=name,
                )
            seen[where] = name


def check_scheduler(scheduler, rendezvous) -> None:
    """A rendezvous labkit knows, and a scheduler with worker processes."""
    check_argument("rendezvous", rendezvous, [Options(("auto", "tcp", "file"))])
    if getattr(scheduler, "in_process", False):
        raise InputError(
            "data-parallel replicas on Dask need worker processes (one torch.distributed "
            f"rank each), but this DaskScheduler runs tasks on threads (mode "
            f"{scheduler.mode!r}): use lk.DaskScheduler(mode='processes') or an existing "
            "cluster, or train in-process with devices=[...]"
        )


def closed_with(scheduler, group) -> None:
    """Close ``group`` when ``scheduler`` shuts down, if it runs on some workers alone.

    Such a scheduler is a trial's (``trial.scheduler``): when the trial ends,
    stopped early or not, its workers are free at once, trainer closed or not.
    """
    if getattr(scheduler, "workers", None) is not None:
        scheduler.on_shutdown(functools.partial(_close, weakref.ref(group)))


def _close(ref) -> None:
    """Close the group behind ``ref``, if it still lives."""
    group = ref()
    if group is not None:
        group.close()
