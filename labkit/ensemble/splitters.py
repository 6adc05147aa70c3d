"""``folds=`` / ``cv=`` as labkit indexers: an int, a labkit indexer or a scikit-learn splitter.

Every place of :mod:`labkit.ensemble` that takes folds (layers, the
ensembles, :class:`~labkit.ensemble.ParallelEvaluation`) turns them into an
indexer with :func:`as_indexer`:

* an ``int`` k: :class:`~labkit.ensemble.FoldIndex` ``(k)``, following
  scikit-learn's ``check_cv``: for a classifier (an ensemble whose meta
  estimator classifies, a layer of classifiers or with ``proba=True``, a
  classifier evaluated) and class labels ``y`` the folds are stratified (as
  ``StratifiedKFold(k)``), otherwise contiguous (as ``KFold(k)``);
* a labkit indexer: itself;
* a scikit-learn splitter (``KFold``, ``StratifiedKFold``, ``GroupKFold``,
  ``TimeSeriesSplit``, ...): a :class:`SplitterIndex`, whose folds are the
  splitter's ``split(X, y, groups)``.  Each row may be predicted at most once;
  rows that no test set holds (the first rows of a ``TimeSeriesSplit``) are left
  out of the layer's output, and the next layer's targets follow, as after a
  blend layer.

Examples
--------
>>> from sklearn.model_selection import KFold
>>> index = as_indexer(KFold(3))
>>> [te.tolist() for _, te in index.folds(6)]
[[0, 1], [2, 3], [4, 5]]
>>> as_indexer(4)
FoldIndex(n_splits=4, shuffle=False, random_state=None)
>>> as_indexer(4, classifier=True)
FoldIndex(n_splits=4, shuffle=False, random_state=None, stratify=True)
"""

from __future__ import annotations

import numpy as np

from ..constraints import check_argument
from ..errors import InputError
from .indexers import N_SPLITS, FoldIndex, Indexer

__all__ = ["SplitterIndex", "as_indexer"]


class SplitterIndex(Indexer):
    """The folds of a scikit-learn splitter; a final fit on every row serves new data.

    Parameters
    ----------
    splitter : object with ``split(X, y, groups)``
        Such as ``KFold(5)``, ``StratifiedKFold(5)`` (needs ``y``) or
        ``GroupKFold(5)`` (needs ``groups``).
    """

    def __init__(self, splitter):
        self.splitter = splitter

    def folds(self, n, y=None, groups=None):
        # The splitter only looks at the number of rows of X (and at y, groups).
        try:
            folds = [
                (np.sort(np.asarray(tr)), np.sort(np.asarray(te)))
                for tr, te in self.splitter.split(np.zeros((n, 1)), y, groups)
            ]
        except (TypeError, ValueError) as exc:
            raise InputError(
                f"{type(self.splitter).__name__} cannot split {n} rows: {exc}"
            ) from None
        if not folds:
            raise InputError(f"{self.splitter!r} gave no folds")
        tests = np.concatenate([te for _, te in folds])
        if len(np.unique(tests)) != len(tests):
            # Out-of-fold predictions fill one column per estimator: one value per row.
            raise InputError(
                f"{self.splitter!r} puts some rows in more than one test set; "
                "a layer needs each row predicted at most once (use KFold-like "
                "splitters, not ShuffleSplit or repeated ones)"
            )
        return folds

    def output_rows(self, n, folds=None):
        folds = self.folds(n) if folds is None else folds
        return np.unique(np.concatenate([te for _, te in folds]))

    def __repr__(self):
        return f"SplitterIndex({self.splitter!r})"


def as_indexer(
    cv, shuffle: bool = False, random_state=None, what: str = "folds", classifier: bool = False
):
    """A labkit indexer for ``cv``: an int, a labkit indexer or a scikit-learn splitter.

    ``shuffle`` and ``random_state`` apply to an int only; so does
    ``classifier``: an int becomes stratified folds for a classifier (when
    ``y`` holds class labels), as scikit-learn's ``check_cv`` decides.  An
    indexer or splitter given as such is used as it is.  Errors name ``what``
    (the argument).
    """
    if isinstance(cv, Indexer):
        return cv
    if isinstance(cv, (int, np.integer)) and not isinstance(cv, bool):
        check_argument(what, cv, [N_SPLITS])
        return FoldIndex(int(cv), shuffle=shuffle, random_state=random_state, stratify=classifier)
    if callable(getattr(cv, "split", None)) and not isinstance(cv, (str, bytes, type)):
        return SplitterIndex(cv)
    raise InputError(
        f"{what} must be an int (>= 2), a labkit indexer (FoldIndex, BlendIndex, "
        f"FullIndex) or a scikit-learn splitter such as KFold(5), got {cv!r}",
        argument=what,
    )
