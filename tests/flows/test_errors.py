"""Every bad input gets its clear labkit error, naming where; nothing is lost."""

import numpy as np
import pytest

import labkit as lk
from tests import helpers
from tests.flows.cases import LABELS, X, chunks


@pytest.fixture(params=["serial", "local", "dask"])
def train(request):
    """Train a flow serially, or in parallel on a local or Dask scheduler."""
    sched = None
    if request.param == "local":
        sched = lk.LocalScheduler()
    elif request.param == "dask":
        sched = lk.DaskScheduler(request.getfixturevalue("cluster").scheduler_address)

    def run(flow_nodes, data, **kw):
        if sched is None:
            flow = lk.Flow(flow_nodes)
            flow.train(data, **kw)
        else:
            flow = lk.ParallelFlow(flow_nodes)
            flow.train(data, scheduler=sched, **kw)
        return flow
    yield run
    if sched is not None:
        sched.shutdown()


def test_empty_iterable(train):
    with pytest.raises(lk.InputError, match="empty") as info:
        train([lk.nodes.PCA()], [[]])
    assert info.value.where["node"] == 0 and info.value.where["phase"] == 0


def test_one_shot_iterator_for_a_multiphase_node(train):
    gen = (c for c in chunks(X, LABELS))
    with pytest.raises(lk.InputError, match="several phases") as info:
        train([lk.nodes.FDA()], [gen])
    assert info.value.where == {"node": 0, "node_name": "FDA"}
    with pytest.raises(lk.InputError, match="several phases"):
        train([lk.nodes.KMeans(n_clusters=2)], [iter(chunks(X))])


def test_one_shot_iterator_is_fine_for_one_phase(train):
    flow = train([lk.nodes.PCA(output_dim=2)], [(c for c in chunks(X))])
    assert not flow[0].is_training()


def test_wrong_number_of_data_iterables(train):
    with pytest.raises(lk.InputError, match="got 1 for 2 nodes"):
        train([lk.nodes.PCA(), lk.nodes.PCA()], [chunks(X)])


def test_mismatched_dims_name_node_and_chunk(train):
    data = chunks(X)
    data[4] = data[4][:, :5]
    with pytest.raises(lk.InputError, match="input dim") as info:
        train([lk.nodes.PCA()], [data])
    assert info.value.where["node"] == 0 and info.value.where["chunk"] == 4


def test_mismatched_dtype_names_node_and_chunk(train):
    data = chunks(X)
    data[2] = data[2].astype(np.float32)
    with pytest.raises(lk.InputError, match="dtype") as info:
        train([lk.nodes.PCA()], [data])
    assert info.value.where["chunk"] == 2


def test_nan_with_check_finite(train):
    data = chunks(X)
    data[5] = data[5].copy()
    data[5][3, 2] = np.nan
    with pytest.raises(lk.InputError, match="NaN") as info:
        train([lk.nodes.PCA(check_finite=True)], [data])
    assert info.value.where["chunk"] == 5 and info.value.where["node_name"] == "PCA"


def test_trainable_node_without_data(train):
    with pytest.raises(lk.InputError, match="data iterable is None"):
        train([lk.nodes.PCA()], [None])


def test_training_a_trained_node(train):
    flow = train([lk.nodes.PCA(output_dim=2)], [chunks(X)])
    with pytest.raises(lk.TrainingError, match="already trained"):
        flow.train([chunks(X)])


def test_execute_before_training_names_the_node():
    flow = lk.ParallelFlow([lk.nodes.QuadraticExpansion(), lk.nodes.PCA()])
    with pytest.raises(lk.TrainingError, match="trained before execute") as info:
        flow.execute(chunks(X))
    assert info.value.where == {"node": 1, "node_name": "PCA"}
    with pytest.raises(lk.TrainingError):
        lk.Flow([lk.nodes.PCA()]).execute(X)


def test_a_failure_loses_nothing(train):
    bad = chunks(X)
    bad[1] = bad[1][:, :3]
    fresh = [lk.nodes.PCA(output_dim=2), lk.nodes.PCA(output_dim=1)]
    with pytest.raises(lk.InputError):
        train(fresh, [chunks(X), bad])
    assert not fresh[0].is_training()          # node 0 keeps its training
    assert fresh[1].is_training() and fresh[1].samples_seen == 0 and fresh[1].input_dim is None


# -- a node's own code that raises, and chunks the node cannot take -------------------------

# name -> (hook that raises, words the error names besides its place); each runs serially,
# in parallel on a local scheduler and on Dask worker processes
HOOK_CASES = {
    "train": ("_train", ("FaultyPCA._train failed with ValueError", "_train went wrong",
                         "chunk")),
    "stop_training": ("_stop_training", ("FaultyPCA._stop_training failed with ValueError",)),
    "fork": ("_fork", ("FaultyPCA._fork failed with ValueError",)),
    "join": ("_join", ("FaultyPCA._join failed with ValueError",)),
}


@pytest.mark.parametrize("name", list(HOOK_CASES))
def test_a_node_hook_that_raises_is_a_located_task_error_and_the_node_trains_after(
        name, train, request):
    hook, words = HOOK_CASES[name]
    serial = request.node.callspec.params["train"] == "serial"
    if serial and hook in ("_fork", "_join"):
        pytest.skip("a serial flow neither forks nor joins")
    node = helpers.FaultyPCA(fails_in=hook, output_dim=2)
    with pytest.raises(lk.TaskError) as info:
        train([node], [chunks(X)])
    err, message = info.value, str(info.value)
    assert err.original_type == "ValueError" and hook in (err.remote_traceback or "")
    assert all(word in message for word in words), message
    assert "node 0 'FaultyPCA'" in message and "phase 0" in message, message
    assert node.is_training() and node.samples_seen == 0      # put back as it was
    node.fails_in = None
    train([node], [chunks(X)])
    assert not node.is_training()


def test_a_node_execute_that_raises_names_the_node_and_chunk(train):
    flow = train([lk.nodes.QuadraticExpansion(), helpers.FaultyPCA(output_dim=2)],
                 [None, chunks(X)])
    flow[1].fails_in = "_execute"
    with pytest.raises(lk.TaskError) as info:
        flow.execute(chunks(X))
    message = str(info.value)
    assert "FaultyPCA._execute failed with ValueError" in message, message
    assert "node 1 'FaultyPCA'" in message and "chunk 0" in message, message
    flow[1].fails_in = None
    assert flow.execute(chunks(X)).shape == (len(X), 2)


def test_x_y_chunks_for_a_node_that_takes_x_alone(train):
    data = list(zip(chunks(X), chunks(LABELS)))
    node = lk.nodes.PCA(output_dim=2)
    with pytest.raises(lk.InputError) as info:
        train([node], [data])
    message = str(info.value)
    assert "PCA trains on x alone" in message and "node 0 'PCA'" in message, message
    assert "chunk" in info.value.where and node.samples_seen == 0
    train([node], [chunks(X)])
    assert not node.is_training()
