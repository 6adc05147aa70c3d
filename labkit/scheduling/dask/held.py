"""The cluster a :class:`~labkit.scheduling.DaskScheduler` holds, and what it tells of it.

:class:`HeldCluster` owns what the scheduler opened (:class:`~.cluster.Opened`:
the client, the embedded cluster and Dask's quieted logs), the workers it may
use, the offload pool for GIL-holding tasks (``mode="auto"``) and the hold on
BLAS threads while tasks run on threads of this process.  It closes them in
that order.  The scheduler asks it, and nothing else, about its cluster.
"""

from __future__ import annotations

from typing import Any

from ...errors import InputError
from ..workers.blas import one_blas_thread
from ..workers.offload import OffloadPool
from .cluster import Opened, dashboard_link, run_on_workers
from .connect import scheduler_identity

__all__ = ["HeldCluster"]


class HeldCluster:
    """A scheduler's cluster: client, workers, offload pool and BLAS hold (see the module).

    Parameters
    ----------
    opened : Opened
        What :func:`~.cluster.open_cluster` opened; closed here if ``workers`` is wrong.
    workers : list of str, optional
        The only workers to use (their addresses); ``None``: all of them.
    """

    def __init__(self, opened: Opened, workers=None):
        self.opened = opened
        self.client = opened.client
        #: The embedded cluster's kind, or ``"existing"``.
        self.mode = opened.mode
        nthreads = self.client.nthreads()
        #: The only workers the scheduler uses (their addresses), or None: all of them.
        self.workers = None if workers is None else _of_cluster(workers, nthreads, opened)
        if self.workers is not None:
            nthreads = {a: n for a, n in nthreads.items() if a in self.workers}
        #: Threads of each worker used, by address.
        self.nthreads: dict[str, int] = nthreads
        #: The pool of processes for GIL-holding callables (``mode="auto"``), else None.
        self.offload: OffloadPool | None = None
        if self.mode == "auto":
            self.offload = OffloadPool(self.threads or 1)
        self.blas_hold: Any = None
        if self.in_process:
            # Worker threads share this process's BLAS: one thread per task thread, for the
            # scheduler's whole life (limiting per task made OpenBLAS resize its pool).
            self.blas_hold = one_blas_thread()
            self.blas_hold.__enter__()

    @property
    def threads(self) -> int:
        """Threads of the workers used, all together."""
        return sum(self.nthreads.values())

    @property
    def in_process(self) -> bool:
        """Whether tasks run on threads of this process (chunks by reference)."""
        return self.opened.in_process

    @property
    def cluster(self):
        """The ``LocalCluster`` labkit started, the one given by ``cluster=``, or ``None``."""
        return self.opened.cluster if self.opened.cluster is not None else self.opened.given

    @property
    def embedded_processes(self) -> bool:
        """Whether the workers are processes of an embedded cluster (all on this machine)."""
        return self.opened.cluster is not None and self.mode == "processes"

    @property
    def dashboard_link(self) -> str | None:
        """Link to Dask's own dashboard, when it runs one."""
        return dashboard_link(self.opened)

    def run_on_workers(self, fn, *args) -> dict:
        """``fn(*args)`` on every worker used (``client.run``); workers lost meanwhile left out."""
        only = self.workers
        return run_on_workers(self.client, fn, *args, workers=only and list(only))

    def describe(self, open_tasks: int) -> str:
        """What a scheduler's ``repr`` says of it: address, workers, kind, open tasks."""
        info = scheduler_identity(self.client)
        kind = "existing cluster"
        if self.opened.cluster is not None:
            kind = f"embedded cluster, mode {self.opened.mode!r}"
        elif self.opened.given is not None:
            kind = f"{type(self.opened.given).__name__} given"
        return (
            f"<DaskScheduler {info.get('address')}: {len(info.get('workers', {}))} workers "
            f"({kind}), {open_tasks} open tasks>"
        )

    def close(self) -> None:
        """Close what was opened (not a cluster or client given), the pool, the BLAS hold."""
        self.opened.close()
        if self.offload is not None:
            self.offload.close()
        if self.blas_hold is not None:
            self.blas_hold.__exit__(None, None, None)


def _of_cluster(workers, nthreads: dict, opened: Opened) -> tuple[str, ...]:
    """``workers`` as a tuple, each a worker of the cluster; else an InputError naming it."""
    chosen = tuple(dict.fromkeys(workers))
    for address in chosen:
        if address not in nthreads:
            opened.close()
            raise InputError(
                f"not a worker of this cluster: {address!r} (its workers: "
                f"{', '.join(sorted(nthreads)) or 'none'})",
                argument="workers",
            )
    if not chosen:
        opened.close()
        raise InputError("workers= names no worker: give at least one", argument="workers")
    return chosen
