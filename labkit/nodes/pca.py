"""Principal component analysis and whitening.

Both nodes accumulate the first and second moments of their input (sum of
``x`` and of ``x.T @ x`` in float64, plus the sample count).  Sums are
commutative, so forks trained on separate chunks join exactly and parallel
training gives the serial result up to rounding.  The covariance and its
eigendecomposition are computed once, in ``stop_training``.

Examples
--------
>>> import numpy as np
>>> x = np.random.default_rng(0).normal(size=(200, 3)) * [5.0, 1.0, 0.1]
>>> pca = PCA(output_dim=0.9)
>>> pca.train(x); pca.stop_training()
>>> pca.output_dim
1
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..flows.checks import require_finite
from ..flows.node import Node

__all__ = ["PCA", "Whitening"]

#: Number of eigenvalues shown in views; a spectrum longer than this is unreadable.
PLOT_EIGENVALUES = 50


class _Moments:
    """Running float64 sums of ``x`` and ``x.T @ x`` and the sample count."""

    def __init__(self) -> None:
        self.sum: np.ndarray | None = None
        self.outer: np.ndarray | None = None
        self.n = 0

    def sums(self) -> tuple[np.ndarray, np.ndarray]:
        """``(sum, outer)``; a ValueError before the first chunk."""
        if self.sum is None or self.outer is None:
            raise ValueError("no samples added yet")
        return self.sum, self.outer

    def add(self, x: np.ndarray, node: Node) -> None:
        """Add one chunk; ``node`` names it when the chunk is not finite."""
        # float32 chunks are widened first: the sums over many chunks would
        # otherwise lose most of their digits.
        x = np.asarray(x, dtype=np.float64)
        total = x.sum(axis=0)
        require_finite(node, total)
        if self.sum is None or self.outer is None:
            self.sum = np.zeros(x.shape[1])
            self.outer = np.zeros((x.shape[1], x.shape[1]))
        self.sum += total
        self.outer += x.T @ x
        self.n += x.shape[0]

    def merge(self, other: _Moments) -> None:
        if other.sum is None:
            return
        total, outer = other.sums()
        if self.sum is None or self.outer is None:
            self.sum, self.outer = total.copy(), outer.copy()
        else:
            self.sum += total
            self.outer += outer
        self.n += other.n

    def covariance(self) -> tuple[np.ndarray, np.ndarray]:
        """Unbiased covariance and mean; needs ``n >= 2``."""
        total, outer = self.sums()
        avg = total / self.n
        cov = (outer - np.outer(total, avg)) / (self.n - 1)
        # BLAS need not return a bit-symmetric x.T @ x; eigh reads one triangle
        # only, so an asymmetric matrix could make serial and parallel differ.
        return (cov + cov.T) / 2, avg

    def second_moment(self) -> np.ndarray:
        """Mean of ``x.T @ x`` per sample, not centred."""
        mom = self.sums()[1] / self.n
        return (mom + mom.T) / 2


def fix_signs(v: np.ndarray) -> np.ndarray:
    """Flip columns of ``v`` so that the largest-magnitude entry of each is positive.

    Eigenvectors are defined up to sign; fixing it makes results independent
    of the LAPACK path taken, so serial and parallel training agree.
    """
    rows = np.argmax(np.abs(v), axis=0)
    signs = np.sign(v[rows, np.arange(v.shape[1])])
    signs[signs == 0] = 1.0
    return v * signs


def parse_output_dim(node: Node, output_dim, fraction_ok: bool):
    """Split ``output_dim`` into ``(count, fraction)``; raise InputError if invalid."""
    if output_dim is None:
        return None, None
    kinds = "an int >= 1 or a float in (0, 1)" if fraction_ok else "an int >= 1"
    if isinstance(output_dim, (bool, np.bool_)):
        raise InputError(
            f"{node.name} output_dim must be {kinds}, got {output_dim!r}", node_name=node.name
        )
    if isinstance(output_dim, (int, np.integer)):
        if output_dim < 1:
            raise InputError(
                f"{node.name} output_dim must be {kinds}, got {output_dim}", node_name=node.name
            )
        return int(output_dim), None
    if fraction_ok and isinstance(output_dim, (float, np.floating)):
        if not 0.0 < output_dim < 1.0:
            raise InputError(
                f"{node.name} output_dim as a float is the fraction of "
                f"variance to keep and must lie in (0, 1), got {output_dim}",
                node_name=node.name,
            )
        return None, float(output_dim)
    raise InputError(
        f"{node.name} output_dim must be {kinds}, got {output_dim!r}", node_name=node.name
    )


def check_output_fits(node: Node, count) -> None:
    """Raise InputError when ``count`` components exceed the known input dim."""
    if count is not None and node.input_dim is not None and count > node.input_dim:
        raise InputError(
            f"{node.name} output_dim {count} exceeds input dim {node.input_dim}",
            node_name=node.name,
            phase=node.phase,
        )


def descending_eig(cov: np.ndarray, svd: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (descending) and eigenvectors (columns) of a symmetric matrix."""
    if svd:
        u, s, _ = np.linalg.svd(cov, hermitian=True)
        return s, u
    d, v = np.linalg.eigh(cov)
    return d[::-1], v[:, ::-1]


