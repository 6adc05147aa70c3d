"""The seed's manual task API, and nodes that learn during execute."""

import numpy as np
import pytest

import labkit as lk
from tests import helpers
from tests.flows.cases import CASES, X, chunks


def _nodes():
    return [lk.nodes.PCA(output_dim=4), lk.nodes.QuadraticExpansion(), lk.nodes.FDA(output_dim=2),
            lk.nodes.OnlineLinearRegression(learning_rate=0.01)]


def _data():
    fda = CASES["FDA"][1]
    xs = [c[0] for c in fda]
    return [xs, None, fda, [(x, x[:, :1] / 10) for x in xs]]


def test_manual_training_loop_equals_serial(scheduler):
    flow = lk.ParallelFlow(_nodes())
    flow.setup_parallel_training(_data())
    phases = 0
    while flow.is_parallel_training:
        while flow.task_available:
            scheduler.add_task(*flow.get_task())
        flow.use_results(scheduler.get_results())
        phases += 1
    assert phases == 3  # PCA, FDA phase 0, FDA phase 1; the online node trained locally
    serial = lk.Flow(_nodes())
    serial.train(_data())
    for a, b in zip(serial, flow):
        helpers.assert_nodes_equal(a, b)


def test_manual_execution_keeps_order(scheduler):
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=3)])
    flow.train([chunks(X)])
    scheduler.result_container = lk.OrderedResultContainer()
    flow.setup_parallel_execution(chunks(X))
    assert flow.is_parallel_executing
    while flow.task_available:
        scheduler.add_task(*flow.get_task())
    out = flow.use_results(scheduler.get_results())
    np.testing.assert_allclose(out, flow.execute(X[:1200]))
    assert not flow.is_parallel_executing


def test_manual_api_misuse_is_a_clear_error():
    flow = lk.ParallelFlow([lk.nodes.PCA()])
    with pytest.raises(lk.TrainingError, match="no task available"):
        flow.get_task()
    with pytest.raises(lk.TrainingError, match="use_results without"):
        flow.use_results([])


def test_execute_forks_are_joined_after_execute(scheduler):
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=2), helpers.RowCounter()])
    flow.train([chunks(X), None], scheduler=scheduler)
    out = flow.execute(chunks(X), scheduler=scheduler)
    assert flow[1].rows == 1200
    assert flow[1].total == pytest.approx(float(out.sum()), rel=1e-10)
