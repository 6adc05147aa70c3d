"""A worker process killed mid-phase: training completes, equals serial, no join doubled.

Forks joined on the client here; ``test_worker_join.py`` kills a worker whose fork
held chunks.
"""

import os
import signal

import numpy as np
import pytest

import labkit as lk
from labkit.events import NodeJoined, TaskFinished, TaskStarted
from tests import helpers
from tests.flows.cases import X

pytestmark = pytest.mark.soak  # `make soak` runs these again and again


@pytest.fixture
def own_cluster():
    """A cluster of its own: one of its workers gets killed."""
    from distributed import LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        yield cluster


@pytest.mark.parametrize("direct_bytes", [2**40, 1], ids=["chunks-in-graph", "chunks-scattered"])
def test_killing_a_worker_mid_phase(own_cluster, recorder, direct_bytes):
    """Chunks either travel inside the task graph, or are scattered to a worker.

    Scattered chunks die with their worker; the scheduler must send them again.
    """
    data = [X[i * 75:(i + 1) * 75] for i in range(16)]
    starts = helpers.StartCounter(recorder)
    with lk.DaskScheduler(own_cluster.scheduler_address, direct_bytes=direct_bytes) as s:
        s.subscribe(starts)
        pids = s.client.run(os.getpid)
        flow = lk.ParallelFlow([helpers.SlowPCA(delay=0.25, output_dim=3)])
        run = flow.train([data], scheduler=s, wait=False, join="client")
        starts.wait(4)  # some tasks have started
        # the worker that started a task last: one that may not have started any yet
        # (its chunks' copies still on the way) could die without a task lost under it
        victim_address = [e.worker for e in recorder.of(TaskStarted) if e.worker in pids][-1]
        victim_pid = pids[victim_address]
        os.kill(victim_pid, signal.SIGKILL)
        run.result(timeout=120)

    joins = recorder.of(NodeJoined)
    assert [e.joins for e in joins] == list(range(1, 17))  # each task joined exactly once
    assert joins[-1].state["samples"] == sum(len(c) for c in data)
    assert len(recorder.of(TaskFinished)) == 16
    killed_ran = {e.info.task for e in recorder.of(TaskStarted) if e.worker == victim_address}
    assert killed_ran, "the killed worker never ran a task"
    rerun = {e.info.task for e in recorder.of(TaskFinished) if e.worker != victim_address}
    assert killed_ran & rerun, "no task was lost with the worker and re-run elsewhere"
    serial = lk.Flow([helpers.SlowPCA(delay=0.0, output_dim=3)])
    serial.train([data])
    helpers.assert_nodes_equal(serial[0], flow[0])
    np.testing.assert_allclose(flow.execute(X[:200]), serial.execute(X[:200]), rtol=1e-8)
