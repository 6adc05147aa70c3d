"""Fisher discriminant analysis (FDA) in two exact, forkable training phases.

Phase 0 sums per-class counts and sums, giving the class means and the total
mean.  Phase 1 sums the scatter of the samples around their class mean
(within-class) and around the total mean (total); both are centred with the
phase-0 means, which is more accurate than raw second moments.  Forks in
phase 1 carry those means.

The projection maximises between-class over total variance.  It is found by
whitening the total covariance (dropping directions without variance, such
as constant pixels) and diagonalising the within-class covariance there, so a
singular within-class scatter needs no regularisation.

Examples
--------
>>> import numpy as np
>>> x = np.array([[0.0, 0.0], [0.0, 1.0], [2.0, 0.0], [2.0, 1.0]])
>>> node = FDA()
>>> while node.is_training():
...     node.train(x, [0, 0, 1, 1]); node.stop_training()
>>> node.execute(x).ravel().tolist()
[-1.0, -1.0, 1.0, 1.0]
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..flows.checks import require_finite
from ..flows.node import Node
from .classifier import check_labels, class_sums, merge_sums, sorted_classes
from .pca import check_output_fits, parse_output_dim

__all__ = ["FDA"]

#: Total-covariance eigenvalues below this fraction of the largest are dropped.
RANK_TOL = 1e-10


def flip_signs(vectors: np.ndarray) -> np.ndarray:
    """Make the largest-magnitude entry of each column positive (deterministic signs)."""
    rows = np.argmax(np.abs(vectors), axis=0)
    signs = np.sign(vectors[rows, np.arange(vectors.shape[1])])
    return vectors * np.where(signs == 0, 1.0, signs)


def symmetric(a: np.ndarray) -> np.ndarray:
    return 0.5 * (a + a.T)


def fisher_directions(total: np.ndarray, within: np.ndarray):
    """Directions sorted by between/total variance ratio, and those ratios.

    Columns ``v`` satisfy ``v' total v = 1``; ``ratio = 1 - v' within v``.
    Features without variance get exactly zero weight.
    """
    var = np.diag(total)
    active = np.flatnonzero(var > RANK_TOL * max(var.max(), 0.0))
    # Work on the correlation matrix: better conditioned, and constant
    # features (blank pixels) drop out exactly instead of as rounding noise.
    scale = 1.0 / np.sqrt(var[active])
    corr = symmetric(total[np.ix_(active, active)] * np.outer(scale, scale))
    t_vals, t_vecs = np.linalg.eigh(corr)
    keep = t_vals > RANK_TOL * t_vals[-1]
    whiten = t_vecs[:, keep] / np.sqrt(t_vals[keep]) * scale[:, None]
    # eigh reads one triangle; symmetrising keeps serial and parallel equal.
    sub_within = within[np.ix_(active, active)]
    w_vals, w_vecs = np.linalg.eigh(symmetric(whiten.T @ sub_within @ whiten))
    # Ascending within-class variance = descending Fisher ratio.
    vectors = np.zeros((total.shape[0], w_vals.shape[0]))
    vectors[active] = whiten @ w_vecs
    return flip_signs(vectors), 1.0 - w_vals


class FDA(Node):
    """Fisher discriminant analysis: project onto the most class-separating axes.

    Projected data has unit total variance per component and zero mean.
    Trained with ``train(x, labels)`` in two phases (``n_phases() == 2``).

    Parameters
    ----------
    output_dim : int, optional
        Number of components; by default ``min(n_classes - 1, rank)``, the
        directions that actually separate classes.  Components beyond
        ``n_classes - 1`` have no between-class variance and are not unique.
    **kw
        Passed to :class:`~labkit.flows.node.Node`.

    Attributes
    ----------
    classes : numpy.ndarray
        Sorted class labels (after phase 0).
    class_means : dict
        Mean of each class (after phase 0).
    mean : numpy.ndarray
        Total mean (after phase 0).
    v : numpy.ndarray
        Projection matrix ``(input_dim, output_dim)`` (after training).
    ratios : numpy.ndarray
        Between-class fraction of the variance along each kept direction.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> labels = np.repeat([0, 1, 2], 30)
    >>> x = rng.normal(size=(90, 4)) + 3 * np.eye(4)[labels]
    >>> node = FDA()
    >>> while node.is_training():
    ...     node.train(x, labels); node.stop_training()
    >>> node.execute(x).shape, bool(node.ratios[0] > 0.5)
    ((90, 2), True)
    """

    holds_gil = False  # numpy/BLAS (torch) work: runs on threads

    def __init__(self, output_dim=None, **kw):
        super().__init__(**kw)
        self._output_dim, _ = parse_output_dim(self, output_dim, fraction_ok=False)
        self._requested_dim = self._output_dim
        self._sums: dict = {}
        self._within = self._total = None
        self.classes = self.mean = self.v = self.ratios = None
        self.class_means: dict = {}

    def n_phases(self):
        return 2

    def _train(self, x, labels=None):
        check_output_fits(self, self._requested_dim)
        labels = check_labels(self, x, labels)
        if self.phase == 0:
            sums = class_sums(x, labels, second_moment=False)
            require_finite(self, [stats[1].sum() for stats in sums.values()])
            self._sums = merge_sums(self._sums, sums)
        else:
            self._train_scatter(x.astype(np.float64, copy=False), labels)

    def _train_scatter(self, x, labels):
        unknown = set(np.unique(labels).tolist()) - set(self.class_means)
        if unknown:
            raise InputError(
                f"{self.name} got labels {sorted(unknown)} in phase 1 that phase 0 did not see",
                node_name=self.name,
                phase=1,
            )
        centred = x - self.mean
        # Subtract each row's class mean, gathered through the sorted class index.
        assert self.classes is not None  # phase 0 found them
        class_rows = np.searchsorted(self.classes, labels)
        means = np.array([self.class_means[c] for c in self.classes.tolist()])
        within = x - means[class_rows]
        total, within = centred.T @ centred, within.T @ within
        require_finite(self, np.diagonal(total))
        self._total = total if self._total is None else self._total + total
        self._within = within if self._within is None else self._within + within

    def _stop_training(self):
        if self.phase == 0:
            self._finish_means()
        else:
            self._finish_projection()

    def _finish_means(self):
        self.classes = sorted_classes(self, self._sums)
        if len(self.classes) < 2:
            raise InputError(
                f"{self.name} needs at least two classes, got {self.classes.tolist()}",
                node_name=self.name,
                phase=0,
            )
        counts = sum(stats[0] for stats in self._sums.values())
        self.mean = sum(stats[1] for stats in self._sums.values()) / counts
        self.class_means = {c: s[1] / s[0] for c, s in self._sums.items()}

    def _finish_projection(self):
        n = self.samples_seen
        assert self._total is not None and self._within is not None and self.classes is not None
        vectors, ratios = fisher_directions(self._total / n, self._within / n)
        dim = self._requested_dim
        if dim is None:
            dim = min(len(self.classes) - 1, vectors.shape[1])
        if not 0 < dim <= vectors.shape[1]:
            raise InputError(
                f"{self.name} can give 1 to {vectors.shape[1]} components, {dim} were asked for",
                node_name=self.name,
                phase=1,
            )
        self.v, self.ratios = vectors[:, :dim], ratios[:dim]
        self._output_dim = dim

    def _execute(self, x):
        return ((x - self.mean) @ self.v).astype(self.dtype, copy=False)

    def _fork(self):
        forked = FDA(output_dim=self._requested_dim)
        # Phase 1 centres every chunk with the phase-0 means; the sums stay
        # here so that a join never counts them twice.
        forked.classes, forked.mean = self.classes, self.mean
        forked.class_means = self.class_means
        return forked

    def _partial(self):
        if self.phase == 0:
            return {"_sums": self._sums}
        return {"_total": self._total, "_within": self._within}

    def _join(self, partial):
        if self.phase == 0:
            self._sums = merge_sums(self._sums, partial["_sums"])
            return
        for attr in ("_total", "_within"):
            mine, theirs = getattr(self, attr), partial[attr]
            if theirs is not None:
                setattr(self, attr, theirs if mine is None else mine + theirs)

    def _plot_data(self):
        if self.ratios is None:
            return {}
        return {"ratios": self.ratios}
