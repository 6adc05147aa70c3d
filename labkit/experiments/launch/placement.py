"""Where a sweep's trials run, decided once: a :class:`Placement` and the checks it owns.

A sweep is placed once, when it starts (:meth:`Placement.choose`), from
what its scheduler declares (``Scheduler.in_process``, a ``DaskScheduler``
or not, where its cluster listens) and the sweep's ``workers_per_trial``;
every later question (does the trial function travel, is this a group
trial, does one trial fit, how many run at once) reads that one answer.

* :data:`Where.INLINE` (a ``LocalScheduler``): one trial at a time in the
  sweep's own thread (:class:`~.threads.InlineLauncher`).
* :data:`Where.THREADS` (a ``DaskScheduler`` whose workers are threads of
  this process): one long task a slot on the cluster's threads
  (:class:`~.threads.ThreadLauncher`); a trial takes ``workers_per_trial``
  of the threads, so a trial that is itself parallel leaves the cluster room.
* :data:`Where.SLOTS` (worker processes of this machine: the scheduler
  listens on the loopback): one long task a slot, fed trials over a socket
  (:class:`~.slots.SlotLauncher`).
* :data:`Where.TASKS` (a cluster on other hosts, or the launch package's
  ``SLOTS`` switched off): a Dask task a trial, reports through Dask's event
  stream (:class:`~.remote.RemoteLauncher`).
* :data:`Where.GROUPS` (worker processes and ``workers_per_trial`` >= 2):
  each trial holds that many workers of its own, its function on a thread of
  the client (:class:`~.group.GroupLauncher`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import InputError
from ...scheduling import DaskScheduler
from ...scheduling.dask.connect import on_loopback, scheduler_identity
from ...scheduling.dask.preemption import retires_in
from ...scheduling.dask.warming import is_warm

__all__ = [
    "Where",
    "Placement",
    "check_room",
    "check_group_size",
    "group_pool",
    "pick_group",
    "leaving",
    "retiring_now",
    "usable_workers",
    "LIFE_NEEDED",
    "LIFE_LEAST",
]

#: Least seconds a worker must have before its lifetime ends to be taken into a new group,
#: until the sweep knows how long its groups take to a first checkpoint (then 1.5 times the
#: quickest, between LIFE_LEAST and this); a worker closer to its end is passed over.
LIFE_NEEDED = 4.0

#: The least life needed to join a group however quick its trials: a group's set-up and a step.
LIFE_LEAST = 2.0

#: The statuses of a worker that leaves: the scheduler retires it, or it closes.
LEAVING = frozenset({"closing_gracefully", "closing", "closed"})


class Where(enum.Enum):
    """The ways a trial travels; a sweep takes one (:meth:`Placement.choose`)."""

    INLINE = "this thread"
    THREADS = "threads of this process"
    SLOTS = "slots on worker processes"
    TASKS = "a task a trial"
    GROUPS = "a group of workers a trial"


#: Placements whose trials run in worker processes (a worker may be lost under them).
ON_WORKERS = frozenset({Where.SLOTS, Where.TASKS, Where.GROUPS})


@dataclass(frozen=True)
class Placement:
    """Where a sweep's trials run, chosen once; its checks and its slots.

    >>> from labkit.scheduling import LocalScheduler
    >>> Placement.choose(LocalScheduler(), workers_per_trial=1).where
    <Where.INLINE: 'this thread'>
    """

    where: Where
    scheduler: Any
    workers_per_trial: int = 1
    holds_gil: bool = False

    @classmethod
    def choose(
        cls, scheduler, workers_per_trial: int = 1, holds_gil: bool = False, slots: bool = True
    ) -> Placement:
        """The placement that suits ``scheduler`` for trials of ``workers_per_trial`` workers.

        ``slots`` off: trials on worker processes of this machine go a task a
        trial, as on a cluster of other hosts (the launch package's ``SLOTS``).
        """
        where = _where(scheduler, workers_per_trial, slots)
        return cls(where, scheduler, workers_per_trial, holds_gil)

    @property
    def group(self) -> bool:
        """Whether each trial holds a group of worker processes of its own."""
        return self.where is Where.GROUPS

    @property
    def on_workers(self) -> bool:
        """Whether trials run in worker processes (not in this process)."""
        return self.where in ON_WORKERS

    @property
    def travels(self) -> bool:
        """Whether the trial function goes to other processes (so it must pickle).

        A group trial runs on the client; a GIL-holding trial beside an
        in-process cluster runs in its offload pool's processes.
        """
        if self.where is Where.THREADS:
            return self.holds_gil
        return self.where in (Where.SLOTS, Where.TASKS)

    def check_room(self) -> None:
        """An :class:`~labkit.errors.InputError` if one trial cannot fit where it would run."""
        if self.where is Where.GROUPS:
            check_group_size(self.scheduler, self.workers_per_trial)
        elif self.where is Where.THREADS and self.workers_per_trial > 1:
            _check_threads(self.scheduler, self.workers_per_trial)

    def slots(self, threads: int, max_concurrent: int | None) -> int:
        """Trials that may run at once on ``threads`` threads (or workers), at most ``max_concurrent``.

        >>> Placement(Where.THREADS, None, workers_per_trial=2).slots(5, None)
        2
        >>> Placement(Where.SLOTS, None).slots(8, 3)
        3
        """
        n = max(1, threads // self.workers_per_trial)
        return min(n, max_concurrent) if max_concurrent else n


def _where(scheduler, workers_per_trial: int, slots: bool) -> Where:
    """The way trials of ``workers_per_trial`` travel on ``scheduler``."""
    if not isinstance(scheduler, DaskScheduler):
        return Where.INLINE
    if scheduler.in_process:
        return Where.THREADS
    if workers_per_trial > 1:
        return Where.GROUPS
    return Where.SLOTS if slots and _on_this_machine(scheduler) else Where.TASKS


def _on_this_machine(scheduler) -> bool:
    """Whether the cluster's scheduler listens on the loopback (its workers then run here)."""
    try:
        return on_loopback([scheduler.client.scheduler.address])
    except Exception:  # no address to read: the route that asks nothing of the workers
        return False


def check_room(scheduler, workers_per_trial: int) -> None:
    """An :class:`~labkit.errors.InputError` if one trial of ``workers_per_trial`` cannot fit.

    Worker processes: groups of that many workers (:func:`check_group_size`);
    an in-process cluster: that many of its threads (a restricted scheduler's alone).
    """
    Placement.choose(scheduler, workers_per_trial).check_room()


def _check_threads(scheduler, workers_per_trial: int) -> None:
    """An :class:`~labkit.errors.InputError` if the in-process cluster has too few threads."""
    n = sum(usable_workers(scheduler, scheduler.client.nthreads()).values())
    if workers_per_trial > n:
        raise InputError(
            f"workers_per_trial={workers_per_trial}, but the in-process cluster has {n} "
            f"thread(s): a trial takes workers_per_trial of its threads; give at most {n}, "
            "or a cluster of more threads",
            argument="workers_per_trial",
        )


def check_group_size(scheduler, workers_per_trial: int) -> None:
    """An :class:`~labkit.errors.InputError` if no group of ``workers_per_trial`` worker
    processes fits on ``scheduler``'s cluster (a group placement's check)."""
    workers = scheduler_identity(scheduler.client).get("workers", {})
    n = len(group_pool(usable_workers(scheduler, workers)))  # a restricted one's alone
    if workers_per_trial > n:
        raise InputError(
            f"workers_per_trial={workers_per_trial}, but the cluster has {n} worker "
            f"process(es) to make groups of: a trial holds workers_per_trial workers of "
            f"its own; give at most {n}, or a bigger cluster",
            argument="workers_per_trial",
        )


def group_pool(workers: dict) -> tuple:
    """The workers groups are made of, sorted: those with a ``GPU`` resource, if any, else all.

    >>> group_pool({"tcp://b": {}, "tcp://a": {"resources": {}}})
    ('tcp://a', 'tcp://b')
    >>> group_pool({"tcp://b": {"resources": {"GPU": 1}}, "tcp://a": {}})
    ('tcp://b',)
    """
    gpu = [a for a, w in workers.items() if w.get("resources", {}).get("GPU", 0) > 0]
    return tuple(sorted(gpu or workers))


def usable_workers(scheduler, workers: Mapping) -> dict:
    """``workers`` (by address) less those ``scheduler`` may not use: a restricted one's others.

    A sweep on ``trial.scheduler`` of a group trial (``DaskScheduler.restricted``)
    shares the cluster's client, which sees every worker; its trials belong on
    the group alone.

    >>> class Restricted: workers = ("tcp://a",)
    >>> usable_workers(Restricted(), {"tcp://a": 1, "tcp://b": 1})
    {'tcp://a': 1}
    """
    only = scheduler.workers  # DaskScheduler.workers: None, or a restricted one's
    return {a: w for a, w in workers.items() if only is None or a in only}


def pick_group(
    workers: Mapping, free, k: int, now: float | None = None, needed: float = LIFE_NEEDED
) -> tuple | None:
    """``k`` workers of ``free`` for a new group, sorted; None while fewer than ``k`` fit.

    ``workers`` maps each address to the scheduler's record of the worker.  A
    worker fits while it is not leaving and has ``needed`` seconds before its
    lifetime ends (a worker says when, :func:`~labkit.scheduling.dask.preemption.retires_in`);
    of those, warm ones first (what a rank imports is loaded,
    :mod:`labkit.scheduling.dask.warming`), then those with the most life left.

    >>> workers = {"a": {"metrics": {"labkit-retires-at": 103.0}},
    ...            "b": {"metrics": {"labkit-retires-at": 120.0, "labkit-warm": False}},
    ...            "c": {"metrics": {"labkit-retires-at": 110.0}},
    ...            "d": {"status": "closing_gracefully"}}
    >>> pick_group(workers, "abcd", 2, now=100.0), pick_group(workers, "abcd", 3, now=100.0)
    (('b', 'c'), None)
    """
    fit = [a for a in free if not leaving(workers[a]) and retires_in(workers[a], now) >= needed]
    if len(fit) < k:
        return None
    fit.sort(key=lambda a: (not is_warm(workers[a]), -retires_in(workers[a], now), a))
    return tuple(sorted(fit[:k]))


def retiring_now(worker: dict) -> bool:
    """Whether the scheduler is retiring a worker (the scheduler's record of it): it leaves
    gracefully, its data moved first (a worker closing otherwise may be a loss).

    >>> retiring_now({"status": "closing_gracefully"}), retiring_now({"status": "closing"})
    (True, False)
    """
    return worker.get("status") == "closing_gracefully"


def leaving(worker: dict) -> bool:
    """Whether a worker (the scheduler's record of it) is leaving: retired, or closing.

    >>> leaving({"status": "closing_gracefully"}), leaving({"status": "running"}), leaving({})
    (True, False, False)
    """
    return worker.get("status", "running") in LEAVING
