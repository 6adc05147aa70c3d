"""Row partitions of a subsemble: the split (:class:`SubsetIndex`) and the layer it makes.

The rows are cut into ``partitions`` parts and each part into ``folds``
folds.  Estimator ``e`` becomes one column per partition, ``e.1``, ``e.2``...:
``e.j`` is fitted on partition j's rows outside fold v and predicts the rows
of fold v of *every* partition (fold v spans the partitions), so each column
is out-of-fold for every row; its final fit is on all of partition j's rows.

Below :mod:`.base` (which builds a subsemble layer from a spec) and
:mod:`.subsemble` (the estimator).

Examples
--------
>>> index = SubsetIndex(partitions=2, folds=2)
>>> [p.tolist() for p in index.partition_rows(8)]
[[0, 1, 2, 3], [4, 5, 6, 7]]
>>> [te.tolist() for _, te in index.folds(8)]
[[0, 1, 4, 5], [2, 3, 6, 7]]
>>> y = [0, 0, 0, 0, 1, 1, 1, 1]
>>> [p.tolist() for p in SubsetIndex(2, 2, stratify=True).partition_rows(8, y)]
[[0, 1, 4, 5], [2, 3, 6, 7]]
"""

from __future__ import annotations

import numpy as np
from sklearn.base import clone

from ..constraints import Interval, check_argument
from ..errors import InputError
from .indexers import Indexer, stratified_folds
from .layer import Layer
from .layerspec import case_pairs
from .validation import class_labels

__all__ = ["SubsetIndex", "subsemble_layer"]

#: What a subsemble's ``partitions`` and ``folds`` may be.
_COUNTS = {"partitions": Interval(int, 1), "folds": Interval(int, 2)}


class SubsetIndex(Indexer):
    """``partitions`` parts of the rows, each cut into ``folds`` folds.

    Parameters
    ----------
    partitions : int
        Row partitions (at least 1).
    folds : int
        Folds within each partition (at least 2); fold v of the layer is the
        union of every partition's fold v.
    shuffle : bool
        Permute the rows before partitioning.
    random_state : int, optional
        Seed of that permutation.
    stratify : bool
        With class labels ``y``: partitions, and folds within each, hold each
        class's share of the rows (scikit-learn's ``StratifiedKFold``).
    """

    def __init__(self, partitions=2, folds=2, shuffle=False, random_state=None, stratify=False):
        for what, value in (("partitions", partitions), ("folds", folds)):
            check_argument(what, value, [_COUNTS[what]], "a subsemble")
        self.partitions, self.n_splits = int(partitions), int(folds)
        self.shuffle, self.random_state = shuffle, random_state
        self.stratify = bool(stratify)

    def partition_rows(self, n: int, y=None) -> list[np.ndarray]:
        """The rows of each partition, sorted (``y``: the class labels to stratify by)."""
        need = self.partitions * self.n_splits
        if n < need:
            raise InputError(
                f"{self.partitions} partitions × {self.n_splits} folds need at "
                f"least {need} rows, got {n}"
            )
        if self._stratified(y) and self.partitions > 1:
            return [
                test
                for _, test in stratified_folds(self.partitions, y, self.shuffle, self.random_state)
            ]
        rows = np.arange(n)
        if self.shuffle:
            rows = np.random.default_rng(self.random_state).permutation(n)
        return [np.sort(part) for part in np.array_split(rows, self.partitions)]

    def _stratified(self, y) -> bool:
        return self.stratify and class_labels(y)

    def folds(self, n, y=None, groups=None):
        # Fold v's test rows span every partition; its training rows are everything else
        # (a task keeps those of its own partition).
        parts = self.partition_rows(n, y)
        if self._stratified(y):
            y = np.asarray(y)
            pieces = [
                [part[test] for _, test in stratified_folds(self.n_splits, y[part])]
                for part in parts
            ]
        else:
            pieces = [np.array_split(part, self.n_splits) for part in parts]
        out = []
        for v in range(self.n_splits):
            test = np.sort(np.concatenate([p[v] for p in pieces]))
            out.append((np.setdiff1d(np.arange(n), test, assume_unique=True), test))
        return out

    def __repr__(self):
        return (
            f"SubsetIndex(partitions={self.partitions}, folds={self.n_splits}, "
            f"shuffle={self.shuffle}, random_state={self.random_state!r}"
            + (", stratify=True)" if self.stratify else ")")
        )


def subsemble_layer(
    estimators, indexer: SubsetIndex, preprocessing, proba, propagate_features, name: str
) -> Layer:
    """A :class:`Layer` with one estimator ``name.j`` per estimator and partition j."""
    if not isinstance(indexer, SubsetIndex):
        raise InputError(f"a subsemble layer needs a SubsetIndex, got {indexer!r}", layer=name)
    # clone(safe=False): a non-estimator reaches Layer, whose error names it
    expanded = {
        case: [
            (f"{n}.{j + 1}", clone(e, safe=False))
            for n, e in items
            for j in range(indexer.partitions)
        ]
        for case, items in case_pairs(estimators)
    }
    layer = Layer(
        expanded[None] if list(expanded) == [None] else expanded,
        indexer,
        preprocessing,
        proba=proba,
        propagate_features=propagate_features,
        name=name,
    )
    layer.partition_of = {n: int(n.rsplit(".", 1)[1]) - 1 for n, _ in layer.estimators()}
    return layer
