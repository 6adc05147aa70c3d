"""Slow feature analysis (SFA).

SFA finds the linear projections of a multivariate time series that vary
most slowly: outputs with zero mean and unit variance, mutually
uncorrelated, ordered by the mean square of their time derivative.  The
node accumulates moments of the input and of its time derivative
(consecutive-row differences), so forks join exactly.  Differences are taken
within each chunk only: the boundary between two chunks is never bridged,
as in the classic MDP implementation, which keeps chunks independent.

Examples
--------
>>> import numpy as np
>>> t = np.linspace(0, 4 * np.pi, 2000)
>>> x = np.c_[np.sin(t) + np.sin(40 * t), np.sin(40 * t)]
>>> sfa = SFA(output_dim=1)
>>> sfa.train(x); sfa.stop_training()
>>> bool(abs(np.corrcoef(sfa(x)[:, 0], np.sin(t))[0, 1]) > 0.999)
True
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError, not_fitted
from ..flows.checks import require_finite
from ..flows.node import Node
from .pca import _Moments, check_output_fits, fix_signs, parse_output_dim

__all__ = ["SFA"]


class SFA(Node):
    """Slow feature analysis: the slowest uncorrelated unit-variance projections.

    Parameters
    ----------
    output_dim : int, optional
        Number of slow features to keep; all by default.
    include_last_sample : bool
        Whether the last row of each chunk enters the input covariance.  With
        ``False`` the input covariance sees exactly the rows that start a
        difference, as in MDP's option of the same name.
    **kw
        ``input_dim``, ``dtype``, ``check_finite``, ``name``: see :class:`Node`.

    Attributes
    ----------
    avg : ndarray
        Mean of the training data.
    sf : ndarray
        Projection matrix, one column per slow feature, slowest first
        (``v`` is an alias, as in :class:`~labkit.nodes.pca.PCA`).
    d : ndarray
        Delta values: mean squared time derivative of each output, ascending.

    Notes
    -----
    The generalized eigenproblem ``dcov @ w = d * cov @ w`` is solved with
    numpy only: whiten with the eigendecomposition of the input covariance,
    then take ``eigh`` of the whitened derivative moment matrix.  A singular
    input covariance raises InputError; reduce the input first (e.g.
    ``PCA(reduce=True)``).  Signs are fixed so that the largest-magnitude entry
    of each column of ``sf`` is positive.

    Examples
    --------
    >>> import numpy as np
    >>> t = np.linspace(0, 2 * np.pi, 500)
    >>> x = np.c_[np.cos(t), np.cos(30 * t), np.sin(7 * t)]
    >>> sfa = SFA(output_dim=2)
    >>> sfa.train(x[:250]); sfa.train(x[250:]); sfa.stop_training()
    >>> sfa(x).shape
    (500, 2)
    >>> bool(sfa.d[0] < sfa.d[1])
    True
    """

    holds_gil = False  # numpy/BLAS (torch) work: runs on threads

    #: An input covariance eigenvalue below this times the largest counts as zero.
    singular_rel = 1e-12

    def __init__(self, output_dim=None, include_last_sample=True, **kw):
        super().__init__(**kw)
        self.include_last_sample = bool(include_last_sample)
        self._requested_output_dim = output_dim
        self._output_dim, _ = parse_output_dim(self, output_dim, fraction_ok=False)
        check_output_fits(self, self._output_dim)
        self._x, self._dx = _Moments(), _Moments()
        self.avg = self.sf = self.d = None

    @property
    def v(self):
        """Alias of ``sf``: the projection matrix applied to centred input."""
        return self.sf

    def eta_values(self, t=1.0) -> np.ndarray:
        """Eta values: how many oscillations a sine as slow would make in time ``t``.

        ``t`` is the duration of the training series in samples' units; with
        the default 1 the values are ``sqrt(d) / (2 pi)`` per sample.
        """
        if self.d is None:
            raise not_fitted(f"{self.name} must be trained first", node_name=self.name)
        return t / (2 * np.pi) * np.sqrt(np.clip(self.d, 0.0, None))

    def _train(self, x):
        check_output_fits(self, self._output_dim)
        # Differences of float32 rows would lose digits; widen before diff.
        x = np.asarray(x, dtype=np.float64)
        # The whole chunk first: a bad last row would reach only the differences,
        # after the rows' own sums had already taken the chunk.
        require_finite(self, x.sum(axis=0))
        self._x.add(x if self.include_last_sample else x[:-1], self)
        self._dx.add(np.diff(x, axis=0), self)

    def _fork(self):
        return type(self)(
            output_dim=self._requested_output_dim, include_last_sample=self.include_last_sample
        )

    def _partial(self):
        return self._x, self._dx

    def _join(self, partial):
        x, dx = partial
        self._x.merge(x)
        self._dx.merge(dx)

    def _stop_training(self):
        check_output_fits(self, self._output_dim)
        self._check_counts()
        cov, avg = self._x.covariance()
        white = self._whitener(cov)
        delta, rot = np.linalg.eigh(_symmetric(white.T @ self._dx.second_moment() @ white))
        k = self._output_dim or self.input_dim
        self.avg, self.sf, self.d = avg, fix_signs(white @ rot[:, :k]), delta[:k]
        self._output_dim = k
        self._x, self._dx = _Moments(), _Moments()

    def _check_counts(self):
        if self._x.n < 2 or self._dx.n < 1:
            raise InputError(
                f"{self.name} needs at least 2 samples and one chunk of 2 or "
                f"more rows, got {self._x.n} samples and {self._dx.n} "
                "differences",
                node_name=self.name,
                phase=self.phase,
            )

    def _whitener(self, cov: np.ndarray) -> np.ndarray:
        """Matrix ``W`` with ``W.T @ cov @ W = I``; InputError if ``cov`` is singular."""
        s, u = np.linalg.eigh(cov)
        if s[0] <= self.singular_rel * max(s[-1], 0.0):
            raise InputError(
                f"{self.name} input covariance is singular (smallest "
                f"eigenvalue {s[0]:.3g}, largest {s[-1]:.3g}); reduce the "
                "input first, e.g. with PCA(reduce=True)",
                node_name=self.name,
                phase=self.phase,
            )
        # The basis chosen by eigh here does not matter: the slow directions
        # are invariant to it, and their signs are fixed afterwards.
        return u / np.sqrt(s)

    def _execute(self, x):
        return ((x - self.avg) @ self.sf).astype(x.dtype, copy=False)

    def _plot_data(self):
        if self._training:
            return {}
        return {"slowness": self.d, "eta": self.eta_values()}


def _symmetric(m: np.ndarray) -> np.ndarray:
    """Average ``m`` with its transpose; eigh reads one triangle only."""
    return (m + m.T) / 2
