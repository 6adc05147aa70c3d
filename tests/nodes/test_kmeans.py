"""KMeans: order-independent seeding, exact fork/join per iteration, references."""

import numpy as np
import pytest
from sklearn.cluster import KMeans as SklearnKMeans
from sklearn.datasets import load_digits

from labkit.errors import InputError, TrainingError
from labkit.nodes.kmeans import KMeans

BOUNDS = [40, 41, 300, 700, 701, 1500]  # 7 uneven chunks, one of a single row


def fit(node, x, chunked, seed=0):
    """Train ``node`` through all phases; with ``chunked``, one fork per chunk joined shuffled."""
    rng = np.random.default_rng(seed)
    while node.is_training():
        if not chunked:
            node.train(x)
        else:
            forks = []
            for part in np.split(x, BOUNDS):
                forks.append(node.fork())
                forks[-1].train(part)
            for i in rng.permutation(len(forks)):
                node.join(forks[i])
        node.stop_training()
    return node


def lloyd(x, centers, n_iter):
    """Plain Lloyd iterations, written independently of the node."""
    inertia = []
    for _ in range(n_iter):
        dist = ((x[:, None, :] - centers[None]) ** 2).sum(axis=2)
        nearest = dist.argmin(axis=1)
        inertia.append(dist.min(axis=1).sum())
        centers = np.array([x[nearest == k].mean(axis=0) if np.any(nearest == k)
                            else centers[k] for k in range(len(centers))])
    return centers, inertia


@pytest.fixture(scope="module")
def digits():
    return load_digits(return_X_y=True)[0]


@pytest.fixture(scope="module")
def trained(digits):
    return fit(KMeans(10, max_iter=50), digits, chunked=True)


def test_fork_join_equals_serial_in_every_phase(digits, trained):
    serial = fit(KMeans(10, max_iter=50), digits, chunked=False)
    assert serial.n_iter == trained.n_iter > 3
    np.testing.assert_array_equal(trained.initial_centers, serial.initial_centers)
    np.testing.assert_allclose(trained.centers, serial.centers, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(trained.inertia, serial.inertia, rtol=1e-8)


def test_node_trained_directly_and_through_a_fork(digits):
    serial = fit(KMeans(6, max_iter=10), digits, chunked=False)
    node = KMeans(6, max_iter=10)
    while node.is_training():
        node.train(digits[:900])
        fork = node.fork()
        fork.train(digits[900:])
        node.join(fork)
        node.stop_training()
    np.testing.assert_allclose(node.centers, serial.centers, rtol=1e-8, atol=1e-10)
    assert node.n_iter == serial.n_iter


def test_seeding_ignores_row_order_but_follows_seed(digits):
    first = fit(KMeans(5, max_iter=1), digits, chunked=False)
    order = np.random.default_rng(7).permutation(len(digits))
    shuffled = fit(KMeans(5, max_iter=1), digits[order], chunked=True)
    np.testing.assert_array_equal(first.initial_centers, shuffled.initial_centers)
    other = fit(KMeans(5, max_iter=1, seed=1), digits, chunked=False)
    assert not np.array_equal(first.initial_centers, other.initial_centers)
    # Initial centres are distinct data rows.
    assert len(np.unique(first.initial_centers, axis=0)) == 5
    assert all((digits == c).all(axis=1).any() for c in first.initial_centers)


def test_matches_direct_lloyd_loop(digits, trained):
    centers, inertia = lloyd(digits, trained.initial_centers, trained.n_iter)
    np.testing.assert_allclose(trained.centers, centers, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(trained.inertia, inertia, rtol=1e-9)
    assert np.all(np.diff(trained.inertia) <= 1e-6)


def test_inertia_comparable_to_sklearn(digits, trained):
    final = trained.execute(digits).min(axis=1).sum()
    reference = SklearnKMeans(10, n_init=4, random_state=0).fit(digits).inertia_
    assert final <= 1.05 * reference


def test_execute_gives_squared_distances_and_label_the_nearest(digits, trained):
    dist = trained.execute(digits[:50])
    brute = ((digits[:50, None, :] - trained.centers[None]) ** 2).sum(axis=2)
    np.testing.assert_allclose(dist, brute, rtol=1e-9, atol=1e-8)
    np.testing.assert_array_equal(trained.label(digits[:50]), brute.argmin(axis=1))
    assert trained.output_dim == 10


def test_stops_when_converged_or_at_max_iter(digits):
    node = fit(KMeans(3, max_iter=2), digits, chunked=False)
    assert (node.n_iter, node.phase, node.is_training()) == (2, 3, False)
    loose = fit(KMeans(3, max_iter=100, tol=1e9), digits, chunked=False)
    assert loose.n_iter == 1


def test_empty_cluster_keeps_its_centre(digits):
    node = KMeans(3, max_iter=3)
    node.train(digits)
    node.stop_training()
    far = np.full(64, 1e3)
    node.centers = np.vstack([node.centers[:2], far])
    fit(node, digits, chunked=True)
    np.testing.assert_array_equal(node.centers[2], far)
    assert np.isfinite(node.centers).all()


def test_float32_input(digits):
    x32 = digits.astype(np.float32)
    node = fit(KMeans(4, max_iter=5), x32, chunked=True)
    reference = fit(KMeans(4, max_iter=5), digits, chunked=False)
    np.testing.assert_allclose(node.centers, reference.centers, rtol=1e-9)
    assert node.execute(x32).dtype == np.float32


def test_errors(digits):
    node = KMeans(3, name="km")
    with pytest.raises(TrainingError):
        node.label(digits)
    with pytest.raises(TrainingError):
        node.execute(digits)
    node.train(np.repeat(digits[:2], 5, axis=0))
    with pytest.raises(InputError, match="distinct") as info:
        node.stop_training()
    assert info.value.where["node_name"] == "km"
    with pytest.raises(InputError):
        KMeans(0)


def test_state(digits, trained):
    node = KMeans(4, max_iter=3)
    state = node.state()
    assert (state["phases"], state["output_dim"], state["plots"]) == (None, 4, {"inertia": []})
    fit(node, digits, chunked=True)
    state = node.state()
    assert (state["phase"], state["training"]) == (4, False)
    assert state["plots"]["inertia"] == pytest.approx(node.inertia)
    assert len(trained.state()["plots"]["inertia"]) == trained.n_iter
