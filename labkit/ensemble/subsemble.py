"""Subsembles: every estimator fitted once per partition of the rows, as ML-Ensemble does.

The rows are cut into ``partitions`` parts and each part into ``folds``
folds.  Estimator ``e`` becomes one column per partition, ``e.1``, ``e.2``...:
``e.j`` is fitted on partition j's rows outside fold v and predicts the rows
of fold v of *every* partition (fold v spans the partitions), so each column
is out-of-fold for every row; its final fit is on all of partition j's rows.
Smaller fits (each sees ``1/partitions`` of the data) in exchange for more of
them, and a meta learner that can weigh each partition's view.

For a classifier (class labels ``y``) the partitions and the folds within
them are stratified, as an int number of folds is everywhere in
:mod:`labkit.ensemble`: on rows ordered by class, contiguous partitions would
each see only some of the classes.

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

from ..errors import InputError
from .base import BaseEnsemble
from .indexers import _Indexer, stratified_folds
from .layer import Layer
from .layerspec import _cases
from .validation import class_labels

__all__ = ["Subsemble", "SubsetIndex", "subsemble_layer"]


class SubsetIndex(_Indexer):
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
        for what, value, low in (("partitions", partitions, 1), ("folds", folds, 2)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise InputError(
                    f"a subsemble needs {what} >= {low} (an int), got {value!r}", argument=what
                )
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
        for case, items in _cases(estimators)
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


class Subsemble(BaseEnsemble):
    """A SuperLearner whose layers fit every estimator once per partition of the rows.

    Parameters
    ----------
    partitions : int
        Row partitions; each estimator gives one output column per partition.
    folds : int
        Folds within each partition (out-of-fold predictions for every row).
        For a classifier, partitions and folds are stratified by class (as
        scikit-learn's ``check_cv`` makes an int number of folds).
    shuffle : bool
        Permute the rows before partitioning.
    random_state : int, optional
        Seed of that permutation.
    scheduler, scorer, cache, layers, meta_estimator
        As for :class:`~labkit.ensemble.SuperLearner`.

    Attributes
    ----------
    layers_, meta_, classes_, n_features_in_, scores_
        As for :class:`~labkit.ensemble.SuperLearner`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression, Ridge
    >>> X = np.random.default_rng(0).normal(size=(40, 3)); y = X @ [1.0, 2.0, 3.0]
    >>> ens = Subsemble(partitions=2, folds=2).add([Ridge()]).add_meta(LinearRegression())
    >>> [name for name, _ in ens.fit(X, y).layers_[0].estimators()]
    ['ridge.1', 'ridge.2']
    """

    _kind = "subsemble"

    def __init__(
        self,
        partitions=2,
        folds=2,
        shuffle=False,
        random_state=None,
        scheduler=None,
        scorer=None,
        cache="auto",
        layers=None,
        meta_estimator=None,
    ):
        self.partitions = partitions
        self.folds = folds
        self.shuffle = shuffle
        self.random_state = random_state
        self.scheduler = scheduler
        self.scorer = scorer
        self.cache = cache
        self.layers = layers
        self.meta_estimator = meta_estimator
