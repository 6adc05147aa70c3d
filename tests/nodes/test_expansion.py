"""Polynomial expansions against explicit monomials."""

from itertools import combinations_with_replacement
from math import prod

import numpy as np
import pytest

from labkit.errors import InputError, TrainingError
from labkit.nodes.expansion import PolynomialExpansion, QuadraticExpansion, expanded_dim


def explicit(x, degree):
    cols = [prod((x[:, i] for i in idx), start=np.ones(len(x), dtype=x.dtype))
            for k in range(1, degree + 1)
            for idx in combinations_with_replacement(range(x.shape[1]), k)]
    return np.stack(cols, axis=1)


@pytest.mark.parametrize("dim,degree", [(1, 1), (1, 4), (3, 1), (3, 2), (4, 3), (5, 4), (2, 6)])
def test_matches_explicit_monomials(dim, degree):
    x = np.random.default_rng(dim * 10 + degree).normal(size=(13, dim))
    node = PolynomialExpansion(degree)
    y = node(x)
    np.testing.assert_allclose(y, explicit(x, degree), rtol=1e-13)
    assert y.shape[1] == expanded_dim(dim, degree) == node.output_dim


def test_expanded_dim_counts():
    for dim in range(1, 6):
        for degree in range(1, 5):
            count = sum(1 for k in range(1, degree + 1)
                        for _ in combinations_with_replacement(range(dim), k))
            assert expanded_dim(dim, degree) == count


def test_quadratic_is_degree_two():
    x = np.random.default_rng(0).normal(size=(7, 4))
    node = QuadraticExpansion()
    assert node.degree == 2 and node.output_dim is None
    np.testing.assert_array_equal(node(x), PolynomialExpansion(2)(x))
    assert node.output_dim == 14


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_preserved(dtype):
    x = np.random.default_rng(1).normal(size=(5, 3)).astype(dtype)
    y = PolynomialExpansion(3)(x)
    assert y.dtype == dtype
    np.testing.assert_allclose(y, explicit(x.astype(np.float64), 3), rtol=1e-5)


def test_untrainable():
    node = QuadraticExpansion(input_dim=3)
    assert node.output_dim == 9
    assert not node.is_trainable() and not node.is_training() and node.n_phases() == 0
    with pytest.raises(TrainingError, match="not trainable"):
        node.train(np.ones((2, 3)))
    with pytest.raises(TrainingError, match="nothing to fork"):
        node.fork()


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, None])
def test_bad_degree(bad):
    with pytest.raises(InputError, match="PolynomialExpansion degree must be an int >= 1"):
        PolynomialExpansion(bad)


def test_input_errors():
    node = QuadraticExpansion(name="quad")
    with pytest.raises(InputError, match="quad output_dim follows"):
        QuadraticExpansion(output_dim=5, name="quad")
    with pytest.raises(InputError, match="dtype"):
        node(np.ones((2, 2), dtype=np.int64))
    node(np.ones((2, 2)))
    with pytest.raises(InputError, match="input dim 2, got 3") as info:
        node(np.ones((2, 3)))
    assert info.value.where["node_name"] == "quad"
