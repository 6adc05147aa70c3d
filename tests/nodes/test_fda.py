"""FDA: two exact forkable phases, sklearn and direct references, errors."""

import numpy as np
import pytest

from tests.nodes import forkjoin
from sklearn.datasets import load_digits, load_wine
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

from labkit.errors import InputError, TrainingError
from labkit.nodes.fda import FDA

BOUNDS = [40, 41, 300, 700, 701, 1500]  # 7 uneven chunks, one of a single row


def fit(node, data, chunked, seed=0, bounds=BOUNDS):
    """Train through all phases; with ``chunked``, one fork per chunk joined shuffled."""
    return forkjoin.fit(node, data, chunked, seed=seed, bounds=bounds)


@pytest.fixture(scope="module")
def digits():
    return load_digits(return_X_y=True)


@pytest.fixture(scope="module")
def trained(digits):
    return fit(FDA(), digits, chunked=True)


def test_two_phases_fork_join_equals_serial(digits, trained):
    serial = fit(FDA(), digits, chunked=False)
    assert serial.n_phases() == 2 and serial.phase == 2
    np.testing.assert_allclose(trained.v, serial.v, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(trained.ratios, serial.ratios, rtol=1e-8)
    np.testing.assert_allclose(trained.execute(digits[0]), serial.execute(digits[0]),
                               rtol=1e-8, atol=1e-9)


def test_matches_sklearn_lda_directions(digits, trained):
    # Digits has constant pixels (singular scatter): sklearn's svd solver copes too.
    x, labels = digits
    reference = LinearDiscriminantAnalysis().fit(x, labels)
    ours, theirs = trained.execute(x), reference.transform(x)
    assert ours.shape == theirs.shape == (len(x), 9)
    for i in range(9):
        assert abs(np.corrcoef(ours[:, i], theirs[:, i])[0, 1]) > 1 - 1e-9
    # sklearn's variance ratios are the normalised generalised eigenvalues.
    eig = trained.ratios / (1 - trained.ratios)
    np.testing.assert_allclose(eig / eig.sum(), reference.explained_variance_ratio_,
                               rtol=1e-7)


def test_solves_the_generalised_eigenproblem():
    x, labels = load_wine(return_X_y=True)
    node = fit(FDA(output_dim=2), (x, labels), chunked=True, bounds=[10, 11, 60, 90, 91, 150])
    total = np.cov(x, rowvar=False, bias=True)
    within = sum(np.cov(x[labels == c], rowvar=False, bias=True) * np.mean(labels == c)
                 for c in range(3))
    between = total - within
    eig = node.ratios / (1 - node.ratios)
    np.testing.assert_allclose(between @ node.v, within @ node.v * eig, rtol=1e-6,
                               atol=1e-9 * np.abs(between @ node.v).max())
    np.testing.assert_allclose(node.v.T @ total @ node.v, np.eye(2), atol=1e-9)
    projected = node.execute(x)
    np.testing.assert_allclose(projected.mean(axis=0), 0.0, atol=1e-9)


def test_signs_are_deterministic(trained):
    rows = np.argmax(np.abs(trained.v), axis=0)
    assert (trained.v[rows, np.arange(trained.v.shape[1])] > 0).all()
    assert np.all(np.diff(trained.ratios) <= 0)


def test_projection_separates_classes(digits, trained):
    x, labels = digits
    z = trained.execute(x)
    centres = np.array([z[labels == c].mean(axis=0) for c in range(10)])
    nearest = np.argmin(((z[:, None, :] - centres) ** 2).sum(axis=2), axis=1)
    assert np.mean(nearest == labels) > 0.9


def test_node_trained_directly_and_through_a_fork(digits):
    x, labels = digits
    serial = fit(FDA(), digits, chunked=False)
    node = FDA()
    while node.is_training():
        node.train(x[:900], labels[:900])
        fork = node.fork()
        fork.train(x[900:], labels[900:])
        node.join(fork)
        node.stop_training()
    np.testing.assert_allclose(node.v, serial.v, rtol=1e-8, atol=1e-12)


def test_fork_in_phase_one_carries_class_means(digits):
    x, labels = digits
    node = FDA()
    node.train(x, labels)
    node.stop_training()
    fork = node.fork()
    assert fork.phase == 1
    assert set(fork.class_means) == set(range(10))
    np.testing.assert_array_equal(fork.class_means[3], x[labels == 3].mean(axis=0))
    fork.train(x[:100], labels[:100])
    node.join(fork)
    assert node.samples_seen == 100


def test_float32_input(digits):
    x, labels = digits
    x32 = x.astype(np.float32)
    node = fit(FDA(output_dim=3), (x32, labels), chunked=True)
    reference = fit(FDA(output_dim=3), (x, labels), chunked=False)
    np.testing.assert_allclose(node.v, reference.v, rtol=1e-8, atol=1e-12)
    out = node.execute(x32)
    assert out.dtype == np.float32 and out.shape == (len(x), 3)


def test_errors(digits):
    x, labels = digits
    node = FDA(name="fisher")
    with pytest.raises(InputError, match="fisher") as info:
        node.train(x, labels[:-2])
    assert info.value.where["node_name"] == "fisher"
    with pytest.raises(TrainingError):
        node.execute(x)
    node.train(x[labels < 5], labels[labels < 5])
    node.stop_training()
    with pytest.raises(TrainingError):
        node.execute(x)
    with pytest.raises(InputError, match=r"\[5, 6, 7, 8, 9\]"):
        node.train(x, labels)
    one_class = FDA()
    one_class.train(x, np.zeros(len(x)))
    with pytest.raises(InputError, match="two classes"):
        one_class.stop_training()
    too_many = FDA(output_dim=80)
    with pytest.raises(InputError):
        fit(too_many, digits, chunked=False)


def test_state(digits):
    x, labels = digits
    node = FDA()
    node.train(x, labels)
    node.stop_training()
    state = node.state()
    assert (state["phase"], state["phases"], state["training"]) == (1, 2, True)
    assert state["plots"] == {}
    node.train(x, labels)
    node.stop_training()
    state = node.state()
    assert (state["phase"], state["training"], state["output_dim"]) == (2, False, 9)
    assert len(state["plots"]["ratios"]) == 9
