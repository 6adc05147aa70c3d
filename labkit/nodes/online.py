"""Online nodes: learn by sequential updates, so they cannot fork.

Each update depends on the weights left by the previous row, so the result
depends on the order of the rows; statistics of separate chunks cannot be
joined.  These nodes keep the default ``_fork``, which raises
:class:`~labkit.errors.NotForkableError`, and a parallel flow trains them
locally, chunk after chunk.

Examples
--------
>>> import numpy as np
>>> from labkit.errors import NotForkableError
>>> try:
...     OnlineLinearRegression().fork()
... except NotForkableError:
...     print("trains locally")
trains locally
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..flows.checks import positive_int, real_number, require_finite
from ..flows.node import Node
from .regression import add_bias, as_targets

__all__ = ["OnlineLinearRegression"]


class OnlineLinearRegression(Node):
    """Linear regression by normalised least-mean-squares (NLMS) steps.

    For every row ``a`` (with a leading 1 when ``with_bias``) and target ``t``
    the weights move by ``learning_rate * a' (t - a w) / (eps + |a|^2)``.
    Normalising by ``|a|^2`` keeps the step stable for any input scale when
    ``0 < learning_rate < 2``.  Each of the ``epochs`` training phases is one
    pass over the data.

    Parameters
    ----------
    learning_rate : float
        Step size, in ``(0, 2)``.
    with_bias : bool
        Fit an intercept (the first row of ``beta``).
    epochs : int
        Number of passes (training phases).
    **kw
        Passed to :class:`~labkit.flows.node.Node`.

    Attributes
    ----------
    beta : numpy.ndarray or None
        Weights ``(with_bias + input_dim, output_dim)``; ``None`` before the
        first chunk.
    errors : list of float
        Mean squared error of the predictions made before each update, per
        epoch (a prequential learning curve).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(200, 2))
    >>> node = OnlineLinearRegression(epochs=3)
    >>> while node.is_training():
    ...     node.train(x, x @ [2.0, -1.0] + 0.5); node.stop_training()
    >>> np.round(node.beta.ravel(), 4).tolist()
    [0.5, 2.0, -1.0]
    """

    holds_gil = False  # numpy/BLAS (torch) work: runs on threads

    eps = 1e-12

    def __init__(self, learning_rate=0.5, with_bias=True, epochs=1, **kw):
        super().__init__(**kw)
        self.learning_rate = real_number(
            self, learning_rate, "learning_rate", 0.0, 2.0, open_low=True, open_high=True
        )
        self.with_bias = bool(with_bias)
        self.epochs = positive_int(self, epochs, "epochs")
        self.beta = None
        self.errors: list[float] = []
        self._sq_error = 0.0

    def n_phases(self):
        return self.epochs

    def _train(self, x, y=None):
        if y is None:
            raise InputError(f"{self.name} needs targets: train(x, y)", node_name=self.name)
        y = as_targets(self, x, y)
        a = add_bias(x) if self.with_bias else x.astype(np.float64)
        if self.beta is None:
            self._output_dim = y.shape[1]
            self.beta = np.zeros((a.shape[1], y.shape[1]))
        self._sq_error += self._sgd(a, y)

    def _sgd(self, a, y) -> float:
        """Update ``beta`` row by row; return the summed squared prediction error."""
        beta, rate, sq_error = self.beta, self.learning_rate, 0.0
        norms = np.einsum("ij,ij->i", a, a) + self.eps
        # Checked before the first update: beta changes in place, row by row.
        require_finite(self, norms, "its input")
        require_finite(self, y, "its targets")
        for row, target, norm in zip(a, y, norms, strict=True):
            error = target - row @ beta
            sq_error += float(error @ error)
            # Sequential on purpose: each step sees the weights of the last.
            beta += np.outer(row, error * (rate / norm))
        return sq_error

    def _stop_training(self):
        self.errors = self.errors + [self._sq_error / self.samples_seen]
        self._sq_error = 0.0

    def _execute(self, x):
        a = add_bias(x) if self.with_bias else x.astype(np.float64)
        return (a @ self.beta).astype(self.dtype, copy=False)

    def _plot_data(self):
        return {"errors": self.errors}
