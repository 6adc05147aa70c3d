"""GaussianClassifier: exact fork/join, direct and sklearn references, errors."""

import numpy as np
import pytest

from tests.nodes import forkjoin
from scipy.stats import multivariate_normal
from sklearn.datasets import load_digits
from sklearn.discriminant_analysis import QuadraticDiscriminantAnalysis

from labkit.errors import InputError, TrainingError
from labkit.nodes.classifier import GaussianClassifier

BOUNDS = [3, 4, 100, 250, 251, 420]  # 7 uneven chunks, one of a single row


def fit(node, data, chunked, seed=0, bounds=BOUNDS):
    """Train through all phases; with ``chunked``, one fork per chunk joined shuffled."""
    return forkjoin.fit(node, data, chunked, seed=seed, bounds=bounds)


@pytest.fixture(scope="module")
def blobs():
    rng = np.random.default_rng(3)
    names = np.array(["cat", "ant", "bee"])
    labels = names[rng.integers(0, 3, size=500)]
    shift = {"ant": [0, 0, 0, 0], "bee": [2, 0, 1, 0], "cat": [0, 2, 0, -1]}
    x = rng.normal(size=(500, 4)) @ rng.normal(size=(4, 4))
    x += np.array([shift[c] for c in labels])
    return x, labels


@pytest.fixture(scope="module")
def digits_pca():
    """Digits projected on 20 principal axes of the first 1200 samples."""
    x, labels = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(x))
    x, labels = x[order], labels[order]
    mean = x[:1200].mean(axis=0)
    axes = np.linalg.svd(x[:1200] - mean, full_matrices=False)[2][:20]
    return (x - mean) @ axes.T, labels


def test_fork_join_equals_serial(blobs):
    serial = fit(GaussianClassifier(), blobs, chunked=False)
    parallel = fit(GaussianClassifier(), blobs, chunked=True)
    for attr in ("means", "covs", "priors"):
        np.testing.assert_allclose(getattr(parallel, attr), getattr(serial, attr),
                                   rtol=1e-8, atol=1e-13)
    np.testing.assert_allclose(parallel.prob(blobs[0]), serial.prob(blobs[0]),
                               rtol=1e-8, atol=1e-13)


def test_matches_direct_computation(blobs):
    x, labels = blobs
    node = fit(GaussianClassifier(reg=0.01), blobs, chunked=True)
    assert node.classes.tolist() == ["ant", "bee", "cat"]
    joint = []
    for cls in ["ant", "bee", "cat"]:
        rows = x[labels == cls]
        cov = np.cov(rows, rowvar=False)
        cov += 0.01 * np.mean(np.diag(cov)) * np.eye(4)
        prior = len(rows) / len(x)
        joint.append(prior * multivariate_normal(rows.mean(axis=0), cov).pdf(x))
    joint = np.array(joint).T
    np.testing.assert_allclose(node.prob(x), joint / joint.sum(axis=1, keepdims=True),
                               rtol=1e-8, atol=1e-14)
    assert (node.label(x) == node.classes[joint.argmax(axis=1)]).all()


def test_agrees_with_sklearn_qda_on_digits(digits_pca):
    z, labels = digits_pca
    node = fit(GaussianClassifier(), (z[:1200], labels[:1200]), chunked=True)
    qda = QuadraticDiscriminantAnalysis().fit(z[:1200], labels[:1200])
    # sklearn's covariance divides by n (>= 1.8) or n - 1 (before); ours by
    # n - 1, so probabilities agree only roughly across versions.
    np.testing.assert_allclose(node.prob(z[1200:]), qda.predict_proba(z[1200:]), atol=0.05)
    predicted = node.label(z[1200:])
    assert np.mean(predicted == qda.predict(z[1200:])) > 0.99
    assert np.mean(predicted == labels[1200:]) > 0.95


def test_more_dimensions_than_samples_per_class(digits_pca):
    z, labels = digits_pca
    upper = np.triu_indices(20)
    quad = np.hstack([z, (z[:, :, None] * z[:, None, :])[:, upper[0], upper[1]]])
    assert quad.shape[1] == 230 and np.bincount(labels).max() < 230
    node = fit(GaussianClassifier(), (quad, labels), chunked=True)
    prob = node.prob(quad)
    assert np.isfinite(prob).all()
    np.testing.assert_allclose(prob.sum(axis=1), 1.0, rtol=1e-12)
    assert np.mean(node.label(quad) == labels) > 0.99
    held_out = fit(GaussianClassifier(), (quad[:1200], labels[:1200]), chunked=False)
    assert np.mean(held_out.label(quad[1200:]) == labels[1200:]) > 0.9


def test_probabilities_stable_far_from_every_class(blobs):
    node = fit(GaussianClassifier(), blobs, chunked=False)
    far = np.full((2, 4), 1e4)
    prob = node.prob(far)
    assert np.isfinite(prob).all()
    np.testing.assert_allclose(prob.sum(axis=1), 1.0)


def test_float32_input(blobs):
    x, labels = blobs
    x32 = x.astype(np.float32)
    node = fit(GaussianClassifier(), (x32, labels), chunked=True)
    reference = fit(GaussianClassifier(), (x32.astype(np.float64), labels), chunked=False)
    np.testing.assert_allclose(node.covs, reference.covs, rtol=1e-9)
    np.testing.assert_allclose(node.prob(x32), reference.prob(x32.astype(np.float64)),
                               rtol=1e-7, atol=1e-12)
    out = node.execute(x32)
    assert out.dtype == np.float32 and np.array_equal(out, x32)


def test_execute_passes_data_through(blobs):
    node = fit(GaussianClassifier(), blobs, chunked=False)
    assert np.array_equal(node.execute(blobs[0]), blobs[0])


def test_bad_labels_raise_input_error(blobs):
    x, labels = blobs
    node = GaussianClassifier(name="gauss")
    with pytest.raises(InputError, match="gauss") as info:
        node.train(x, labels[:-1])
    assert info.value.where["node_name"] == "gauss"
    with pytest.raises(InputError):
        node.train(x, labels[:, None])
    with pytest.raises(InputError):
        node.train(x)
    with pytest.raises(InputError):
        GaussianClassifier(reg=-1)
    mixed = GaussianClassifier()
    mixed.train(x[:10], labels[:10])
    mixed.train(x[10:20], np.arange(10))
    assert mixed.state()["plots"] == {}
    with pytest.raises(InputError, match="mixed types"):
        mixed.stop_training()


def test_label_and_prob_before_training_raise(blobs):
    node = GaussianClassifier()
    node.train(*blobs)
    for method in (node.label, node.prob, node.execute):
        with pytest.raises(TrainingError):
            method(blobs[0])


def test_single_sample_class_still_works(blobs):
    x, labels = blobs
    node = fit(GaussianClassifier(), (x[:51], np.r_[labels[:50], ["dog"]]), chunked=False)
    assert "dog" in node.classes.tolist()
    assert np.isfinite(node.prob(x)).all()


def test_state(blobs):
    x, labels = blobs
    node = GaussianClassifier()
    node.train(x, labels)
    expected = [int(np.sum(labels == c)) for c in ["ant", "bee", "cat"]]
    assert node.state()["plots"]["class_counts"] == expected
    node.stop_training()
    state = node.state()
    assert (state["phase"], state["training"], state["samples"]) == (1, False, 0)
    assert state["plots"]["class_counts"] == expected
