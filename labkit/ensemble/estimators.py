"""Ensembles as scikit-learn estimators: SuperLearner, BlendEnsemble, SequentialEnsemble.

After ML-Ensemble's front end, on labkit's schedulers.  Each is built with
``.add(estimators, ...)`` (a layer) and ``.add_meta(estimator)``, and is a
scikit-learn estimator: ``get_params``/``set_params`` reach the layers'
estimators (``layer-1__ridge__alpha``), ``clone`` works (sharing the
scheduler), and it runs inside ``Pipeline``, ``cross_val_score`` and
``GridSearchCV``.  Keep those at ``n_jobs=None``: the ensemble's own
scheduler is what runs the fits in parallel.

Examples
--------
>>> import numpy as np
>>> from sklearn.linear_model import LinearRegression, Ridge
>>> from sklearn.model_selection import GridSearchCV
>>> X = np.random.default_rng(0).normal(size=(60, 3)); y = X @ [1.0, 2.0, 3.0]
>>> ens = SuperLearner(folds=3).add([LinearRegression(), Ridge()]).add_meta(LinearRegression())
>>> search = GridSearchCV(ens, {"layer-1__ridge__alpha": [0.1, 10.0]}, cv=2).fit(X, y)
>>> search.best_params_
{'layer-1__ridge__alpha': 0.1}
"""

from __future__ import annotations

from ..constraints import check_argument
from .base import BaseEnsemble
from .layerspec import KIND_RULE, LayerSpec

__all__ = ["SuperLearner", "BlendEnsemble", "SequentialEnsemble"]

_SHARED = """
    scheduler : labkit Scheduler, optional
        Where the fits run (every estimator × fold is one task; the fit shows
        on the scheduler's board); None runs them serially in-process.
    scorer : callable, optional
        ``scorer(y_true, y_pred)`` of each base estimator's out-of-fold
        predictions, kept in ``scores_`` as ``{layer: {estimator: score}}``.
    cache : {"auto", "memory", "memmap"}
        How inputs reach the workers (see :class:`ParallelProcessing`).
    layers : list of LayerSpec, optional
        What ``.add`` records; usually left out.
    meta_estimator : estimator, optional
        What ``.add_meta`` sets.

    Attributes
    ----------
    layers_ : list of Layer
        The fitted layers (their ``fitted_`` estimators serve new data).
    meta_ : estimator
        The fitted meta estimator.
    classes_ : ndarray
        The class labels (classifiers).
    n_features_in_ : int
        Columns of ``X`` at fit.
    scores_ : dict
        With a ``scorer``: each base estimator's out-of-fold score.
"""


class SuperLearner(BaseEnsemble):
    __doc__ = (
        """Stacking with out-of-fold predictions: each layer feeds the next.

    Every estimator of a layer is fitted on each fold's training rows and
    predicts its held-out rows; those out-of-fold predictions are the next
    layer's input, and a final fit on all rows serves new data.

    Parameters
    ----------
    folds : int, labkit indexer or scikit-learn splitter
        The split of every layer: an int k as scikit-learn's ``check_cv``
        makes it (``StratifiedKFold(k)`` for a classifier, ``KFold(k)`` for a
        regressor), ``FoldIndex``, or ``KFold``/``StratifiedKFold``/``GroupKFold``
        (with ``fit(..., groups=)``)/``TimeSeriesSplit``.
    shuffle : bool
        Permute the rows before folding (an int ``folds`` only).
    random_state : int, optional
        Seed of that permutation."""
        + _SHARED
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression, Ridge
    >>> X = np.random.default_rng(0).normal(size=(40, 3)); y = X @ [1.0, 2.0, 3.0]
    >>> ens = SuperLearner(folds=4).add([Ridge(), LinearRegression()])
    >>> ens = ens.add_meta(LinearRegression()).fit(X, y)
    >>> bool(np.allclose(ens.predict(X[:5]), y[:5])), ens.n_features_in_
    (True, 3)
    """
    )

    _kind = "stack"

    def __init__(
        self,
        folds=5,
        shuffle=False,
        random_state=None,
        scheduler=None,
        scorer=None,
        cache="auto",
        layers=None,
        meta_estimator=None,
    ):
        self.folds = folds
        self.shuffle = shuffle
        self.random_state = random_state
        self.scheduler = scheduler
        self.scorer = scorer
        self.cache = cache
        self.layers = layers
        self.meta_estimator = meta_estimator


class BlendEnsemble(BaseEnsemble):
    __doc__ = (
        """Blending: each layer fits on the first rows and predicts the rest.

    A layer fits its estimators once on the first ``1 - test_size`` of its
    rows and predicts the remaining ones; the next layer (and the meta
    estimator) learns on those predicted rows only.  Cheaper than stacking
    (one fit an estimator), at the price of fewer rows for each layer.

    Parameters
    ----------
    test_size : float or int
        Fraction (or number) of rows each layer predicts; for a classifier,
        that fraction of each class (the last rows of each), so the fit and
        the predicted rows hold every class."""
        + _SHARED
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression, Ridge
    >>> X = np.random.default_rng(0).normal(size=(40, 3)); y = X @ [1.0, 2.0, 3.0]
    >>> ens = BlendEnsemble(test_size=0.5).add([Ridge()]).add_meta(LinearRegression())
    >>> ens.fit(X, y).transform(X[:3]).shape
    (3, 1)
    """
    )

    _kind = "blend"

    def __init__(
        self,
        test_size=0.5,
        scheduler=None,
        scorer=None,
        cache="auto",
        layers=None,
        meta_estimator=None,
    ):
        self.test_size = test_size
        self.scheduler = scheduler
        self.scorer = scorer
        self.cache = cache
        self.layers = layers
        self.meta_estimator = meta_estimator


