"""K-means clustering, one training phase per Lloyd iteration.

Phase 0 picks the initial centres: every row gets a pseudo-random key hashed
from its values (to 16 mantissa bits, so last-bit noise from upstream nodes
does not matter) and the seed, and the ``n_clusters`` distinct rows with the
smallest keys win.  Keeping the smallest keys is commutative, so the choice
does not depend on how the data is chunked or in which order forks join.
Each later phase is one Lloyd iteration: forks carry the current centres and
sum, per centre, the rows nearest to it; the join adds the sums.

Examples
--------
>>> import numpy as np
>>> x = np.array([[0.0, 0.0], [0.0, 1.0], [9.0, 9.0], [9.0, 8.0]])
>>> node = KMeans(2)
>>> while node.is_training():
...     node.train(x); node.stop_training()
>>> sorted(node.centers.tolist())
[[0.0, 0.5], [9.0, 8.5]]
"""

from __future__ import annotations

import numbers

import numpy as np

from ..errors import InputError, not_fitted
from ..flows.checks import positive_int, real_number, require_finite
from ..flows.node import Node

__all__ = ["KMeans"]

_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
# Keep sign, exponent and the top 16 mantissa bits: a row computed by nodes
# trained in parallel differs from the serial one in its last bits only, and
# must still get the same key (the chosen centres are the exact rows).
_KEY_BITS = np.uint64(~((1 << 36) - 1) & (2**64 - 1))


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser: a fast, well-spread integer hash (wraps on overflow)."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def row_keys(x: np.ndarray, seed: int) -> np.ndarray:
    """A uint64 key per row that depends only on the row's values and ``seed``."""
    # + 0.0 turns -0.0 into 0.0 so equal values hash equally.
    bits = (np.ascontiguousarray(x, dtype=np.float64) + 0.0).view(np.uint64) & _KEY_BITS
    keys = _mix(np.full(x.shape[0], seed % 2**64, dtype=np.uint64) ^ _GOLDEN)
    with np.errstate(over="ignore"):
        for column in bits.T:
            keys = _mix(keys ^ (column + _GOLDEN))
    return keys


def smallest_rows(keys: np.ndarray, rows: np.ndarray, k: int):
    """The ``k`` distinct rows with the smallest keys (ties broken by row values)."""
    # Equal rows share a key, so the k smallest distinct keys hold at least k
    # distinct rows; sorting only those keeps big chunks cheap.
    distinct = np.unique(keys)
    if distinct.shape[0] > k:
        near = keys <= distinct[k - 1]
        keys, rows = keys[near], rows[near]
    order = np.lexsort(tuple(rows.T[::-1]) + (keys,))
    keys, rows = keys[order], rows[order]
    same = np.zeros(len(keys), dtype=bool)
    same[1:] = (keys[1:] == keys[:-1]) & (rows[1:] == rows[:-1]).all(axis=1)
    keys, rows = keys[~same], rows[~same]
    return keys[:k], rows[:k]


