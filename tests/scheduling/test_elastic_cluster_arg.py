"""``lk.DaskScheduler(cluster=...)``: any ``distributed.deploy.Cluster``, used and left running.

On real clusters: a ``LocalCluster`` of worker processes, and dask-jobqueue's
``dask_jobqueue.local.LocalCluster`` (the job machinery of SLURM and PBS, with
jobs as local processes).  Wrong combinations are one labkit error, before
anything is reached.
"""

from __future__ import annotations

import functools

import pytest

import labkit as lk
from tests.helpers import until
from tests.scheduling.elastic_functions import square

pytest.importorskip("dask_jobqueue")


_until = functools.partial(until, every=0.1)   # a look asks the scheduler


def test_a_local_cluster_given_runs_tasks_and_a_sweep_and_is_left_running():
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        with lk.DaskScheduler(cluster=cluster) as s:
            assert s.cluster is cluster and s.mode == "existing" and not s.in_process
            assert "LocalCluster given" in repr(s)
            s.add_tasks([1, 2, 3], lambda x: x * x)
            assert sorted(s.get_results()) == [1, 4, 9]
            result = lk.sweep(square, {"x": lk.uniform(0, 1)}, trials=4, metric="loss",
                              mode="min", scheduler=s, store=None, seed=0)
            assert result.counts() == {"completed": 4}
        assert cluster.status.name == "running"          # left as it was found
        assert len(cluster.scheduler_info["workers"]) == 2


def test_an_in_process_cluster_given_runs_tasks_on_its_threads():
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                      dashboard_address=None) as cluster:
        with lk.DaskScheduler(cluster=cluster) as s:
            assert s.in_process
            s.add_tasks([1, 2], lambda x: x + 1)
            assert sorted(s.get_results()) == [2, 3]


def test_a_jobqueue_cluster_from_no_job_runs_a_sweep_once_scaled():
    from dask_jobqueue.local import LocalCluster as JobCluster

    with JobCluster(cores=1, processes=1, memory="1GiB", walltime="00:10:00",
                    scheduler_options={"host": "127.0.0.1", "dashboard_address": None},
                    ) as cluster:
        with lk.DaskScheduler(cluster=cluster) as s:
            assert s.cluster is cluster
            run = lk.sweep(square, {"x": lk.uniform(0, 1)}, trials=3, metric="loss",
                           mode="min", scheduler=s, store=None, seed=0, wait=False)
            cluster.scale(jobs=2)                          # the jobs start after the sweep
            assert run.result(timeout=240).counts() == {"completed": 3}
            _until(lambda: len(s.client.nthreads()) >= 1, 60, "a job's worker")
        assert cluster.status.name == "running"


def test_wrong_combinations_and_kinds_are_one_labkit_error():
    from distributed import LocalCluster

    with pytest.raises(lk.InputError, match="distributed.deploy.Cluster") as info:
        lk.DaskScheduler(cluster="tcp://127.0.0.1:8786")
    assert info.value.where["argument"] == "cluster"
    with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster:
        with pytest.raises(lk.InputError, match="one of them; got address and cluster"):
            lk.DaskScheduler(cluster.scheduler_address, cluster=cluster)
        with pytest.raises(lk.InputError, match="a cluster given by cluster is used as it is"):
            lk.DaskScheduler(cluster=cluster, n_workers=3)
    with pytest.raises(lk.SchedulerError, match="the cluster given is closed"):
        lk.DaskScheduler(cluster=cluster)
