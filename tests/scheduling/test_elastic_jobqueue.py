"""dask-jobqueue's job-based cluster with worker lifetimes and ``adapt``: a sweep from 0 jobs.

``dask_jobqueue.local.LocalCluster`` runs the same job machinery as SLURM and PBS,
its jobs local processes.  Its workers get ``--lifetime 20s --lifetime-stagger 4s``
(the pattern dask-jobqueue documents for a queue's time limit) and the cluster
``adapt(minimum_jobs=0, maximum_jobs=2)``: the sweep's waiting trials start the
first jobs, workers that reach their lifetime leave gracefully (their trials move,
no failure), and adapt starts new jobs.  An ASHA sweep ends with no failed trial.
"""

from __future__ import annotations

import functools

import pytest

import labkit as lk
from tests.helpers import until
from tests.scheduling import elastic_functions as ef

pytest.importorskip("dask_jobqueue")


_until = functools.partial(until, every=0.2)   # a look asks the job queue


@pytest.mark.soak
def test_an_asha_sweep_from_no_job_on_lifetimed_adaptive_jobs_fails_no_trial():
    from dask_jobqueue.local import LocalCluster as JobCluster

    with JobCluster(cores=1, processes=1, memory="1GiB", walltime="00:10:00",
                    worker_extra_args=["--lifetime", "20s", "--lifetime-stagger", "4s"],
                    scheduler_options={"host": "127.0.0.1", "dashboard_address": None}
                    ) as cluster:
        cluster.adapt(minimum_jobs=0, maximum_jobs=2)
        with lk.DaskScheduler(cluster=cluster) as s:
            assert s.adaptive and not s.client.nthreads()      # no job yet
            space = {"x": lk.uniform(0, 1), "epochs": 8, "pause": 0.5}
            result = lk.sweep(ef.epochs, space, trials=24, metric="loss", mode="min",
                              scheduler=s, store=None, seed=0, max_failures=0,
                              early_stop=lk.ASHA(min_steps=1, reduction=2, max_steps=8),
                              wait=False).result(timeout=600)
        counts = result.counts()
        assert counts.get("failed", 0) == 0 and set(counts) <= {"completed", "stopped"}, \
            [(t.status, t.error) for t in result.trials]
        assert sum(counts.values()) == 24
        # the jobs' workers reached their lifetime under the sweep (2 jobs at most at once:
        # a third worker is a job started after one ended); whatever ran there moved
        assert len({t.worker for t in result.trials}) >= 3, [t.worker for t in result.trials]
        _until(lambda: not cluster.scheduler_info["workers"], 180, "adapt to end every job")
        address = cluster.scheduler_address
    # no job's process is left behind
    _until(lambda: not _jobs_of(address), 60, "the jobs' processes to end")


def _jobs_of(address: str) -> list:
    """Processes of this machine whose command line names the scheduler ``address``."""
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if address in " ".join(proc.info["cmdline"] or ()):
                found.append(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found
