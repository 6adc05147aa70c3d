"""SFA: recovery of a known slow signal, a direct reference, exact fork/join, errors."""

import numpy as np
import pytest

from tests.nodes.forkjoin import train_forked, uneven_chunks

from labkit.errors import InputError, TrainingError
from labkit.nodes.sfa import SFA

RTOL = 1e-8
T = np.linspace(0, 6 * np.pi, 3000)


def make_data(dtype=np.float64, seed=0):
    """A slow sine, two faster sines and noise, linearly mixed."""
    rng = np.random.default_rng(seed)
    sources = np.c_[np.sin(T), np.sin(11 * T), np.cos(29 * T), rng.normal(size=(len(T), 2))]
    mix = rng.normal(size=(5, 5))
    return (sources @ mix + rng.normal(size=5)).astype(dtype)


def train_serial(node, chunks):
    for chunk in chunks:
        node.train(chunk)
    node.stop_training()
    return node


def reference(chunks, include_last_sample=True):
    """Generalized eigenvalues computed directly via a Cholesky factor."""
    rows = chunks if include_last_sample else [c[:-1] for c in chunks]
    cov = np.cov(np.concatenate(rows), rowvar=False)
    dx = np.concatenate([np.diff(c, axis=0) for c in chunks])
    dcov = dx.T @ dx / len(dx)
    inv_l = np.linalg.inv(np.linalg.cholesky(cov))
    return np.linalg.eigvalsh(inv_l @ dcov @ inv_l.T)


def test_recovers_slow_sine():
    x = make_data()
    y = train_serial(SFA(output_dim=3), [x])(x)
    for k, freq in enumerate((1, 11)):
        corr = np.corrcoef(y[:, k], np.sin(freq * T))[0, 1]
        assert abs(corr) > 0.999, (k, corr)
    assert abs(np.corrcoef(y[:, 2], np.cos(29 * T))[0, 1]) > 0.999


@pytest.mark.parametrize("include_last_sample", [True, False])
def test_matches_direct_computation(include_last_sample):
    x = make_data()
    chunks = uneven_chunks(x)
    sfa = train_serial(SFA(include_last_sample=include_last_sample), chunks)
    np.testing.assert_allclose(sfa.d, reference(chunks, include_last_sample), rtol=1e-9)
    # The defining constraints: centred, unit variance, decorrelated outputs
    # whose derivative moments are diagonal with the delta values.
    rows = chunks if include_last_sample else [c[:-1] for c in chunks]
    y = sfa(np.concatenate(rows))
    np.testing.assert_allclose(y.mean(axis=0), 0, atol=1e-10)
    np.testing.assert_allclose(np.cov(y, rowvar=False), np.eye(5), atol=1e-9)
    dy = np.concatenate([np.diff(sfa(c), axis=0) for c in chunks])
    np.testing.assert_allclose(dy.T @ dy / len(dy), np.diag(sfa.d), atol=1e-9)


def test_chunk_boundaries_are_not_bridged():
    x = make_data()
    one = train_serial(SFA(), [x])
    two = train_serial(SFA(), [x[:1500], x[1500:]])
    assert not np.allclose(one.d, two.d, rtol=1e-12, atol=0)
    np.testing.assert_allclose(two.d, reference([x[:1500], x[1500:]]), rtol=1e-9)


@pytest.mark.parametrize("kwargs", [{}, {"output_dim": 2}, {"include_last_sample": False}])
def test_fork_join_equals_serial(kwargs):
    x = make_data()
    chunks = uneven_chunks(x)
    serial = train_serial(SFA(**kwargs), chunks)
    forked = train_forked(SFA(**kwargs), chunks)
    assert forked.output_dim == serial.output_dim
    for attr in ("avg", "sf", "d"):
        np.testing.assert_allclose(getattr(forked, attr), getattr(serial, attr),
                                   rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(forked(x), serial(x), rtol=RTOL, atol=1e-10)
    assert forked.v is forked.sf


def test_signs_are_deterministic():
    sfa = train_serial(SFA(), [make_data()])
    rows = np.argmax(np.abs(sfa.sf), axis=0)
    assert np.all(sfa.sf[rows, np.arange(5)] > 0)


def test_float32_input():
    x = make_data(np.float32)
    sfa = train_forked(SFA(output_dim=2), uneven_chunks(x))
    ref = train_serial(SFA(output_dim=2), uneven_chunks(x.astype(np.float64)))
    np.testing.assert_allclose(sfa.d, ref.d, rtol=1e-9)
    y = sfa(x)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, ref(x.astype(np.float64)), rtol=1e-4, atol=1e-4)


def test_plot_data_and_eta():
    node = SFA(output_dim=2)
    assert node.state()["plots"] == {}
    train_serial(node, [make_data()])
    plots = node.state()["plots"]
    assert plots["slowness"] == node.d.tolist()
    np.testing.assert_allclose(plots["eta"], np.sqrt(node.d) / (2 * np.pi))
    # The slowest feature is a sine of 3 periods over the series.
    assert node.eta_values(t=len(T))[0] == pytest.approx(3.0, rel=1e-3)


@pytest.mark.parametrize("bad", [0, -1, 0.5, "3", True])
def test_bad_output_dim(bad):
    with pytest.raises(InputError, match="SFA output_dim must be an int >= 1"):
        SFA(output_dim=bad)


def test_input_errors():
    x = make_data()
    with pytest.raises(InputError, match="output_dim 6 exceeds input dim 5"):
        SFA(output_dim=6).train(x)
    with pytest.raises(InputError, match="dtype"):
        SFA().train(np.ones((4, 2), dtype=np.int32))
    node = SFA()
    node.train(x[:100])
    with pytest.raises(InputError, match="input dim 5, got 4"):
        node.train(x[:100, :4])
    single = SFA()
    for row in x[:10]:
        single.train(row[None])
    with pytest.raises(InputError, match="one chunk of 2 or more rows"):
        single.stop_training()


def test_singular_covariance():
    x = make_data()
    node = SFA()
    node.train(np.c_[x, x[:, 0] - x[:, 1]])
    with pytest.raises(InputError, match="singular") as info:
        node.stop_training()
    assert info.value.where["node_name"] == "SFA"


def test_state_errors():
    node = SFA()
    with pytest.raises(TrainingError, match="trained before execute"):
        node(make_data())
    train_serial(node, [make_data()])
    with pytest.raises(TrainingError, match="nothing to fork"):
        node.fork()
