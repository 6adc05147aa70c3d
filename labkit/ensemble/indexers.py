"""Indexers: which rows each estimator of a layer is fitted on and predicts.

An indexer turns ``n`` rows into *folds* ``(train, test)`` of row indices and
says which rows the layer outputs:

* :class:`FullIndex`: one fit on every row, predicting every row (in-sample).
* :class:`FoldIndex`: k-fold; each row is predicted by the estimator fitted on
  the other folds (out-of-fold), and a final fit on every row serves new data.
* :class:`BlendIndex`: fit on the first part, predict the rest; the layer
  outputs the rest only, so the targets of the next layer are rebased onto it.

``stratify=True`` (what an int number of folds becomes for a classifier, as
scikit-learn's ``check_cv`` makes ``StratifiedKFold``) gives every fold each
class's share of the rows when ``y`` holds class labels: on rows ordered by
class, plain contiguous folds would each miss a whole class.

Examples
--------
>>> [(tr.tolist(), te.tolist()) for tr, te in FoldIndex(3).folds(6)]
[([2, 3, 4, 5], [0, 1]), ([0, 1, 4, 5], [2, 3]), ([0, 1, 2, 3], [4, 5])]
>>> BlendIndex(0.5).output_rows(6)
array([3, 4, 5])
>>> y = [0, 0, 0, 1, 1, 1]
>>> [te.tolist() for _, te in FoldIndex(3, stratify=True).folds(6, y)]
[[0, 3], [1, 4], [2, 5]]
>>> BlendIndex(0.5, stratify=True).folds(6, y)[0][1]
array([2, 4, 5])
"""

from __future__ import annotations

import numbers

import numpy as np

from ..constraints import Interval, check_argument
from ..errors import InputError
from .validation import class_labels

__all__ = ["Indexer", "FullIndex", "FoldIndex", "BlendIndex", "N_SPLITS", "TEST_SIZE"]

#: A number of folds (``FoldIndex(n_splits)``, an int ``cv``).
N_SPLITS = Interval(int, 2, name="at least 2")

#: A blend's ``test_size``: a fraction of the rows, or a number of them.
TEST_SIZE = [
    Interval(float, 0, 1, closed="neither", name="a fraction in (0, 1)"),
    Interval(int, 1, name="a positive row count"),
]


class Indexer:
    """The contract: ``folds(n)``, ``output_rows(n)`` and whether a final fit is needed."""

    #: Whether the one fold's fit serves new data (no separate final fit).
    single_fit = False

    def folds(self, n: int, y=None, groups=None) -> list[tuple[np.ndarray, np.ndarray]]:
        """``(train rows, test rows)`` of each fit whose predictions fill the output.

        ``y`` and ``groups`` are for indexers that split by them (a stratified
        or grouped scikit-learn splitter); labkit's own ignore them.
        """
        raise NotImplementedError

    def output_rows(self, n: int, folds=None) -> np.ndarray:
        """The rows the layer's output holds, in order (``folds``: as ``folds(n)`` gave)."""
        return np.arange(n)

    def __repr__(self):
        # stratify=False is the default: left out, as the reprs read before it existed
        args = ", ".join(
            f"{k}={v!r}" for k, v in vars(self).items() if not (k == "stratify" and v is False)
        )
        return f"{type(self).__name__}({args})"


class FullIndex(Indexer):
    """Fit on every row and predict every row."""

    single_fit = True

    def folds(self, n, y=None, groups=None):
        rows = np.arange(n)
        return [(rows, rows)]


