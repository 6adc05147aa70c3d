"""OnlineLinearRegression: sequential, order-dependent, and therefore not forkable."""

import numpy as np
import pytest

from labkit.errors import InputError, NotForkableError, TrainingError
from labkit.nodes.online import OnlineLinearRegression


def fit(node, x, y, n_chunks=1):
    """Train serially through all phases (epochs), in order, ``n_chunks`` chunks each."""
    while node.is_training():
        for xs, ys in zip(np.array_split(x, n_chunks), np.array_split(y, n_chunks)):
            node.train(xs, ys)
        node.stop_training()
    return node


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(400, 3)) * [1.0, 3.0, 0.5] + [0.0, 1.0, 0.0]
    beta = np.array([[1.5, 0.0], [-0.2, 1.0], [4.0, 3.0]])
    return x, x @ beta + [4.0, -1.0]


def test_cannot_fork(problem):
    node = OnlineLinearRegression()
    assert node.is_trainable() and not node.use_execute_fork()
    with pytest.raises(NotForkableError):
        node.fork()
    node.train(*problem)
    with pytest.raises(NotForkableError):
        node.join(OnlineLinearRegression())


def test_noiseless_data_converges_to_truth(problem):
    x, y = problem
    node = fit(OnlineLinearRegression(learning_rate=1.0, epochs=15), x, y)
    reference = np.linalg.lstsq(np.hstack([np.ones((400, 1)), x]), y, rcond=None)[0]
    np.testing.assert_allclose(node.execute(x), y, rtol=1e-3, atol=1e-2)
    np.testing.assert_allclose(node.beta, reference, rtol=0.02, atol=0.05)
    assert node.errors[-1] < 1e-3 * node.errors[0]


def test_normalised_step_does_not_depend_on_input_scale(problem):
    # Plain LMS with this rate diverges on inputs scaled by 1e4; NLMS just
    # follows the same path with weights scaled by 1e-4.
    x, y = problem
    plain = fit(OnlineLinearRegression(learning_rate=1.9, with_bias=False), x, y)
    scaled = fit(OnlineLinearRegression(learning_rate=1.9, with_bias=False), 1e4 * x, y)
    np.testing.assert_allclose(1e4 * scaled.beta, plain.beta, rtol=1e-9)
    assert scaled.errors == pytest.approx(plain.errors, rel=1e-9)


def test_noisy_data_close_to_lstsq():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(3000, 4))
    y = x @ [1.0, -2.0, 0.5, 0.0] + 0.1 * rng.normal(size=3000)
    node = fit(OnlineLinearRegression(learning_rate=0.05, epochs=2), x, y)
    reference = np.linalg.lstsq(np.hstack([np.ones((3000, 1)), x]), y, rcond=None)[0]
    np.testing.assert_allclose(node.beta[:, 0], reference, atol=0.05)


def test_chunking_keeps_the_sequence_but_order_matters(problem):
    x, y = problem
    whole = fit(OnlineLinearRegression(epochs=2), x, y)
    chunked = fit(OnlineLinearRegression(epochs=2), x, y, n_chunks=7)
    np.testing.assert_allclose(chunked.beta, whole.beta, rtol=1e-12)
    order = np.random.default_rng(0).permutation(len(x))
    shuffled = fit(OnlineLinearRegression(epochs=2), x[order], y[order])
    # This is why the node cannot fork: a different row order gives other weights.
    assert not np.allclose(shuffled.beta, whole.beta, rtol=1e-6)


def test_phases_are_epochs(problem):
    node = OnlineLinearRegression(epochs=3)
    assert node.n_phases() == 3
    fit(node, *problem)
    assert node.phase == 3 and len(node.errors) == 3
    assert node.errors[0] > node.errors[1] > node.errors[2]


def test_float32_and_one_dimensional_targets(problem):
    x, y = problem
    node = fit(OnlineLinearRegression(with_bias=False), x.astype(np.float32), y[:, 0])
    out = node.execute(x.astype(np.float32))
    assert out.dtype == np.float32 and out.shape == (400, 1)
    assert node.beta.shape == (3, 1)


def test_errors(problem):
    x, y = problem
    node = OnlineLinearRegression(name="sgd")
    with pytest.raises(InputError, match="sgd") as info:
        node.train(x, y[:10])
    assert info.value.where["node_name"] == "sgd"
    with pytest.raises(InputError):
        node.train(x)
    with pytest.raises(TrainingError):
        node.execute(x)
    node.train(x, y)
    with pytest.raises(InputError):
        node.train(x, y[:, :1])
    for bad in ({"learning_rate": 0.0}, {"learning_rate": 2.5}, {"epochs": 0}):
        with pytest.raises(InputError):
            OnlineLinearRegression(**bad)


def test_state(problem):
    node = OnlineLinearRegression(epochs=2)
    node.train(*problem)
    state = node.state()
    assert (state["phase"], state["phases"], state["samples"]) == (0, 2, 400)
    assert state["plots"] == {"errors": []}
    fit(node, *problem)
    state = node.state()
    assert state["training"] is False and len(state["plots"]["errors"]) == 2
