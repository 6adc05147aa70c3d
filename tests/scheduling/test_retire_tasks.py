"""Workers retired mid-run (``client.retire_workers``): flows and task batches finish exactly.

Dask reschedules what ran on a retiring worker; labkit must neither stall nor send
a task again on top of that.  On real worker processes: a ``ParallelFlow``'s
training (each chunk joined exactly once, equal to serial) and plain ``add_tasks``
batches (every result once, in order), with a worker retired under each.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import labkit as lk
from labkit.events import NodeJoined, TaskFailed, TaskFinished, TaskStarted
from tests import helpers
from tests.flows.cases import X
from tests.scheduling import elastic_functions as ef


@pytest.fixture
def three():
    """A cluster of its own, of three worker processes: one of them is retired."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=3, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        yield cluster


def _retire_a_busy_worker(s, recorder, pids) -> str:
    """Retire the worker that started a task last (it holds one now); its address."""
    victim = [e.worker for e in recorder.of(TaskStarted) if e.worker in pids][-1]
    s.client.retire_workers([victim])
    return victim


def test_a_flow_trains_exactly_through_a_retired_worker(three, recorder):
    data = [X[i * 75:(i + 1) * 75] for i in range(16)]
    starts = helpers.StartCounter(recorder)
    with lk.DaskScheduler(cluster=three) as s:
        s.subscribe(starts)
        pids = s.client.run(os.getpid)
        flow = lk.ParallelFlow([helpers.SlowPCA(delay=0.25, output_dim=3)])
        run = flow.train([data], scheduler=s, wait=False, join="client")
        starts.wait(4)
        victim = _retire_a_busy_worker(s, recorder, pids)
        run.result(timeout=180)
        assert victim not in s.client.nthreads()
    joins = recorder.of(NodeJoined)
    assert [e.joins for e in joins] == list(range(1, 17))  # each chunk joined exactly once
    assert joins[-1].state["samples"] == sum(len(c) for c in data)
    assert len(recorder.of(TaskFinished)) == 16 and not recorder.of(TaskFailed)
    serial = lk.Flow([helpers.SlowPCA(delay=0.0, output_dim=3)])
    serial.train([data])
    helpers.assert_nodes_equal(serial[0], flow[0])
    np.testing.assert_allclose(flow.execute(X[:200]), serial.execute(X[:200]), rtol=1e-8)


def test_an_add_tasks_batch_finishes_exactly_through_a_retired_worker(three, recorder):
    starts = helpers.StartCounter(recorder)
    with lk.DaskScheduler(cluster=three) as s:
        s.subscribe(starts)
        pids = s.client.run(os.getpid)
        s.add_tasks([0.3] * 24, ef.sleepy)
        starts.wait(4)
        _retire_a_busy_worker(s, recorder, pids)
        assert s.get_results() == [0.3] * 24             # each once, in order, none missing
        s.add_tasks([0.01] * 6, ef.sleepy)               # the scheduler goes on
        assert s.get_results() == [0.01] * 6
    assert len(recorder.of(TaskFinished)) == 30 and not recorder.of(TaskFailed)