class SequentialEnsemble(BaseEnsemble):
    __doc__ = (
        """Layers of different kinds in sequence: ``add(kind, estimators, ...)``.

    ``kind`` is ``"stack"`` (out-of-fold, ``folds``), ``"blend"``
    (``test_size``), ``"subsemble"`` (``partitions`` × ``folds``) or ``"full"``
    (fit and predict every row).

    Parameters
    ----------
    folds : int, labkit indexer or scikit-learn splitter
        The split of stack (and, as an int, subsemble) layers; an int is
        stratified for a classifier, as in :class:`SuperLearner`.
    test_size : float or int
        Rows a blend layer predicts.
    partitions : int
        Row partitions of a subsemble layer.
    shuffle, random_state
        As for :class:`SuperLearner`."""
        + _SHARED
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression, Ridge
    >>> X = np.random.default_rng(0).normal(size=(40, 3)); y = X @ [1.0, 2.0, 3.0]
    >>> ens = SequentialEnsemble(folds=3).add("stack", [Ridge(), LinearRegression()])
    >>> ens = ens.add("blend", [Ridge()]).add_meta(LinearRegression()).fit(X, y)
    >>> [layer.indexer for layer in ens.layers_]
    [FoldIndex(n_splits=3, shuffle=False, random_state=None), BlendIndex(test_size=0.5)]
    """
    )

    def __init__(
        self,
        folds=5,
        test_size=0.5,
        partitions=2,
        shuffle=False,
        random_state=None,
        scheduler=None,
        scorer=None,
        cache="auto",
        layers=None,
        meta_estimator=None,
    ):
        self.folds = folds
        self.test_size = test_size
        self.partitions = partitions
        self.shuffle = shuffle
        self.random_state = random_state
        self.scheduler = scheduler
        self.scorer = scorer
        self.cache = cache
        self.layers = layers
        self.meta_estimator = meta_estimator

    # The kind comes first here (ML-Ensemble's SequentialEnsemble.add), a public signature
    # kept as it is, where BaseEnsemble.add takes the kind from the class.
    def add(  # type: ignore[override]
        self,
        kind,
        estimators,
        preprocessing=None,
        proba=False,
        propagate_features=None,
        indexer=None,
    ):
        """Append a ``kind`` layer (``"stack"``, ``"blend"``, ``"subsemble"``, ``"full"``).

        The other parameters are those of :meth:`SuperLearner.add`; returns ``self``.
        """
        check_argument("layer kind", kind, KIND_RULE, layer=f"layer-{len(self.layers or []) + 1}")
        return self._append(
            LayerSpec(estimators, kind, preprocessing, proba, propagate_features, indexer)
        )
