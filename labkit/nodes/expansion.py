"""Polynomial expansions: all monomials of the input columns up to a degree.

Expansions learn nothing; they are placed before a linear node (e.g.
``QuadraticExpansion`` then :class:`~labkit.nodes.sfa.SFA`) to make it
nonlinear.  Output columns are ordered by degree, and within a degree by the
sorted tuple of column indices (the order of
``itertools.combinations_with_replacement``); there is no constant term.

Examples
--------
>>> import numpy as np
>>> QuadraticExpansion()(np.array([[2.0, 3.0]])).tolist()
[[2.0, 3.0, 4.0, 6.0, 9.0]]
>>> expanded_dim(10, 3)
285
"""

from __future__ import annotations

from math import comb

import numpy as np

from ..errors import InputError
from ..flows.node import Node

__all__ = ["PolynomialExpansion", "QuadraticExpansion", "expanded_dim"]


def expanded_dim(input_dim: int, degree: int) -> int:
    """Number of monomials of degree 1 to ``degree`` in ``input_dim`` variables.

    Examples
    --------
    >>> expanded_dim(3, 2)
    9
    """
    return comb(input_dim + degree, degree) - 1


def _exact_count(n_vars: int, degree: int) -> int:
    """Number of monomials of exactly ``degree`` in ``n_vars`` variables."""
    return comb(n_vars + degree - 1, degree)


def _expand(x: np.ndarray, degree: int) -> np.ndarray:
    """All monomials of ``x``'s columns of degree 1..``degree``, in ``x``'s dtype."""
    n = x.shape[1]
    out = np.empty((x.shape[0], expanded_dim(n, degree)), dtype=x.dtype)
    out[:, :n] = x
    prev_stop, pos = n, n
    for k in range(2, degree + 1):
        for i in range(n):
            # The degree k-1 monomials whose lowest index is >= i are the last
            # ones of the previous block (it is in lexicographic order), so
            # each new block is a column times a suffix: no index tables.
            m = _exact_count(n - i, k - 1)
            np.multiply(
                x[:, i : i + 1], out[:, prev_stop - m : prev_stop], out=out[:, pos : pos + m]
            )
            pos += m
        prev_stop = pos
    return out


class PolynomialExpansion(Node):
    """Expand the input into all its monomials of degree 1 to ``degree``.

    Parameters
    ----------
    degree : int
        Highest degree, at least 1 (degree 1 returns a copy of the input).
    **node_kwargs
        ``input_dim``, ``dtype``, ``check_finite``, ``name``: see :class:`Node`.
        ``output_dim`` is not accepted; it follows from ``input_dim`` and
        ``degree`` (see :func:`expanded_dim`) and is set once the input dim
        is known.

    Examples
    --------
    >>> import numpy as np
    >>> node = PolynomialExpansion(3)
    >>> y = node(np.ones((4, 2), dtype=np.float32))
    >>> y.shape, y.dtype.name, node.output_dim
    ((4, 9), 'float32', 9)
    """

    holds_gil = False  # numpy/BLAS (torch) work: runs on threads

    def __init__(self, degree, **node_kwargs):
        super().__init__(**node_kwargs)
        if (
            isinstance(degree, (bool, np.bool_))
            or not isinstance(degree, (int, np.integer))
            or degree < 1
        ):
            raise InputError(
                f"{self.name} degree must be an int >= 1, got {degree!r}", node_name=self.name
            )
        self.degree = int(degree)
        if node_kwargs.get("output_dim") is not None:
            raise InputError(
                f"{self.name} output_dim follows from input_dim and degree; do not give it",
                node_name=self.name,
            )
        self._set_output_dim()

    def _set_output_dim(self):
        if self._input_dim is not None:
            self._output_dim = expanded_dim(self._input_dim, self.degree)

    def _execute(self, x):
        self._set_output_dim()
        return _expand(x, self.degree)

    def __repr__(self):
        return f"{type(self).__name__}(degree={self.degree}, input_dim={self._input_dim})"


class QuadraticExpansion(PolynomialExpansion):
    """Expand the input into its columns and all their pairwise products.

    Parameters
    ----------
    **node_kwargs
        As for :class:`PolynomialExpansion`.

    Examples
    --------
    >>> import numpy as np
    >>> node = QuadraticExpansion(input_dim=3)
    >>> node.output_dim
    9
    >>> node(np.arange(3.0)[None]).tolist()
    [[0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 1.0, 2.0, 4.0]]
    """

    def __init__(self, **node_kwargs):
        super().__init__(2, **node_kwargs)

    def __repr__(self):
        return f"{type(self).__name__}(input_dim={self._input_dim})"
