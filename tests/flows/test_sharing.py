"""A scheduler shared by runs and direct use: nobody's partial work reports success."""

import threading
import time

import numpy as np
import pytest

import labkit as lk
from tests import helpers
from tests.flows.cases import X

CHUNKS = [X[i * 50:(i + 1) * 50] for i in range(24)]


def _serial(delay=0.0):
    flow = lk.Flow([helpers.SlowPCA(delay=delay, output_dim=3)])
    flow.train([CHUNKS])
    return flow


def _started(run, n=2, timeout=60):
    """Wait until ``n`` of the run's tasks have finished (it is under way)."""
    seen = threading.Semaphore(0)
    run.subscribe(lambda e: isinstance(e, lk.events.TaskFinished) and seen.release())
    for _ in range(n):
        assert seen.acquire(timeout=timeout)


def test_scheduler_cancel_during_a_run_makes_the_run_raise(dask_scheduler):
    """Reproducer 1: ``s.cancel()`` while a run trains used to report success on part of it."""
    flow = lk.ParallelFlow([helpers.SlowPCA(delay=0.1, output_dim=3)])
    run = flow.train([CHUNKS], scheduler=dask_scheduler, wait=False)
    _started(run)
    assert dask_scheduler.cancel() > 0
    with pytest.raises(lk.CancelledError, match="scheduler.cancel") as info:
        run.result(timeout=60)
    assert info.value.where["node"] == 0 and info.value.where["phase"] == 0
    assert run.status == "cancelled"
    assert flow[0].is_training() and flow[0].samples_seen == 0 and flow[0].joins == 0
    assert dask_scheduler.total_open_tasks == 0
    flow.train([CHUNKS], scheduler=dask_scheduler)   # and the flow trains again at once
    helpers.assert_nodes_equal(_serial()[0], flow[0])


def test_a_run_beside_direct_add_task_use_is_unharmed_and_so_is_the_caller(dask_scheduler):
    """Reproducer 1b: direct ``add_task``/``get_results`` during a run used to mix results."""
    flow = lk.ParallelFlow([helpers.SlowPCA(delay=0.05, output_dim=3)])
    run = flow.train([CHUNKS], scheduler=dask_scheduler, wait=False)
    _started(run, 1)
    for x in range(10):
        dask_scheduler.add_task(x, helpers.double)
    assert sorted(dask_scheduler.get_results()) == [2 * x for x in range(10)]
    assert run.result(timeout=60) is None and run.status == "finished"
    helpers.assert_nodes_equal(_serial()[0], flow[0])


def test_two_runs_share_a_scheduler_at_the_same_time(cluster, recorder):
    """With a window of 4, each run keeps 2 tasks in flight: their tasks interleave."""
    with lk.DaskScheduler(cluster.scheduler_address, max_in_flight=4) as s:
        s.subscribe(recorder)
        flows = [lk.ParallelFlow([helpers.SlowPCA(delay=0.05, output_dim=3)]) for _ in range(2)]
        runs = [f.train([CHUNKS], scheduler=s, wait=False) for f in flows]
        for run in runs:
            run.result(timeout=60)
    for flow in flows:
        helpers.assert_nodes_equal(_serial()[0], flow[0])
    finished = [(e.info.run, e.end) for e in recorder.of(lk.events.TaskFinished)]
    first_end = {r.id: max(t for run, t in finished if run == r.id) for r in runs}
    first_start = {r.id: min(t for run, t in finished if run == r.id) for r in runs}
    a, b = (r.id for r in runs)
    assert first_start[b] < first_end[a] and first_start[a] < first_end[b], "they took turns"


def test_after_a_bad_add_task_the_next_training_finishes(dask_scheduler):
    """Reproducer 2: one unshippable chunk used to leave a task open for good."""
    with pytest.raises(lk.InputError, match="could not be sent"):
        dask_scheduler.add_task(threading.Lock(), helpers.double)
    assert dask_scheduler.n_open_tasks == 0
    flow = lk.ParallelFlow([helpers.SlowPCA(delay=0.0, output_dim=3)])
    run = flow.train([CHUNKS], scheduler=dask_scheduler, wait=False)
    run.result(timeout=60)
    helpers.assert_nodes_equal(_serial()[0], flow[0])


def test_an_unshippable_chunk_in_a_flow_names_node_and_chunk_and_restores_it(dask_scheduler):
    bad = list(CHUNKS[:5]) + [(CHUNKS[5], threading.Lock())]
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=3)])
    with pytest.raises(lk.InputError, match="chunk 5 could not be sent") as info:
        flow.train([bad], scheduler=dask_scheduler)
    assert info.value.where["node"] == 0 and info.value.where["chunk"] == 5
    assert flow[0].is_training() and flow[0].joins == 0
    assert dask_scheduler.total_open_tasks == 0


def test_shutdown_during_a_run_raises_a_scheduler_error(cluster):
    s = lk.DaskScheduler(cluster.scheduler_address)
    flow = lk.ParallelFlow([helpers.SlowPCA(delay=0.2, output_dim=3)])
    run = flow.train([CHUNKS], scheduler=s, wait=False)
    _started(run)
    s.shutdown()
    with pytest.raises(lk.SchedulerError, match="shut down"):
        run.result(timeout=60)
    assert flow[0].is_training() and flow[0].joins == 0


def test_run_cancel_cancels_its_own_tasks_only(dask_scheduler):
    keep = lk.ParallelFlow([helpers.SlowPCA(delay=0.05, output_dim=3)])
    drop = lk.ParallelFlow([helpers.SlowPCA(delay=0.2, output_dim=3)])
    kept = keep.train([CHUNKS], scheduler=dask_scheduler, wait=False)
    dropped = drop.train([CHUNKS], scheduler=dask_scheduler, wait=False)
    _started(dropped, 1)
    assert dropped.cancel()
    with pytest.raises(lk.CancelledError, match="the run was cancelled"):
        dropped.result(timeout=60)
    assert kept.result(timeout=60) is None
    helpers.assert_nodes_equal(_serial()[0], keep[0])
    assert drop[0].joins == 0


def test_execute_is_cancelled_too_not_returned_short(dask_scheduler):
    flow = lk.ParallelFlow([helpers.SleepyIdentity()])
    data = [np.full((3, 2), 0.2) for _ in range(20)]
    run = flow.execute(data, scheduler=dask_scheduler, wait=False)
    _started(run, 1)
    dask_scheduler.cancel()
    with pytest.raises(lk.CancelledError):
        run.result(timeout=60)


def test_a_cancel_too_late_leaves_the_complete_result_and_an_early_one_raises():
    proceed = threading.Event()

    def job(scope):
        proceed.wait(10)
        scope.check()              # where the engine checks: between tasks and phases
        return "complete"

    run = lk.runs.start("demo", [], job, wait=False)
    assert run.cancel()
    proceed.set()
    with pytest.raises(lk.CancelledError):
        run.result(timeout=10)
    assert run.cancelled() and run.status == "cancelled"

    late = lk.runs.start("demo", [], lambda scope: "complete", wait=False)
    assert late.result(timeout=10) == "complete"
    assert not late.cancel() and not late.cancelled() and late.status == "finished"
