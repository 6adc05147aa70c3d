"""ParallelFlow: parallel equals serial, order, phases, schedulers, errors, runs."""

import numpy as np
import pytest

import labkit as lk
from labkit.events import NodeJoined, PhaseStarted, TaskSubmitted
from tests import helpers
from tests.flows.cases import CASES, SLOW, X, chunks, input_for


def _trained(flow_class, factory, data, **train_kw):
    flow = flow_class([factory()])
    flow.train([data], **train_kw)
    return flow


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_builtin_node_parallel_equals_serial(name, scheduler):
    factory, data = CASES[name]
    serial = _trained(lk.Flow, factory, data)
    parallel = _trained(lk.ParallelFlow, factory, data, scheduler=scheduler)
    helpers.assert_nodes_equal(serial[0], parallel[0])
    x = input_for(name)
    np.testing.assert_allclose(parallel.execute(x), serial.execute(x), rtol=1e-8, atol=1e-10)
    if hasattr(serial[0], "label"):
        np.testing.assert_array_equal(parallel[0].label(x), serial[0].label(x))


def _pca_quad_sfa():
    return [lk.nodes.PCA(output_dim=3), lk.nodes.QuadraticExpansion(), lk.nodes.SFA(output_dim=2)]


def test_pca_quadratic_sfa_flow_parallel_equals_serial(scheduler):
    data = chunks(SLOW)
    serial = lk.Flow(_pca_quad_sfa())
    serial.train([data, None, data])
    parallel = lk.ParallelFlow(_pca_quad_sfa())
    parallel.train([data, None, data], scheduler=scheduler)
    for a, b in zip(serial, parallel):
        helpers.assert_nodes_equal(a, b)
    np.testing.assert_allclose(parallel.execute(data, scheduler=scheduler), serial.execute(SLOW),
                               rtol=1e-7, atol=1e-9)


def test_execute_keeps_chunk_order_when_tasks_finish_out_of_order(dask_scheduler, recorder):
    flow = lk.ParallelFlow([helpers.SleepyIdentity()])
    delays = [0.4, 0.3, 0.2, 0.1, 0.0]
    data = [np.full((3, 2), d) + np.arange(3)[:, None] * 1e-3 for d in delays]
    dask_scheduler.subscribe(recorder)
    out = flow.execute(data, scheduler=dask_scheduler)
    np.testing.assert_array_equal(out, np.concatenate(data))
    finish_order = [e.info.chunk for e in recorder.of(lk.events.TaskFinished)]
    assert finish_order != sorted(finish_order), "tasks did not finish out of order"


def test_untrainable_first_node_and_multiphase_nodes(scheduler, recorder):
    def nodes():
        return [lk.nodes.QuadraticExpansion(), lk.nodes.FDA(output_dim=2),
                lk.nodes.KMeans(n_clusters=2, max_iter=4)]
    data = CASES["FDA"][1]
    xs = [c[0] for c in data]
    serial = lk.Flow(nodes())
    serial.train([None, data, xs])
    scheduler.subscribe(recorder)
    parallel = lk.ParallelFlow(nodes())
    parallel.train([None, data, xs], scheduler=scheduler)
    for a, b in zip(serial, parallel):
        helpers.assert_nodes_equal(a, b)
    phases = [(e.node, e.phase) for e in recorder.of(PhaseStarted)]
    assert phases[:2] == [(1, 0), (1, 1)]
    assert {node for node, _ in phases} == {1, 2}
    assert not [e for e in recorder.of(TaskSubmitted) if e.info.node == 0]


def test_a_scheduler_per_node_with_none_entries(cluster):
    data = CASES["PCA"][1]
    s1 = lk.DaskScheduler(cluster.scheduler_address)
    s2 = lk.LocalScheduler()
    nodes = [lk.nodes.PCA(output_dim=4), lk.nodes.QuadraticExpansion(),
             lk.nodes.LinearRegression()]
    flow = lk.ParallelFlow(nodes)
    targets = [(x, x[:, :1]) for x in data]
    flow.train([data, None, targets], scheduler=[s1, None, s2])
    assert s1._closed and s2._closed  # train shut them down
    serial = lk.Flow([lk.nodes.PCA(output_dim=4), lk.nodes.QuadraticExpansion(),
                      lk.nodes.LinearRegression()])
    serial.train([data, None, targets])
    np.testing.assert_allclose(flow.execute(X), serial.execute(X), rtol=1e-7)


def test_non_forking_node_trains_locally_and_sends_no_tasks(dask_scheduler, recorder):
    factory, data = CASES["OnlineLinearRegression"]
    dask_scheduler.subscribe(recorder)
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=5), factory()])
    flow.train([[c[0] for c in data], data], scheduler=dask_scheduler)
    phases = recorder.of(PhaseStarted)
    assert [(e.node, e.local) for e in phases] == [(0, False), (1, True)]
    assert {e.info.node for e in recorder.of(TaskSubmitted)} == {0}
    serial = lk.Flow([lk.nodes.PCA(output_dim=5), factory()])
    serial.train([[c[0] for c in data], data])
    helpers.assert_nodes_equal(serial[1], flow[1])


STATE_EVERY = 0.5  # how often this subscriber wants the node's plot arrays