class PCA(Node):
    """Principal component analysis: project onto the directions of largest variance.

    Parameters
    ----------
    output_dim : int or float, optional
        An int keeps that many components; a float in (0, 1) keeps the fewest
        components explaining at least that fraction of the total variance;
        ``None`` keeps all.
    svd : bool
        Decompose the covariance with SVD instead of ``numpy.linalg.eigh``
        (slower, sometimes more robust for nearly singular covariances).
    reduce : bool
        Also drop components whose variance is at most ``var_abs`` or at most
        ``var_rel`` times the largest one (useful before whitening).
    **node_kwargs
        ``input_dim``, ``dtype``, ``check_finite``, ``name``: see :class:`Node`.

    Attributes
    ----------
    avg : ndarray
        Mean of the training data.
    v : ndarray
        Projection matrix, one column per component, largest variance first.
    d : ndarray
        Variances (covariance eigenvalues) of the kept components, descending.
    explained_variance : float
        Fraction of the total variance the kept components explain.

    Notes
    -----
    Eigenvector signs are fixed so that each column's largest-magnitude entry
    is positive.  The covariance uses the one-pass formula; data whose mean is
    huge compared with its spread should be centred first.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(1).normal(size=(500, 3)) * [3.0, 1.0, 0.1]
    >>> pca = PCA(output_dim=2)
    >>> pca.train(x[:200]); pca.train(x[200:]); pca.stop_training()
    >>> pca(x).shape
    (500, 2)
    >>> bool(pca.d[0] > pca.d[1] > 0.5)
    True
    """

    holds_gil = False  # numpy/BLAS (torch) work: runs on threads

    var_abs = 1e-12
    var_rel = 1e-12

    def __init__(self, output_dim=None, svd=False, reduce=False, **node_kwargs):
        super().__init__(**node_kwargs)
        self.svd, self.reduce = bool(svd), bool(reduce)
        self._requested_output_dim = output_dim
        self._output_dim, self.desired_variance = parse_output_dim(self, output_dim, True)
        check_output_fits(self, self._output_dim)
        self._moments = _Moments()
        self._plot_cache = None
        self.avg = self.v = self.d = self.explained_variance = None

    def _train(self, x):
        check_output_fits(self, self._output_dim)
        self._moments.add(x, self)

    def _fork(self):
        return type(self)(output_dim=self._requested_output_dim, svd=self.svd, reduce=self.reduce)

    def _partial(self):
        return self._moments

    def _join(self, partial):
        self._moments.merge(partial)

    def _covariance(self):
        if self._moments.n < 2:
            raise InputError(
                f"{self.name} needs at least 2 samples, got {self._moments.n}",
                node_name=self.name,
                phase=self.phase,
            )
        return self._moments.covariance()

    def _stop_training(self):
        check_output_fits(self, self._output_dim)
        cov, avg = self._covariance()
        total = float(np.trace(cov))
        if total <= 0.0:
            raise InputError(
                f"{self.name} input has zero variance", node_name=self.name, phase=self.phase
            )
        d, v = descending_eig(cov, self.svd)
        k = self._n_kept(d, total)
        d, v = d[:k], fix_signs(v[:, :k])
        # Compute everything before assigning, so a failure leaves the node
        # still training with its statistics intact.
        proj = self._projection(v, d)
        self.avg, self.v, self.d = avg, proj, d
        self.explained_variance = float(d.sum() / total)
        self._output_dim = k
        self._moments, self._plot_cache = _Moments(), None

    def _n_kept(self, d: np.ndarray, total: float) -> int:
        """How many leading components to keep."""
        if self.desired_variance is not None:
            ratio = np.cumsum(d) / total
            k = int(np.searchsorted(ratio, self.desired_variance)) + 1
        else:
            k = self._output_dim or len(d)
        if self.reduce:
            big = (d > self.var_abs) & (d > self.var_rel * d[0])
            k = min(k, int(big.sum()))
        return max(1, min(k, len(d)))

    def _projection(self, v: np.ndarray, d: np.ndarray) -> np.ndarray:
        """The matrix applied to centred input; subclasses rescale it."""
        return v

    def _execute(self, x):
        return ((x - self.avg) @ self.v).astype(x.dtype, copy=False)

    def _plot_data(self):
        if not self._training:
            assert self.d is not None  # trained
            return {"eigenvalues": self.d[:PLOT_EIGENVALUES]}
        if self._moments.n < 2:
            return {}
        # state() may be polled often while forks join; the spectrum changes
        # only when samples arrive, so keep it until the count moves.
        key = (self._phase, self._moments.n, self._joins)
        if self._plot_cache is None or self._plot_cache[0] != key:
            cov, _ = self._moments.covariance()
            spectrum = np.linalg.eigvalsh(cov)[::-1][:PLOT_EIGENVALUES]
            self._plot_cache = (key, spectrum)
        return {"eigenvalues": self._plot_cache[1]}


class Whitening(PCA):
    """PCA whose outputs have unit variance and are uncorrelated.

    Takes the same parameters as :class:`PCA`; ``v`` is the whitening matrix
    (PCA eigenvectors divided by the square roots of ``d``).  A component with
    (near) zero variance cannot be whitened: use ``reduce=True`` or a smaller
    ``output_dim`` for rank-deficient data.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(2).normal(size=(1000, 3)) @ [[2, 1, 0], [0, 1, 0], [0, 0, 3]]
    >>> white = Whitening()
    >>> white.train(x); white.stop_training()
    >>> np.allclose(np.cov(white(x), rowvar=False), np.eye(3))
    True
    """

    def _projection(self, v, d):
        if d[-1] <= self.var_abs or d[-1] <= self.var_rel * d[0]:
            raise InputError(
                f"{self.name} cannot whiten a component of variance {d[-1]:.3g}; "
                "use reduce=True or a smaller output_dim",
                node_name=self.name,
                phase=self.phase,
            )
        return v / np.sqrt(d)