def squared_distances(x: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances ``(n, k)`` between rows and centres."""
    sq = (x * x).sum(axis=1)[:, None] - 2.0 * x @ centers.T + (centers * centers).sum(axis=1)
    return np.maximum(sq, 0.0)


class KMeans(Node):
    """Lloyd's k-means with order-independent seeding and exact fork/join.

    ``execute`` returns the squared Euclidean distances to every centre,
    shape ``(n, n_clusters)``; :meth:`label` returns the index of the nearest.

    Parameters
    ----------
    n_clusters : int
        Number of centres.
    max_iter : int
        Most Lloyd iterations (training phases after the seeding phase).
    tol : float
        Stop when the centres move less than this (Frobenius norm of the shift).
    seed : int
        Seed of the row hash that picks the initial centres.
    **kw
        Passed to :class:`~labkit.flows.node.Node`.

    Attributes
    ----------
    centers : numpy.ndarray
        Current centres ``(n_clusters, input_dim)`` (after phase 0).
    initial_centers : numpy.ndarray
        Centres picked by phase 0.
    inertia : list of float
        Sum of squared distances to the nearest centre, at the start of each
        iteration (non-increasing).
    n_iter : int
        Lloyd iterations done.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = np.vstack([rng.normal(0, 0.1, (20, 2)), rng.normal(5, 0.1, (20, 2))])
    >>> node = KMeans(2, seed=1)
    >>> while node.is_training():
    ...     for chunk in np.array_split(x, 3):
    ...         fork = node.fork(); fork.train(chunk); node.join(fork)
    ...     node.stop_training()
    >>> labels = node.label(x)
    >>> bool((labels[:20] == labels[0]).all() and (labels[20:] != labels[0]).all())
    True
    """

    holds_gil = False  # numpy/BLAS (torch) work: runs on threads

    def __init__(self, n_clusters, max_iter=20, tol=1e-6, seed=0, **kw):
        super().__init__(**kw)
        self.n_clusters = positive_int(self, n_clusters, "n_clusters")
        self._output_dim = self.n_clusters
        self.max_iter = positive_int(self, max_iter, "max_iter")
        self.tol = real_number(self, tol, "tol")
        self.seed = self._seed(seed)
        self.centers = self.initial_centers = None
        self.inertia: list[float] = []
        self.n_iter = 0
        self._shift = np.inf
        self._reset_stats()

    def _seed(self, seed) -> int:
        """``seed`` as an int; the row hash takes any integer."""
        if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
            raise InputError(
                f"{self.name} seed must be an int, got {seed!r}",
                node_name=self.name,
                argument="seed",
            )
        return int(seed)

    def _reset_stats(self):
        self._keys = self._rows = None
        self._sums = self._counts = None
        self._inertia = 0.0

    def n_phases(self):
        return None

    def _has_next_phase(self):
        if self.phase == 0:
            return True
        return self.n_iter < self.max_iter and self._shift > self.tol

    # -- training --------------------------------------------------------------

    def _train(self, x):
        x = x.astype(np.float64, copy=False)
        if self.phase == 0:
            require_finite(self, x.sum(axis=0))
            self._add_candidates(row_keys(x, self.seed), x)
        else:
            self._add_assignments(x)

    def _add_candidates(self, keys, rows):
        if self._keys is not None:
            keys = np.concatenate([self._keys, keys])
            rows = np.concatenate([self._rows, rows])
        self._keys, self._rows = smallest_rows(keys, rows, self.n_clusters)

    def _add_assignments(self, x):
        assert self.centers is not None  # phase 0 chose them
        dist = squared_distances(x, self.centers)
        nearest = np.argmin(dist, axis=1)
        onehot = np.zeros((self.n_clusters, x.shape[0]))
        onehot[nearest, np.arange(x.shape[0])] = 1.0
        sums, counts = onehot @ x, onehot.sum(axis=1)
        require_finite(self, sums)
        if self._sums is not None:
            sums, counts = sums + self._sums, counts + self._counts
        self._sums, self._counts = sums, counts
        self._inertia += float(dist[np.arange(x.shape[0]), nearest].sum())

    def _stop_training(self):
        if self.phase == 0:
            assert self._rows is not None  # a phase with samples has candidates
            if self._rows.shape[0] < self.n_clusters:
                raise InputError(
                    f"{self.name} needs {self.n_clusters} distinct samples, "
                    f"got {self._rows.shape[0]}",
                    node_name=self.name,
                    phase=0,
                )
            self.centers = self.initial_centers = self._rows
        else:
            self._update_centers()
        self._reset_stats()

    def _update_centers(self):
        assert self._counts is not None and self._sums is not None and self.centers is not None
        filled = self._counts > 0
        # An empty cluster keeps its old centre rather than becoming NaN.
        new = self.centers.copy()
        new[filled] = self._sums[filled] / self._counts[filled, None]
        self._shift = float(np.linalg.norm(new - self.centers))
        self.centers = new
        self.inertia = self.inertia + [self._inertia]
        self.n_iter += 1

    # -- fork and join ---------------------------------------------------------

    def _fork(self):
        forked = KMeans(self.n_clusters, max_iter=self.max_iter, tol=self.tol, seed=self.seed)
        forked.centers = self.centers
        return forked

    def _partial(self):
        if self.phase == 0:
            return {"keys": self._keys, "rows": self._rows}
        return {"sums": self._sums, "counts": self._counts, "inertia": self._inertia}

    def _join(self, partial):
        if self.phase == 0:
            if partial["keys"] is not None:
                self._add_candidates(partial["keys"], partial["rows"])
        elif partial["sums"] is not None:
            sums, counts = partial["sums"], partial["counts"]
            if self._sums is None:
                self._sums, self._counts = sums, counts
            else:
                self._sums, self._counts = self._sums + sums, self._counts + counts
            self._inertia += partial["inertia"]

    # -- output ----------------------------------------------------------------

    def _execute(self, x):
        assert self.centers is not None  # trained
        dist = squared_distances(x.astype(np.float64, copy=False), self.centers)
        return dist.astype(self.dtype, copy=False)

    def label(self, x) -> np.ndarray:
        """Index of the nearest centre for each row."""
        if self.is_training():
            raise not_fitted(f"{self.name} must be trained before label", node_name=self.name)
        x = self._check_input(x).astype(np.float64, copy=False)
        assert self.centers is not None  # trained
        return np.argmin(squared_distances(x, self.centers), axis=1)

    def _plot_data(self):
        return {"inertia": self.inertia}
