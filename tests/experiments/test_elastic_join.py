"""Workers that join a cluster mid-sweep get slots at once; a cluster scaled down moves trials.

On a real ``LocalCluster`` of worker processes given to ``lk.DaskScheduler(cluster=...)``:
``cluster.scale(3)`` under a running sweep, then ``cluster.scale(1)`` (Dask retires
workers gracefully: their trials move, no failure).  Its workers are forked from this
process's fork server (as labkit's own clusters' are), not each a new interpreter: how a
worker starts is not what is tested, and a spawned one cost a second of CPU or more.
"""

from __future__ import annotations


import labkit as lk
from labkit.scheduling.dask.worker_start import worker_start
from tests.helpers import until
from tests.scheduling import elastic_functions as ef


def _running_workers(run) -> set:
    """Workers with a running trial that reported."""
    return {r["worker"] for r in run.sweep.snapshot()
            if r["status"] == "running" and r["step"] is not None}


def test_workers_joining_mid_sweep_take_trials_and_leaving_ones_move_theirs():
    from distributed import LocalCluster

    with worker_start("forkserver"), LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address=None) as cluster, lk.DaskScheduler(cluster=cluster) as s:
        run = lk.sweep(ef.epochs, {"x": lk.uniform(0, 1), "pause": 0.4}, trials=10,
                       metric="loss", mode="min", scheduler=s, store=None, wait=False,
                       max_failures=0, seed=0)
        until(lambda: len(_running_workers(run)) == 1, 180, "a trial on the one worker")
        cluster.scale(3)
        # the joined workers take trials while the sweep runs (not only after it)
        until(lambda: len(_running_workers(run)) == 3, 240, "trials on three workers")
        cluster.scale(1)                                     # two retire under their trials
        result = run.result(timeout=400)
    assert result.counts() == {"completed": 10}, [(t.status, t.error) for t in result.trials]
    assert sum(t.moves for t in result.trials) >= 1       # the retired workers' trials moved
    for t in result.trials:
        assert [step for step, _, _ in t.history] == list(range(8)), (t.id, t.history)
