"""LinearRegression: exact fork/join, agreement with lstsq and Ridge, errors."""

import numpy as np
import pytest

from tests.nodes import forkjoin
from sklearn.datasets import load_digits
from sklearn.linear_model import Ridge

from labkit.errors import InputError, TrainingError
from labkit.nodes.regression import LinearRegression

BOUNDS = [5, 6, 90, 200, 231, 390]  # 7 uneven chunks, one of a single row


def fit(node, data, chunked, seed=0, bounds=BOUNDS):
    """Train through all phases; with ``chunked``, one fork per chunk joined shuffled."""
    return forkjoin.fit(node, data, chunked, seed=seed, bounds=bounds)


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(500, 6)) * [1, 10, 0.1, 1, 3, 1]
    beta = rng.normal(size=(6, 3))
    y = x @ beta + 2.0 + 0.1 * rng.normal(size=(500, 3))
    return x, y


def test_fork_join_equals_serial(problem):
    serial = fit(LinearRegression(reg=0.5), problem, chunked=False)
    parallel = fit(LinearRegression(reg=0.5), problem, chunked=True)
    np.testing.assert_allclose(parallel.beta, serial.beta, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(parallel.execute(problem[0]), serial.execute(problem[0]),
                               rtol=1e-8, atol=1e-12)


def test_matches_lstsq(problem):
    x, y = problem
    node = fit(LinearRegression(), problem, chunked=True)
    reference = np.linalg.lstsq(np.hstack([np.ones((500, 1)), x]), y, rcond=None)[0]
    np.testing.assert_allclose(node.beta, reference, rtol=1e-9, atol=1e-11)
    assert node.output_dim == 3


def test_without_bias_matches_lstsq(problem):
    x, y = problem
    node = fit(LinearRegression(with_bias=False), problem, chunked=False)
    reference = np.linalg.lstsq(x, y, rcond=None)[0]
    np.testing.assert_allclose(node.beta, reference, rtol=1e-9, atol=1e-11)


def test_ridge_does_not_penalise_intercept(problem):
    x, y = problem
    node = fit(LinearRegression(reg=50.0), problem, chunked=True)
    reference = Ridge(alpha=50.0).fit(x, y)
    np.testing.assert_allclose(node.beta[0], reference.intercept_, rtol=1e-8)
    np.testing.assert_allclose(node.beta[1:], reference.coef_.T, rtol=1e-8, atol=1e-12)


def test_rank_deficient_digits_predictions_match_lstsq():
    # Digits has always-zero pixels: X'X is singular.
    x, labels = load_digits(return_X_y=True)
    y = np.eye(10)[labels]
    node = fit(LinearRegression(), (x, y), chunked=True)
    design = np.hstack([np.ones((len(x), 1)), x])
    reference = design @ np.linalg.lstsq(design, y, rcond=None)[0]
    np.testing.assert_allclose(node.execute(x), reference, atol=1e-8)
    assert np.isfinite(node.beta).all()


def test_one_dimensional_targets_are_one_column(problem):
    x, y = problem
    node = fit(LinearRegression(), (x, y[:, 0]), chunked=False)
    assert node.beta.shape == (7, 1)
    assert node.execute(x).shape == (500, 1)
    full = fit(LinearRegression(), problem, chunked=False)
    np.testing.assert_allclose(node.beta[:, 0], full.beta[:, 0], rtol=1e-10)


def test_float32_accumulates_in_float64(problem):
    x, y = problem
    x32 = x.astype(np.float32)
    node = fit(LinearRegression(), (x32, y), chunked=True)
    reference = fit(LinearRegression(), (x32.astype(np.float64), y), chunked=False)
    np.testing.assert_allclose(node.beta, reference.beta, rtol=1e-9, atol=1e-11)
    out = node.execute(x32)
    assert out.dtype == np.float32


def test_mismatched_targets_raise_input_error(problem):
    x, y = problem
    node = LinearRegression(name="reg")
    with pytest.raises(InputError, match="reg") as info:
        node.train(x, y[:-1])
    assert info.value.where["node_name"] == "reg"
    with pytest.raises(InputError):
        node.train(x)
    with pytest.raises(InputError):
        node.train(x, y[:, :, None])
    node.train(x, y)
    with pytest.raises(InputError, match="target columns"):
        node.train(x, y[:, :2])


def test_fork_with_other_target_width_cannot_join(problem):
    x, y = problem
    node = LinearRegression()
    node.train(x, y)
    other = LinearRegression().fork()
    other.train(x, y[:, :1])
    with pytest.raises(InputError):
        node.join(other)


def test_execute_before_training_raises(problem):
    node = LinearRegression()
    with pytest.raises(TrainingError):
        node.execute(problem[0])
    with pytest.raises(InputError):
        LinearRegression(reg=-1.0)


def test_state(problem):
    x, y = problem
    node = LinearRegression()
    for part in zip(np.split(x, BOUNDS), np.split(y, BOUNDS)):
        fork = node.fork()
        fork.train(*part)
        node.join(fork)
    state = node.state()
    assert (state["samples"], state["joins"], state["training"]) == (500, 7, True)
    assert state["plots"] == {}
    node.stop_training()
    state = node.state()
    assert (state["phase"], state["phases"], state["training"]) == (1, 1, False)
    assert state["output_dim"] == 3 and state["input_dim"] == 6
    assert len(state["plots"]["coefficient_norm"]) == 3
