"""PCA and Whitening: reference results, exact fork/join, errors, live state."""

import numpy as np
import pytest

from tests.nodes.forkjoin import train_forked, uneven_chunks

from labkit.errors import InputError, TrainingError
from labkit.nodes.pca import PCA, Whitening

RTOL = 1e-8


def make_data(n=1200, dim=6, seed=0, dtype=np.float64):
    """Correlated Gaussian data with a well-separated spectrum and an offset."""
    rng = np.random.default_rng(seed)
    scales = 2.0 ** -np.arange(dim)
    mix = np.linalg.qr(rng.normal(size=(dim, dim)))[0]
    x = (rng.normal(size=(n, dim)) * scales) @ mix.T + rng.normal(size=dim)
    return x.astype(dtype)


def train_serial(node, x):
    node.train(x)
    node.stop_training()
    return node


def assert_same(a, b, x):
    for attr in ("avg", "v", "d"):
        np.testing.assert_allclose(getattr(a, attr), getattr(b, attr), rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(a(x), b(x), rtol=RTOL, atol=1e-10)
    assert a.explained_variance == pytest.approx(b.explained_variance, rel=RTOL)


def test_matches_numpy_covariance_and_svd():
    x = make_data()
    pca = train_serial(PCA(), x)
    cov = np.cov(x, rowvar=False)
    np.testing.assert_allclose(pca.avg, x.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(pca.d, np.linalg.eigvalsh(cov)[::-1], rtol=1e-9)
    _, s, vt = np.linalg.svd(x - x.mean(axis=0), full_matrices=False)
    np.testing.assert_allclose(pca.d, s ** 2 / (len(x) - 1), rtol=1e-9)
    # Same directions as the SVD, up to the sign convention.
    np.testing.assert_allclose(np.abs(np.sum(pca.v * vt.T, axis=0)), 1.0, rtol=1e-9)
    y = pca(x)
    np.testing.assert_allclose(np.cov(y, rowvar=False), np.diag(pca.d), atol=1e-10)
    assert pca.explained_variance == pytest.approx(1.0)


def test_signs_are_deterministic():
    pca = train_serial(PCA(), make_data())
    rows = np.argmax(np.abs(pca.v), axis=0)
    assert np.all(pca.v[rows, np.arange(pca.v.shape[1])] > 0)
    np.testing.assert_allclose(pca.v.T @ pca.v, np.eye(pca.v.shape[1]), atol=1e-12)


@pytest.mark.parametrize("kwargs", [{}, {"output_dim": 3}, {"output_dim": 0.99},
                                    {"svd": True, "output_dim": 4}, {"reduce": True}])
@pytest.mark.parametrize("cls", [PCA, Whitening])
def test_fork_join_equals_serial(cls, kwargs):
    x = make_data()
    serial = train_serial(cls(**kwargs), x)
    forked = train_forked(cls(**kwargs), uneven_chunks(x))
    assert forked.output_dim == serial.output_dim
    assert_same(serial, forked, x)


def test_serial_chunks_and_forks_mixed():
    x = make_data()
    chunks = uneven_chunks(x)
    node = PCA(output_dim=4)
    node.train(chunks[0])
    fork = node.fork()
    for chunk in chunks[1:]:
        fork.train(chunk)
    node.join(fork)
    node.stop_training()
    assert node.joins == 0 and node.phase == 1
    assert_same(train_serial(PCA(output_dim=4), x), node, x)


def test_svd_agrees_with_eigh():
    x = make_data()
    assert_same(train_serial(PCA(), x), train_serial(PCA(svd=True), x), x)


def test_fraction_keeps_fewest_components():
    x = make_data()
    full = train_serial(PCA(), x)
    ratio = np.cumsum(full.d) / full.d.sum()
    for frac in (0.5, 0.8, 0.95, 0.999):
        pca = train_serial(PCA(output_dim=frac), x)
        k = pca.output_dim
        assert ratio[k - 1] >= frac and (k == 1 or ratio[k - 2] < frac)
        assert pca.explained_variance == pytest.approx(ratio[k - 1])
        assert pca.v.shape == (6, k) and pca(x).shape == (len(x), k)
        assert pca.desired_variance == frac


def test_reduce_drops_null_directions():
    x = make_data(dim=4)
    x = np.c_[x, x[:, 0] + x[:, 1]]   # rank 4 in 5 columns
    assert train_serial(PCA(), x).output_dim == 5
    assert train_serial(PCA(reduce=True), x).output_dim == 4


def test_whitening_gives_identity_covariance():
    x = make_data()
    white = train_serial(Whitening(output_dim=4), x)
    y = white(x)
    np.testing.assert_allclose(np.cov(y, rowvar=False), np.eye(4), atol=1e-10)
    pca = train_serial(PCA(output_dim=4), x)
    np.testing.assert_allclose(y, pca(x) / np.sqrt(pca.d), rtol=1e-9)


def test_whitening_singular_needs_reduce():
    x = make_data(dim=3)
    x = np.c_[x, 2 * x[:, 0]]
    node = Whitening()
    node.train(x)
    with pytest.raises(InputError, match="Whitening.*reduce=True"):
        node.stop_training()
    assert node.is_training()   # nothing was lost; a retry still sees the data
    assert train_serial(Whitening(reduce=True), x).output_dim == 3


def test_float32_accumulates_in_float64():
    x64 = make_data()
    x32 = x64.astype(np.float32)
    pca32 = train_forked(PCA(output_dim=3), uneven_chunks(x32))
    ref = train_serial(PCA(output_dim=3), x32.astype(np.float64))
    np.testing.assert_allclose(pca32.d, ref.d, rtol=1e-9)
    np.testing.assert_allclose(pca32.v, ref.v, rtol=1e-7, atol=1e-9)
    y = pca32(x32)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, ref(x32.astype(np.float64)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5, -0.2, 0, -3, "2", True])
def test_bad_output_dim(bad):
    with pytest.raises(InputError, match="PCA output_dim") as info:
        PCA(output_dim=bad)
    assert info.value.where["node_name"] == "PCA"


def test_output_dim_larger_than_input_dim():
    with pytest.raises(InputError, match="output_dim 7 exceeds input dim 6"):
        PCA(output_dim=7, input_dim=6)
    node = PCA(output_dim=7, name="mypca")
    with pytest.raises(InputError, match="mypca output_dim 7 exceeds input dim 6") as info:
        node.train(make_data())
    assert info.value.where["node_name"] == "mypca"


def test_int_dtype_rejected():
    with pytest.raises(InputError, match="dtype int64"):
        PCA().train(np.ones((5, 2), dtype=np.int64))


def test_mismatched_input_dim():
    x = make_data()
    node = PCA()
    node.train(x[:100])
    with pytest.raises(InputError, match="input dim 6, got 5"):
        node.train(x[100:200, :5])
    fork = node.fork()
    other = PCA()
    other.train(x[:50, :4])
    with pytest.raises(InputError, match="input dim"):
        node.join(other)
    with pytest.raises(InputError, match="input dim 6, got 3"):
        fork.train(x[:10, :3])


def test_state_errors():
    node = PCA()
    with pytest.raises(TrainingError, match="trained before execute"):
        node.execute(make_data())
    node.train(make_data()[:1])
    with pytest.raises(InputError, match="needs at least 2 samples"):
        node.stop_training()
    train_serial(node, make_data())
    with pytest.raises(TrainingError, match="nothing to fork"):
        node.fork()
    with pytest.raises(TrainingError, match="finished"):
        node.train(make_data())


def test_state_eigenvalues_follow_joins():
    x = make_data()
    node = PCA(output_dim=2)
    assert node.state()["plots"] == {}
    seen = []
    for chunk in uneven_chunks(x):
        fork = node.fork()
        fork.train(chunk)
        node.join(fork)
        state = node.state()
        spectrum = state["plots"]["eigenvalues"]
        assert state["samples"] == sum(len(c) for c in uneven_chunks(x)[:len(seen) + 1])
        assert len(spectrum) == 6 and spectrum == sorted(spectrum, reverse=True)
        assert spectrum not in seen
        seen.append(spectrum)
    cov = np.cov(x, rowvar=False)
    np.testing.assert_allclose(seen[-1], np.linalg.eigvalsh(cov)[::-1], rtol=1e-9)
    node.stop_training()
    assert node.state()["plots"]["eigenvalues"] == node.d.tolist()
    assert len(node.d) == 2


def test_plot_limited_to_fifty_eigenvalues():
    x = np.random.default_rng(3).normal(size=(200, 60))
    node = PCA()
    node.train(x)
    assert len(node.state()["plots"]["eigenvalues"]) == 50
    node.stop_training()
    assert len(node.state()["plots"]["eigenvalues"]) == 50
