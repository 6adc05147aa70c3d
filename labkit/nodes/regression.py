"""Linear least-squares regression from accumulated normal equations.

Training only sums ``X'X`` and ``X'y`` over chunks, so forks join exactly by
addition and a parallel fit equals a serial one up to rounding.

Examples
--------
>>> import numpy as np
>>> x = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [2.0, 3.0]])
>>> node = LinearRegression()
>>> node.train(x, x @ [1.0, 2.0] + 3.0)
>>> node.stop_training()
>>> np.round(node.execute(x[:2]).ravel(), 6).tolist()
[5.0, 4.0]
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..flows.checks import real_number, require_finite
from ..flows.node import Node

__all__ = ["LinearRegression"]


def as_targets(node: Node, x: np.ndarray, y) -> np.ndarray:
    """Check regression targets against the chunk ``x``; return them 2-D float64.

    A 1-D ``y`` is one target column.  Used by the regression nodes.
    """
    y = np.asarray(y)
    if y.ndim == 1:
        y = y[:, None]
    if y.ndim != 2:
        raise InputError(
            f"{node.name} expects 1-D or 2-D targets, got shape {y.shape}", node_name=node.name
        )
    if y.shape[0] != x.shape[0]:
        raise InputError(
            f"{node.name} got {x.shape[0]} samples but {y.shape[0]} targets", node_name=node.name
        )
    if node.output_dim is not None and y.shape[1] != node.output_dim:
        raise InputError(
            f"{node.name} expects {node.output_dim} target columns, got {y.shape[1]}",
            node_name=node.name,
        )
    try:
        return y.astype(np.float64, copy=False)
    except (ValueError, TypeError) as exc:  # strings, objects: not numbers
        raise InputError(
            f"{node.name} needs numeric targets, got dtype {y.dtype} ({exc})", node_name=node.name
        ) from None


def add_bias(x: np.ndarray) -> np.ndarray:
    """``x`` in float64 with a leading column of ones."""
    out = np.empty((x.shape[0], x.shape[1] + 1))
    out[:, 0] = 1.0
    out[:, 1:] = x
    return out


class LinearRegression(Node):
    """Ordinary (optionally ridge) least squares: ``y ~ [1, x] @ beta``.

    Statistics are accumulated in float64 whatever the input dtype; outputs
    are cast back to the input dtype.

    Parameters
    ----------
    with_bias : bool
        Fit an intercept (the first row of ``beta``).
    reg : float
        Ridge penalty added to the diagonal of ``X'X``; the intercept is not
        penalised.  Without it, a rank-deficient design gets the
        minimum-norm solution.
    **kw
        Passed to :class:`~labkit.flows.node.Node`.

    Attributes
    ----------
    beta : numpy.ndarray or None
        Coefficients, shape ``(with_bias + input_dim, output_dim)``; ``None``
        until trained.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(50, 3))
    >>> node = LinearRegression(with_bias=False)
    >>> for rows in np.array_split(np.arange(50), 3):
    ...     node.train(x[rows], x[rows] @ [1.0, -2.0, 0.5])
    >>> node.stop_training()
    >>> np.round(node.beta.ravel(), 8).tolist()
    [1.0, -2.0, 0.5]
    """

    holds_gil = False  # numpy/BLAS (torch) work: runs on threads

    def __init__(self, with_bias=True, reg=0.0, **kw):
        super().__init__(**kw)
        self.with_bias = bool(with_bias)
        self.reg = real_number(self, reg, "reg")
        self.beta = None
        self._xtx = None
        self._xty = None

    def _design(self, x: np.ndarray) -> np.ndarray:
        return add_bias(x) if self.with_bias else x.astype(np.float64, copy=False)

    def _train(self, x, y=None):
        if y is None:
            raise InputError(f"{self.name} needs targets: train(x, y)", node_name=self.name)
        y = as_targets(self, x, y)
        self._output_dim = y.shape[1]
        a = self._design(x)
        xtx, xty = a.T @ a, a.T @ y
        require_finite(self, np.diagonal(xtx), "its input")
        require_finite(self, xty, "its input or targets")
        # New arrays instead of += so a fork never shares buffers with its parent.
        self._xtx = xtx if self._xtx is None else self._xtx + xtx
        self._xty = xty if self._xty is None else self._xty + xty

    def _stop_training(self):
        assert self._xtx is not None and self._xty is not None  # a phase with samples: sums
        xtx = self._xtx.copy()
        diag = np.arange(int(self.with_bias), xtx.shape[0])
        xtx[diag, diag] += self.reg
        # lstsq rather than solve: a rank-deficient design (a constant or
        # duplicated column) gets the minimum-norm solution instead of garbage.
        self.beta = np.linalg.lstsq(xtx, self._xty, rcond=None)[0]

    def _execute(self, x):
        return (self._design(x) @ self.beta).astype(self.dtype, copy=False)

    def _fork(self):
        return LinearRegression(with_bias=self.with_bias, reg=self.reg, output_dim=self._output_dim)

    def _partial(self):
        return {"xtx": self._xtx, "xty": self._xty, "output_dim": self._output_dim}

    def _join(self, partial):
        xtx, xty = partial["xtx"], partial["xty"]
        if xtx is None:
            return
        if self._xtx is None:
            self._xtx, self._xty = xtx, xty
            self._output_dim = partial["output_dim"]
            return
        assert self._xty is not None  # set with self._xtx
        if xty.shape != self._xty.shape:
            raise InputError(
                f"{self.name} expects {self._xty.shape[1]} target columns, "
                f"a fork had {xty.shape[1]}",
                node_name=self.name,
            )
        self._xtx = self._xtx + xtx
        self._xty = self._xty + xty

    def _plot_data(self):
        if self.beta is None:
            return {}
        return {"coefficient_norm": np.linalg.norm(self.beta, axis=0)}
