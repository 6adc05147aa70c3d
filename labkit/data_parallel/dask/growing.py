"""A fit's group grows at an epoch's start: workers that joined the cluster become ranks.

A group that chose its workers itself (no ``workers=`` given, on a scheduler
over the whole cluster) takes in, before each epoch of a fit over data on the
workers, the workers the cluster gained since it formed (``cluster.scale``, a
new job, an adaptive scale-up, a worker a nanny restarted after its lifetime).
Each joining worker builds a replica from the group's payload and takes the
state, optimizer included, and step count of rank 0 (sent worker to worker by
Dask); the process group is then re-formed over the old ranks followed by the
new ones, as after a lost worker (:mod:`.epochs`), and the epoch is planned over
every rank (the blocks the newcomers read are moved there by Dask).  The
epoch starts from the state every rank ended the last one with, so a fit that
grows trains the same rows as one that does not.

A group pinned to its workers never grows: ``workers=`` given, or a scheduler
over some workers alone (``DaskScheduler(workers=...)``, a group trial's
``trial.scheduler``).  A GPU group takes in GPU workers only.
"""

from __future__ import annotations

import logging
import time

from ...errors import LabkitError, WorkerLostError
from ...scheduling.dask.connect import scheduler_identity
from ..worker import lifecycle as life
from .setup import device_slots, has_gpu
from .tasks import RankTasks

__all__ = ["LOOK_EVERY", "look_due", "newcomers", "take_in", "build_joining"]

#: Least seconds between two looks for workers that joined: each look asks the scheduler,
#: a round trip a short fit's epoch would otherwise pay every time.
LOOK_EVERY = 1.0


def look_due(group, epoch: int) -> bool:
    """Whether ``group`` looks at the cluster for newcomers before ``epoch`` (it is noted).

    Every later epoch of a fit looks; a fit's first looks only if the last look is
    ``LOOK_EVERY`` seconds old, so that short fits called in a loop do not each pay it.
    """
    now = time.monotonic()
    if epoch == 0 and group.looked_at and now - group.looked_at < LOOK_EVERY:
        return False
    group.looked_at = now
    return True


logger = logging.getLogger("labkit.data_parallel")


def newcomers(client, names: list[str]) -> list[str]:
    """The running workers of the cluster that are not ranks of ``names``, sorted.

    Where the group's workers have a GPU, only workers with a GPU: the group
    took GPU workers alone when it formed.
    """
    info = scheduler_identity(client)["workers"]
    gpu = any(has_gpu(info[a]) for a in names if a in info)
    return sorted(
        a
        for a, worker in info.items()
        if a not in names
        and worker.get("status", "running") == "running"
        and (has_gpu(worker) or not gpu)
    )


def take_in(group, joining: list[str]) -> list[str]:
    """``group`` (a :class:`~.group.DaskReplicaGroup`) grown by the ranks on ``joining``;
    the workers taken in (none when they could not be: the group goes on as it was)."""
    old, tasks = list(group.names), group.tasks
    try:
        gpu = group.backend != "gloo"
        devices = build_joining(tasks, group.shipped, joining, gpu, group.monitors)
    except Exception as err:  # Dask's own too: a worker that left again is no fault of the fit
        logger.warning("labkit: workers %s could not join the fit (%s)", ", ".join(joining), err)
        return []
    group.device_of.update(zip(joining, devices, strict=True))
    tasks.beside(life.teardown_group, group.gid)  # the live ranks' (a dead one would not answer)
    try:
        group.form(old + list(joining))
    except LabkitError as err:
        logger.warning("labkit: workers %s could not join the fit (%s)", ", ".join(joining), err)
        return _formed_again(group, old, list(joining))
    return list(joining)


def _formed_again(group, old: list[str], joining: list[str]) -> list[str]:
    """The group formed again after forming it with ``joining`` failed; those taken in.

    Every rank holds the state the last epoch ended with, so the ranks whose
    workers live go on, joining ones included; when none was lost (the forming
    failed otherwise), the group goes on as it was.
    """
    alive = group.alive()
    left = [n for n in old + joining if n in alive]
    if left == old + joining:
        left = old
    if not left:
        raise WorkerLostError("no worker of the group is left", worker=", ".join(old))
    group.tasks.beside(life.teardown_group, group.gid)
    dropped = [n for n in joining if n not in left and n in alive]
    if dropped:
        group.tasks.beside(life.teardown, group.gid, workers=dropped)
    group.form(left)
    return [n for n in joining if n in left]


def build_joining(
    tasks: RankTasks, shipped: bytes, joining: list[str], gpu: bool, monitors: bytes | None
) -> list[str]:
    """Replicas on ``joining`` holding rank 0's state, ranks after the others; their devices.

    ``tasks.names`` gains ``joining`` only when every replica was built; on a
    failure (a joining worker left again) the half-built ones are dropped and
    the error raised.
    """
    old = list(tasks.names)
    ranks = list(range(len(old), len(old) + len(joining)))
    slots: list = [None] * len(joining)
    tasks.names = old + list(joining)
    try:
        if gpu:
            slots = device_slots(joining, scheduler_identity(tasks.client)["workers"])
        built = [
            tasks.submit(r, life.build, tasks.gid, r, tasks.names[r], shipped, slot)
            for r, slot in zip(ranks, slots, strict=True)
        ]
        devices = tasks.run(built, "growing the group", ranks=ranks)
        handed = tasks.submit(0, life.handover, tasks.gid)  # moved worker to worker by Dask
        tasks.run(
            [tasks.submit(r, life.take_over, tasks.gid, r, handed) for r in ranks],
            "growing the group",
            ranks=ranks,
        )
        if monitors is not None:
            tasks.client.run(life.set_monitors, tasks.gid, monitors, workers=list(joining))
    except BaseException:
        tasks.names = old
        built = [a for a in joining if a in tasks.alive()]
        if built:
            tasks.beside(life.teardown, tasks.gid, workers=built)
        raise
    return devices
