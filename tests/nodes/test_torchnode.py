"""TorchNode: federated averaging equals serial training, accuracy, errors, pickling."""

import functools
import pickle
import subprocess
import sys

import cloudpickle
import numpy as np
import pytest
import torch

import labkit as lk
from labkit.errors import InputError, TrainingError
from labkit.nodes.torchnode import TorchNode
from tests.nodes import forkjoin

BOUNDS = [70, 71, 200, 330, 480]  # 6 uneven chunks of 600 rows, one of a single row
EPOCHS = 5


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Tiny models on 2 cores shared with 2 Dask workers: extra intra-op threads only contend."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def split(*arrays, bounds=BOUNDS):
    """Chunks of ``arrays`` at ``bounds``; tuples when several arrays are given."""
    parts = list(zip(*(np.split(a, bounds) for a in arrays)))
    return [p if len(arrays) > 1 else p[0] for p in parts]


def mlp(n_in, n_out, dtype=torch.float64, dropout=0.0, seed=0):
    """A small MLP with fixed initial weights."""
    torch.manual_seed(seed)
    layers = [torch.nn.Linear(n_in, 16), torch.nn.Tanh(), torch.nn.Dropout(dropout),
              torch.nn.Linear(16, n_out)]
    return torch.nn.Sequential(*layers).to(dtype)


def regressor(**kw):
    # A lambda on purpose: Dask ships it with cloudpickle.
    kw.setdefault("batch_size", 32)
    return TorchNode(mlp(4, 2), torch.nn.MSELoss(), lambda p: torch.optim.SGD(p, lr=0.05),
                     epochs=EPOCHS, name="net", **kw)


def assert_modules_close(a, b, rtol=1e-8):
    """Every state tensor of two modules agrees within ``rtol`` of its largest entry."""
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for key in sa:
        scale = max(float(sa[key].abs().max()), 1e-300)
        assert float((sa[key] - sb[key]).abs().max()) <= rtol * scale, key


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(600, 8)) @ rng.normal(size=(8, 8))
    y = np.column_stack([np.sin(x[:, 0] / 3), x[:, 1] / 4 - x[:, 2] / 8])
    return x, y


@pytest.fixture(scope="module")
def serial_flow(problem):
    flow = lk.Flow([lk.nodes.PCA(output_dim=4), regressor()])
    flow.train([split(problem[0]), split(*problem)])
    return flow


def test_pca_then_mlp_parallel_equals_serial(problem, serial_flow, scheduler):
    x, y = problem
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=4), regressor()])
    flow.train([split(x), split(x, y)], scheduler=scheduler)
    net, reference = flow[1], serial_flow[1]
    assert_modules_close(net.module, reference.module)
    np.testing.assert_allclose(net.losses, reference.losses, rtol=1e-8)
    out = flow.execute(split(x), scheduler=scheduler)
    assert out.shape == (600, 2) and out.dtype == np.float64
    np.testing.assert_allclose(out, serial_flow.execute(x), rtol=1e-8, atol=1e-10)
    # The loss falls every epoch, and the fit beats predicting the mean.
    assert len(net.losses) == EPOCHS and np.all(np.diff(net.losses) < 0)
    assert np.mean((out - y) ** 2) < 0.5 * np.mean((y - y.mean(axis=0)) ** 2)
    assert (net.phase, net.is_training(), net.output_dim, net.input_dim) == (EPOCHS, False, 2, 4)


def test_forks_joined_in_any_order_equal_direct_training_with_randomness(problem):
    # Shuffling and dropout draw from per-chunk seeds, so forks still match.
    x, y = problem[0][:, :4], problem[1]

    def node():
        return TorchNode(mlp(4, 2, dropout=0.2), torch.nn.MSELoss(),
                         functools.partial(torch.optim.Adam, lr=0.01), epochs=3,
                         batch_size=16, shuffle=True, seed=5)

    direct = node()
    while direct.is_training():
        for chunk in split(x, y):
            direct.train(*chunk)
        direct.stop_training()
    forked = node()
    while forked.is_training():
        forkjoin.train_forked(forked, split(x, y), seed=forked.phase)
    assert_modules_close(direct.module, forked.module, rtol=1e-10)
    other_seed = forkjoin.fit(TorchNode(mlp(4, 2, dropout=0.2), torch.nn.MSELoss(),
                                        functools.partial(torch.optim.Adam, lr=0.01), epochs=3,
                                        batch_size=16, shuffle=True, seed=6),
                              (x, y), chunked=True, bounds=BOUNDS)
    assert not torch.equal(other_seed.module[0].weight, forked.module[0].weight)


@pytest.fixture(scope="module")
def blobs():
    rng = np.random.default_rng(0)
    centers = rng.normal(scale=3.0, size=(3, 5))
    labels = rng.integers(0, 3, size=900).astype(np.int32)
    x = centers[labels] + rng.normal(size=(900, 5))
    return x, labels


