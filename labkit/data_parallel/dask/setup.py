"""What a replica group on Dask needs before it forms: its workers, one payload, their devices.

The replicas are built from one pickled payload (identical parameters
everywhere; a replica that cannot be built fails before anyone waits in a
rendezvous); a GPU worker's device is its own, whatever group it is in
(:func:`device_slots`), and two ranks on one host must not share a GPU.
"""

from __future__ import annotations

import copy
import functools
import weakref

import cloudpickle
from distributed.comm import get_address_host

from ...constraints import Options, check_argument
from ...errors import InputError, SchedulerError
from ...scheduling.dask.connect import scheduler_identity
from ...scheduling.tasks.pickling import dumps
from ..worker import lifecycle as life
from .tasks import RankTasks

__all__ = [
    "check_scheduler",
    "choose_workers",
    "device_slots",
    "has_gpu",
    "payload",
    "check_devices",
    "build_replicas",
    "closed_with",
]


def choose_workers(scheduler, workers) -> tuple[list[str], list[int] | None]:
    """``(addresses in rank order, each one's GPU on its host)``; None when not all have a GPU.

    ``workers`` None: the scheduler's own ``workers`` (a scheduler over some
    workers of its cluster, such as ``trial.scheduler``), else every worker.
    """
    workers = workers or getattr(scheduler, "workers", None)
    info = scheduler_identity(scheduler.client)["workers"]
    if not info:
        raise SchedulerError("the Dask cluster has no workers")
    gpu = {a for a in info if has_gpu(info[a])}
    names = sorted(gpu or info) if workers is None else list(workers)
    for a in names:
        if a not in info:
            raise InputError(f"not a worker of this cluster: {a!r}", device=a)
    if len(set(names)) != len(names) or not names:
        raise InputError(f"workers must be distinct and at least one: {names}")
    return names, (device_slots(names, info) if all(a in gpu for a in names) else None)


def device_slots(names, info: dict) -> list[int]:
    """The CUDA index of each GPU worker of ``names``: its place among its host's GPU workers.

    ``info`` maps every worker of the cluster to what the scheduler knows of it
    (its ``resources``).  A worker's GPU belongs to the worker, not to a group:
    the GPU workers of a host, sorted by address, take its GPUs 0, 1, ... so
    two groups on one host (two trials of a sweep) never share one.  A worker
    whose process has ``CUDA_VISIBLE_DEVICES`` set takes its first visible GPU
    instead (:func:`~labkit.data_parallel.worker.lifecycle.build`).

    >>> gpu, cpu = {"resources": {"GPU": 1}}, {"resources": {}}
    >>> info = {"tcp://10.0.0.1:7": gpu, "tcp://10.0.0.1:5": gpu, "tcp://10.0.0.1:3": cpu,
    ...         "tcp://10.0.0.2:9": gpu}
    >>> device_slots(["tcp://10.0.0.1:7", "tcp://10.0.0.2:9"], info)
    [1, 0]
    """
    host = get_address_host
    gpus = sorted(a for a in info if has_gpu(info[a]))
    return [[a for a in gpus if host(a) == host(name)].index(name) for name in names]


def has_gpu(worker: dict) -> bool:
    """Whether a worker (the scheduler's record of it) offers a ``GPU`` resource."""
    return (worker.get("resources") or {}).get("GPU", 0) > 0


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
            life.to_cpu(optimizer.state_dict()),
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


def build_replicas(tasks: RankTasks, shipped: bytes, slots: list[int] | None) -> list[str]:
    """Build every rank's replica from ``shipped``; the device each one got, described.

    Rank *r* takes its host's GPU ``slots[r]`` (:func:`device_slots`), or the
    CPU where ``slots`` is None; two ranks that got one GPU are an error.
    """
    names = tasks.names
    devices = tasks.run(
        [
            tasks.submit(
                r, life.build, tasks.gid, r, names[r], shipped, None if slots is None else slots[r]
            )
            for r in range(len(names))
        ],
        "set-up",
    )
    check_devices(names, [get_address_host(a) for a in names], devices)
    return devices


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
