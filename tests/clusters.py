"""The kinds of cluster a fault test runs on: each a ``DaskScheduler`` of its own.

``"auto"``
    labkit's default: one in-process worker with two threads (GIL-holding
    tasks go to a pool of processes);
``"processes"``
    an embedded cluster of two worker processes;
``"address"``
    two worker processes of a ``LocalCluster`` reached by its address, as a
    cluster someone else started (left running by the scheduler, closed here).
"""

from __future__ import annotations

import contextlib

import labkit as lk

KINDS = ("auto", "processes", "address")


@contextlib.contextmanager
def scheduler_of(kind: str, **options):
    """A ``DaskScheduler`` on a new cluster of ``kind``; everything closed on exit."""
    if kind == "auto":
        with lk.DaskScheduler(mode="auto", n_workers=1, threads_per_worker=2, **options) as s:
            yield s
    elif kind == "processes":
        with lk.DaskScheduler(mode="processes", n_workers=2, **options) as s:
            yield s
    elif kind == "address":
        from distributed import LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None) as cluster:
            with lk.DaskScheduler(cluster.scheduler_address, **options) as s:
                yield s
    else:
        raise ValueError(f"no cluster kind {kind!r}; one of {KINDS}")
