"""Gaussian (quadratic discriminant) classifier with per-class statistics.

Training sums, per class, the sample count, ``x`` and ``x'x``; forks join by
adding these, so parallel training is exact.  The node passes data through in
``execute``; labels and probabilities come from :meth:`GaussianClassifier.label`
and :meth:`GaussianClassifier.prob`.

Examples
--------
>>> import numpy as np
>>> x = np.array([[0.0, 0.1], [0.2, 0.0], [5.0, 5.1], [5.2, 4.9]])
>>> node = GaussianClassifier(reg=0.1)
>>> node.train(x, ["a", "a", "b", "b"])
>>> node.stop_training()
>>> node.label(np.array([[0.1, 0.0], [4.8, 5.0]])).tolist()
['a', 'b']
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError, not_fitted
from ..flows.checks import real_number, require_finite
from ..flows.node import Node

__all__ = ["GaussianClassifier"]


def check_labels(node: Node, x: np.ndarray, labels) -> np.ndarray:
    """Labels as a 1-D array with one entry per row of ``x``, else ``InputError``."""
    if labels is None:
        raise InputError(f"{node.name} needs labels: train(x, labels)", node_name=node.name)
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.shape[0] != x.shape[0]:
        raise InputError(
            f"{node.name} needs one label per sample: {x.shape[0]} samples, "
            f"labels of shape {labels.shape}",
            node_name=node.name,
        )
    return labels


def class_sums(x: np.ndarray, labels: np.ndarray, second_moment: bool) -> dict:
    """Per-class ``[count, sum of x, sum of x'x]`` of one chunk, in float64."""
    x = x.astype(np.float64, copy=False)
    classes, inverse = np.unique(labels, return_inverse=True)
    out = {}
    for index, cls in enumerate(classes.tolist()):
        rows = x[inverse == index]
        out[cls] = [rows.shape[0], rows.sum(axis=0), rows.T @ rows if second_moment else None]
    return out


def sorted_classes(node: Node, sums: dict) -> np.ndarray:
    """The class labels of ``sums``, sorted; ``InputError`` if they do not compare."""
    try:
        return np.array(sorted(sums))
    except TypeError:
        raise InputError(
            f"{node.name} got labels of mixed types that cannot be sorted: "
            f"{sorted(map(repr, sums))[:5]}",
            node_name=node.name,
        ) from None


def merge_sums(mine: dict, theirs: dict) -> dict:
    """Add per-class sums of ``theirs`` to ``mine``; return a new dict (no aliasing)."""
    out = dict(mine)
    for cls, stats in theirs.items():
        if cls in out:
            out[cls] = [a if b is None else a + b for a, b in zip(out[cls], stats, strict=True)]
        else:
            out[cls] = list(stats)
    return out


def logsumexp_rows(a: np.ndarray) -> np.ndarray:
    """``log(sum(exp(a), axis=1))`` without overflow."""
    top = a.max(axis=1, keepdims=True)
    return (top + np.log(np.exp(a - top).sum(axis=1, keepdims=True)))[:, 0]


class GaussianClassifier(Node):
    """One Gaussian per class; predicts the class with the highest posterior.

    Covariances are regularised by adding ``reg`` times the mean of their
    diagonal to the diagonal, so they stay invertible when a class has fewer
    samples than dimensions.

    Parameters
    ----------
    reg : float
        Relative ridge added to each class covariance.
    **kw
        Passed to :class:`~labkit.flows.node.Node`.

    Attributes
    ----------
    classes : numpy.ndarray
        Sorted class labels (after training).
    means, covs, priors : numpy.ndarray
        Per-class means ``(k, d)``, regularised covariances ``(k, d, d)`` and
        prior probabilities ``(k,)``, in the order of ``classes``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = np.vstack([rng.normal(0, 1, (40, 2)), rng.normal(4, 1, (40, 2))])
    >>> node = GaussianClassifier()
    >>> fork = node.fork(); fork.train(x, [0] * 40 + [1] * 40); node.join(fork)
    >>> node.stop_training()
    >>> node.classes.tolist(), round(float(node.prob(x[:1]).sum()), 12)
    ([0, 1], 1.0)
    """

    holds_gil = False  # numpy/BLAS (torch) work: runs on threads

    def __init__(self, reg=1e-6, **kw):
        super().__init__(**kw)
        self.reg = real_number(self, reg, "reg")
        self._sums: dict = {}
        self.classes = None
        self.means = self.covs = self.priors = None
        self._whiten = self._log_norm = None

    def _train(self, x, labels=None):
        labels = check_labels(self, x, labels)
        sums = class_sums(x, labels, second_moment=True)
        require_finite(self, [stats[1].sum() for stats in sums.values()])
        self._sums = merge_sums(self._sums, sums)

    def _stop_training(self):
        self.classes = sorted_classes(self, self._sums)
        counts = np.array([self._sums[c][0] for c in self.classes.tolist()], dtype=float)
        self.priors = counts / counts.sum()
        self.means = np.array([self._sums[c][1] / self._sums[c][0] for c in self.classes.tolist()])
        self.covs = np.array([self._covariance(c) for c in self.classes.tolist()])
        # Precompute inverse Cholesky factors so prob() is a few matrix products.
        chol = np.linalg.cholesky(self.covs)
        self._whiten = np.linalg.inv(chol)
        log_det = 2.0 * np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
        d = self.means.shape[1]
        self._log_norm = np.log(self.priors) - 0.5 * (log_det + d * np.log(2 * np.pi))

    def _covariance(self, cls) -> np.ndarray:
        n, total, outer = self._sums[cls]
        mean = total / n
        cov = (outer - n * np.outer(mean, mean)) / max(n - 1, 1)
        cov = 0.5 * (cov + cov.T)
        scale = np.mean(np.diag(cov))
        # A single-sample or constant class has a zero covariance: use unit scale.
        ridge = self.reg * (scale if scale > 0 else 1.0)
        if ridge == 0:
            ridge = np.finfo(float).eps
        return cov + ridge * np.eye(cov.shape[0])

    def _log_joint(self, x: np.ndarray) -> np.ndarray:
        """``log p(x, class)`` for every row and class, shape ``(n, k)``."""
        if self.is_training():
            raise not_fitted(
                f"{self.name} must be trained before label or prob", node_name=self.name
            )
        x = self._check_input(x).astype(np.float64, copy=False)
        assert self.classes is not None and self.means is not None  # trained
        assert self._whiten is not None and self._log_norm is not None
        out = np.empty((x.shape[0], len(self.classes)))
        for k in range(len(self.classes)):
            z = (x - self.means[k]) @ self._whiten[k].T
            out[:, k] = self._log_norm[k] - 0.5 * np.einsum("ij,ij->i", z, z)
        return out

    def log_prob(self, x) -> np.ndarray:
        """Log posterior class probabilities, shape ``(n, n_classes)``."""
        joint = self._log_joint(x)
        return joint - logsumexp_rows(joint)[:, None]

    def prob(self, x) -> np.ndarray:
        """Posterior class probabilities, shape ``(n, n_classes)``; rows sum to 1."""
        return np.exp(self.log_prob(x))

    def label(self, x) -> np.ndarray:
        """The most probable class of each row."""
        joint = self._log_joint(x)
        assert self.classes is not None  # trained: _log_joint checked
        return self.classes[np.argmax(joint, axis=1)]

    def _execute(self, x):
        return x

    def _fork(self):
        return GaussianClassifier(reg=self.reg)

    def _partial(self):
        return self._sums

    def _join(self, partial):
        self._sums = merge_sums(self._sums, partial)

    def _plot_data(self):
        try:
            classes = sorted_classes(self, self._sums)
        except InputError:
            return {}
        return {"class_counts": [self._sums[c][0] for c in classes.tolist()]}
