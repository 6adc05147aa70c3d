"""An adaptive cluster sees a sweep's demand: it grows for the trials that wait, shrinks after.

On a real ``LocalCluster`` of worker processes with ``adapt(minimum=1, maximum=3)``
given to ``lk.DaskScheduler(cluster=...)``: each trial that waits has a queued slot
task, which Dask's adaptive target counts.  Before, the sweep kept one slot task a
worker thread and the cluster stayed at one worker.  Also: the benchmark's quick run.
The cluster's workers are forked from this process's fork server (as labkit's own
clusters' are), not each a new interpreter: how a worker starts is not what is tested.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading

import labkit as lk
from labkit.scheduling.dask.worker_start import worker_start
from tests.helpers import until
from tests.scheduling import elastic_functions as ef

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


_until = functools.partial(until, every=0.1)   # a look asks the scheduler


def test_an_adaptive_cluster_grows_for_a_sweep_and_shrinks_back_after():
    from distributed import LocalCluster

    with worker_start("forkserver"), LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address=None) as cluster, lk.DaskScheduler(cluster=cluster) as s:
        cluster.adapt(minimum=1, maximum=3)
        assert s.adaptive
        most, done = [0], threading.Event()

        def watch():
            while not done.wait(0.1):
                most[0] = max(most[0], len(s.client.nthreads()))

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            run = lk.sweep(ef.sleepy_trial, {"x": lk.uniform(0, 1), "seconds": 2.0}, trials=9,
                           metric="loss", mode="min", scheduler=s, store=None, wait=False)
            _until(lambda: most[0] >= 2 or run.done(), 240, "the cluster to grow")
            result = run.result(timeout=300)
        finally:
            done.set()
            watcher.join(timeout=5)
        assert result.counts() == {"completed": 9}
        assert most[0] >= 2, most                          # it grew for the sweep
        assert len({t.worker for t in result.trials}) >= 2
        _until(lambda: len(s.client.nthreads()) == 1, 120, "the cluster back at its minimum")


def test_a_fixed_cluster_is_not_adaptive():
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=1) as s:
        assert not s.adaptive


def test_the_elastic_benchmark_runs_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_elastic.py"),
                           "--quick"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("raw Dask client.map", "labkit lk.sweep", "=> labkit / raw Dask (wall)"):
        assert label in proc.stdout, label