@pytest.fixture(scope="module")
def classifier(blobs):
    x, labels = blobs
    torch.manual_seed(1)
    module = torch.nn.Sequential(torch.nn.Linear(5, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    node = TorchNode(module, torch.nn.CrossEntropyLoss(),
                     functools.partial(torch.optim.Adam, lr=0.02), epochs=6, batch_size=32,
                     shuffle=True)
    flow = lk.ParallelFlow([node])
    flow.train([split(x[:600], labels[:600])], scheduler=lk.LocalScheduler())
    return node


def test_classifier_learns_int_labels_in_float32(blobs, classifier):
    x, labels = blobs
    scores = classifier.execute(x[600:])  # float64 input, float32 module
    assert scores.dtype == np.float32 and scores.shape == (300, 3)
    accuracy = np.mean(scores.argmax(axis=1) == labels[600:])
    assert accuracy > 0.9, accuracy
    assert classifier.losses[-1] < classifier.losses[0] / 2
    state = classifier.state()
    assert state["plots"]["loss"] == pytest.approx(classifier.losses)
    assert (state["phases"], state["output_dim"]) == (6, 3)


def test_missing_or_mismatched_targets_raise_input_error(problem):
    x, y = problem[0][:, :4], problem[1]
    node = regressor()
    with pytest.raises(InputError, match="needs targets") as info:
        node.train(x)
    assert (info.value.where["node_name"], info.value.where["phase"]) == ("net", 0)
    with pytest.raises(InputError, match="600 samples but 599 targets"):
        node.train(x, y[:-1])
    with pytest.raises(InputError, match="dtype"):
        node.train(x, np.array(["a"] * 600))
    with pytest.raises(InputError, match="output dim 3"):
        TorchNode(mlp(4, 2), torch.nn.MSELoss(), torch.optim.SGD, output_dim=3).train(x, y)
    assert node.samples_seen == 0


def test_nan_loss_names_the_phase(problem):
    x, y = problem[0][:50, :4], problem[1][:50]
    node = TorchNode(mlp(4, 2), torch.nn.MSELoss(), functools.partial(torch.optim.SGD, lr=0.01),
                     epochs=2, name="net")
    node.train(x, y)
    node.stop_training()
    bad = y.copy()
    bad[10, 0] = np.nan
    with pytest.raises(TrainingError, match="loss became nan in phase 1") as info:
        node.train(x, bad)
    assert (info.value.where["node_name"], info.value.where["phase"]) == ("net", 1)


def test_errors_from_workers_keep_their_place(problem, dask_scheduler):
    x, y = problem[0][:, :4], problem[1].copy()
    y[400, 1] = np.inf
    flow = lk.ParallelFlow([regressor()])
    with pytest.raises(TrainingError, match="in phase 0") as info:
        flow.train([split(x, y)], scheduler=dask_scheduler)
    assert {k: info.value.where[k] for k in ("node", "phase", "chunk")} == {
        "node": 0, "phase": 0, "chunk": 4}
    assert "worker" in info.value.where
    with pytest.raises(InputError, match="needs targets"):
        flow.train([split(x)], scheduler=dask_scheduler)
    assert flow[0].phase == 0 and flow[0].is_training()  # restored for another try


def test_pickle_round_trip_gives_identical_outputs(blobs, classifier):
    x = blobs[0]
    again = pickle.loads(pickle.dumps(classifier))
    np.testing.assert_array_equal(again.execute(x), classifier.execute(x))
    assert again.losses == classifier.losses
    # A lambda optimizer factory needs cloudpickle, as on Dask; mid-phase sums travel too.
    node = regressor()
    node.train(x[:100, :4], x[:100, :2])
    shipped = cloudpickle.loads(cloudpickle.dumps(node))
    for n in (node, shipped):
        n.train(x[100:200, :4], x[100:200, :2])
        n.stop_training()
    assert_modules_close(node.module, shipped.module, rtol=0)


def test_bad_arguments():
    for kwargs in ({"epochs": 0}, {"batch_size": 0}, {"epochs": 1.5}, {"output_dim": 0}):
        with pytest.raises(InputError):
            TorchNode(mlp(2, 1), torch.nn.MSELoss(), torch.optim.SGD, **kwargs)
    with pytest.raises(InputError, match="no parameters"):
        TorchNode(torch.nn.Identity(), torch.nn.MSELoss(), torch.optim.SGD)
    with pytest.raises(InputError, match="Module"):
        TorchNode(lambda x: x, torch.nn.MSELoss(), torch.optim.SGD)
    with pytest.raises(TrainingError):
        TorchNode(mlp(2, 1), torch.nn.MSELoss(), torch.optim.SGD).execute(np.ones((3, 2)))


def test_importing_labkit_does_not_import_torch():
    code = "import sys, labkit, labkit.nodes; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_dropout_and_shuffle_on_threads_of_one_process_equal_serial(problem):
    """Forks on the in-process cluster share one torch RNG: they take turns drawing from it."""
    x, y = problem[0][:, :4], problem[1]

    def node():
        return TorchNode(mlp(4, 2, dropout=0.3), torch.nn.MSELoss(),
                         functools.partial(torch.optim.SGD, lr=0.05), epochs=2,
                         batch_size=8, shuffle=True, seed=11)
    serial = lk.Flow([node()])
    serial.train([split(x, y)])
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        flow = lk.ParallelFlow([node()])
        flow.train([split(x, y)], scheduler=s)
    assert_modules_close(flow[0].module, serial[0].module)
