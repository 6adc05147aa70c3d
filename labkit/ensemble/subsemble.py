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

The split and the layer live in :mod:`.subsets` (below :mod:`.base`); this
module is the estimator, and keeps their names.
"""

from __future__ import annotations

from .base import BaseEnsemble
from .subsets import SubsetIndex, subsemble_layer

__all__ = ["Subsemble", "SubsetIndex", "subsemble_layer"]


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