class FoldIndex(Indexer):
    """k-fold out-of-fold predictions, and a final fit on every row.

    Parameters
    ----------
    n_splits : int
        Folds, at least 2.
    shuffle : bool
        Permute the rows before folding.
    random_state : int, optional
        Seed of the permutation.
    stratify : bool
        With class labels ``y``: scikit-learn's ``StratifiedKFold`` (same
        ``shuffle``, ``random_state``), each fold holding each class's share;
        otherwise (or for other ``y``) contiguous folds, as ``KFold``.
    """

    def __init__(
        self, n_splits: int = 2, shuffle: bool = False, random_state=None, stratify: bool = False
    ):
        if not N_SPLITS.accepts(n_splits):  # in the words FoldIndex has always used
            raise InputError(f"FoldIndex needs n_splits >= 2, got {n_splits!r}")
        self.n_splits, self.shuffle, self.random_state = int(n_splits), shuffle, random_state
        self.stratify = bool(stratify)

    def folds(self, n, y=None, groups=None):
        if n < self.n_splits:
            raise InputError(f"{self.n_splits} folds need at least {self.n_splits} rows, got {n}")
        if self.stratify and class_labels(y):
            return stratified_folds(self.n_splits, y, self.shuffle, self.random_state)
        rows = np.arange(n)
        if self.shuffle:
            rows = np.random.default_rng(self.random_state).permutation(n)
        sizes = np.full(self.n_splits, n // self.n_splits)
        sizes[: n % self.n_splits] += 1
        out, start = [], 0
        for size in sizes:
            test = np.sort(rows[start : start + size])
            train = np.sort(np.concatenate([rows[:start], rows[start + size :]]))
            out.append((train, test))
            start += size
        return out


class BlendIndex(Indexer):
    """Fit on the first ``1 - test_size`` of the rows, predict (and output) the rest.

    Parameters
    ----------
    test_size : float or int
        Fraction (0 < f < 1) or number of rows predicted.
    stratify : bool
        With class labels ``y``: the last ``test_size`` of *each class's* rows
        are predicted (the same number of rows in all), so the fit and the
        predicted rows hold every class in proportion.
    """

    single_fit = True

    def __init__(self, test_size=0.5, stratify: bool = False):
        check_argument("test_size", test_size, TEST_SIZE, "BlendIndex")
        self.test_size = test_size
        self.stratify = bool(stratify)

    def _split(self, n: int) -> int:
        """The first predicted row."""
        n_test = (
            int(self.test_size)  # a row count (any int, NumPy's too)
            if isinstance(self.test_size, numbers.Integral)
            else int(round(self.test_size * n))
        )
        start = n - n_test
        if n_test < 1 or start < 1:
            raise InputError(
                f"a blend split of {n} rows with test_size={self.test_size!r} "
                f"leaves {'no rows to predict' if n_test < 1 else 'no rows to fit on'}"
            )
        return start

    def folds(self, n, y=None, groups=None):
        start = self._split(n)
        if not (self.stratify and class_labels(y)):
            return [(np.arange(start), np.arange(start, n))]
        # Order the rows by their place within their class (ties: row order) and cut
        # that order: each class's first rows fit, its last ones are predicted.
        codes = np.unique(np.asarray(y), return_inverse=True)[1].ravel()
        counts = np.bincount(codes)
        within = np.empty(n)
        within[np.argsort(codes, kind="stable")] = np.concatenate([np.arange(c) for c in counts])
        order = np.lexsort((np.arange(n), (within + 0.5) / counts[codes]))
        return [(np.sort(order[:start]), np.sort(order[start:]))]

    def output_rows(self, n, folds=None):
        folds = self.folds(n) if folds is None else folds
        return folds[0][1]


def stratified_folds(n_splits: int, y, shuffle: bool = False, random_state=None) -> list:
    """``(train, test)`` rows of scikit-learn's ``StratifiedKFold`` for class labels ``y``."""
    from sklearn.model_selection import StratifiedKFold

    # StratifiedKFold refuses a random_state without shuffle (it would mean nothing).
    cv = StratifiedKFold(n_splits, shuffle=shuffle, random_state=random_state if shuffle else None)
    try:
        return [(train, test) for train, test in cv.split(np.zeros((len(y), 1)), y)]
    except ValueError as exc:
        raise InputError(f"{n_splits} stratified folds cannot split y: {exc}") from None