def test_joins_are_reported_with_node_state(dask_scheduler, recorder):
    """Joined on the client: one join, and one report, a chunk."""
    dask_scheduler.subscribe(recorder, state_every=STATE_EVERY)
    factory, data = CASES["PCA"]
    _trained(lk.ParallelFlow, factory, data, scheduler=dask_scheduler, join="client")
    joins = recorder.of(NodeJoined)
    assert [e.joins for e in joins] == list(range(1, len(data) + 1))
    assert joins[-1].state["samples"] == sum(len(c) for c in data)
    # plot arrays come with the first join, then at most every STATE_EVERY ...
    with_plots = [e for e in joins if "plots" in e.state]
    assert with_plots[0] is joins[0]
    assert len(with_plots[0].state["plots"]["eigenvalues"]) == X.shape[1]
    span = joins[-1].time - joins[0].time
    assert len(with_plots) <= 2 + span / STATE_EVERY
    # ... and always with the end of the phase: the trained node's spectrum
    (finished,) = recorder.of(lk.events.PhaseFinished)
    assert len(finished.state["plots"]["eigenvalues"]) == 4 and not finished.state["training"]


def test_failing_task_names_its_place_and_the_flow_trains_afterwards(scheduler):
    data = chunks(X)
    bad = list(data)
    bad[3] = bad[3].copy()
    bad[3][0, 0] = 999
    flow = lk.ParallelFlow([lk.nodes.PolynomialExpansion(1), helpers.FussyPCA(output_dim=2)])
    with pytest.raises(lk.TaskError) as info:
        flow.train([None, bad], scheduler=scheduler)
    err = info.value
    assert err.original_type == "ValueError" and "999" in err.original_message
    assert err.where["node"] == 1 and err.where["node_name"] == "FussyPCA"
    assert err.where["phase"] == 0 and err.where["chunk"] == 3
    assert "worker" in err.where and "_train" in err.remote_traceback
    assert flow[1].is_training() and flow[1].samples_seen == 0 and flow[1].joins == 0
    flow.train([None, data], scheduler=scheduler)
    serial = lk.Flow([lk.nodes.PolynomialExpansion(1), helpers.FussyPCA(output_dim=2)])
    serial.train([None, data])
    helpers.assert_nodes_equal(serial[1], flow[1])


def test_train_callable_class_transforms_chunks_on_the_worker(scheduler):
    images = [np.random.default_rng(i).integers(0, 256, size=(80, 16), dtype=np.uint8)
              for i in range(5)]
    with pytest.raises(lk.InputError, match="uint8"):
        lk.ParallelFlow([lk.nodes.PCA(output_dim=4)]).train([images], scheduler=scheduler)
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=4)])
    flow.train([images], scheduler=scheduler, train_callable_class=helpers.DecodeImages)
    serial = lk.Flow([lk.nodes.PCA(output_dim=4)])
    serial.train([[im.astype(np.float64) / 255 for im in images]])
    helpers.assert_nodes_equal(serial[0], flow[0])


def test_run_handle_result_done_and_events(dask_scheduler, recorder):
    factory, data = CASES["KMeans"]
    run = lk.ParallelFlow([factory()]).train([data], scheduler=dask_scheduler, wait=False)
    run.subscribe(recorder)
    assert run.result(timeout=60) is None
    assert run.done() and run.exception() is None and run.status == "finished"
    assert not run.cancel()


def test_run_cancel_restores_the_node(dask_scheduler):
    flow = lk.ParallelFlow([helpers.SlowPCA(delay=0.3, output_dim=3)])
    data = [X[i * 100:(i + 1) * 100] for i in range(12)]
    run = flow.train([data], scheduler=dask_scheduler, wait=False)
    import time
    time.sleep(0.8)
    assert run.cancel()
    with pytest.raises(lk.CancelledError):
        run.result(timeout=30)
    assert run.cancelled()
    assert flow[0].is_training() and flow[0].samples_seen == 0 and flow[0].joins == 0
    assert dask_scheduler.n_open_tasks == 0
    flow.train([data[:3]], scheduler=dask_scheduler)  # usable after a cancel
    assert not flow[0].is_training()


def test_execute_run_returns_output(dask_scheduler):
    factory, data = CASES["PCA"]
    flow = _trained(lk.ParallelFlow, factory, data, scheduler=dask_scheduler)
    run = flow.execute(data, scheduler=dask_scheduler, wait=False)
    np.testing.assert_allclose(run.result(timeout=60), flow.execute(X[:1200]))


def test_a_late_subscriber_gets_the_whole_run_in_order(dask_scheduler):
    factory, data = CASES["PCA"]
    other = lk.ParallelFlow([factory()]).train([data], scheduler=dask_scheduler, wait=False)
    run = lk.ParallelFlow([factory()]).train([data], scheduler=dask_scheduler, wait=False,
                                             join="client")
    run.result(timeout=60)
    other.result(timeout=60)
    from tests.conftest import EventRecorder
    late = EventRecorder()
    run.subscribe(late)
    names = late.names()
    assert names[0] == "RunStarted" and names[1] == "PhaseStarted" and names[-1] == "RunFinished"
    assert names.count("TaskFinished") == len(data) and names.count("NodeJoined") == len(data)
    assert {getattr(e, "run", None) or e.info.run for e in late.events} == {run.id}
    finished = late.of(lk.events.PhaseFinished)[0]
    assert finished.state is not None and finished.state["training"] is False
