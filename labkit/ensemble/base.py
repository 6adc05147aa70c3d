"""The scikit-learn front end shared by the ensembles: params, fit on a scheduler, predict.

:class:`BaseEnsemble` turns its parameters (``layers`` recorded by
``.add``, ``meta_estimator`` by ``.add_meta``, the split settings and a
labkit ``scheduler``) into :class:`~labkit.ensemble.Layer` objects at fit
and fits them with :class:`~labkit.ensemble.ParallelProcessing`: every
(estimator, fold) is one task, the whole fit is one run on the scheduler's
board.  The meta estimator is one more layer (one fit on all rows).

Classifier or regressor follows the meta estimator.  A classifier's labels
are encoded as ``0..K-1`` for the layers (so ``proba=False`` layers give
numeric columns) and decoded by ``predict``.

The scheduler is kept by reference: ``clone``/``deepcopy`` share it (no
copied Dask client, no nested cluster inside ``GridSearchCV``), and a
pickled ensemble forgets it (refitting an unpickled one runs serially).
"""

from __future__ import annotations

import copy

import numpy as np
from sklearn.base import BaseEstimator, clone, is_classifier, is_regressor
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils import ClassifierTags, RegressorTags, TransformerTags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..errors import InputError
from ..runs import start
from .cache import as_scheduler
from .indexers import BlendIndex, FullIndex
from .layer import Layer
from .layerspec import KINDS, LayerSpec
from .processing import ParallelProcessing, _check_groups, predict_layers
from .splitters import as_indexer

__all__ = ["BaseEnsemble"]


class BaseEnsemble(BaseEstimator):
    """Layers of estimators and a meta estimator, fitted on a labkit scheduler.

    Subclasses define ``__init__`` (their parameters) and ``_kind`` (the kind
    of layer ``.add`` records).  See :class:`~labkit.ensemble.SuperLearner`.
    """

    _kind = "stack"

    # -- building ------------------------------------------------------------------------

    def add(self, estimators, preprocessing=None, proba=False, propagate_features=None,
            indexer=None):
        """Append a layer of ``estimators``; returns ``self`` (chainable).

        Parameters
        ----------
        estimators : list or dict
            ``[(name, estimator), ...]`` or bare estimators, or ``{case: [...]}``.
        preprocessing : dict, optional
            ``{case: [transformer, ...]}`` fitted before each estimator of the case.
        proba : bool
            Output class probabilities (``predict_proba``) instead of predictions.
        propagate_features : list of int, optional
            Input columns copied into the layer's output.
        indexer : int, labkit indexer or scikit-learn splitter, optional
            This layer's split instead of the ensemble's.
        """
        return self._append(LayerSpec(estimators, self._kind, preprocessing, proba,
                                      propagate_features, indexer))

    def add_meta(self, estimator):
        """Set the meta estimator fitted on the last layer's output; returns ``self``."""
        self.meta_estimator = estimator
        return self

    def _append(self, spec):
        # A new list: the list given to the constructor (maybe shared) is never mutated.
        self.layers = list(self.layers or []) + [spec]
        return self

    # -- parameters: layer-1__ridge__alpha ------------------------------------------------

    def get_params(self, deep=True):
        out = super().get_params(deep=deep)
        if deep:
            for key, spec in self._specs():
                out[key] = spec
                out.update((f"{key}__{k}", v) for k, v in spec.get_params(deep=True).items())
        return out

    def set_params(self, **params):
        specs = dict(self._specs())
        nested: dict = {}
        for key in [k for k in params if k.split("__", 1)[0] in specs]:
            head, _, sub = key.partition("__")
            if sub:
                nested.setdefault(head, {})[sub] = params.pop(key)
            else:                                  # a whole layer replaced
                self.layers = list(self.layers)
                self.layers[int(head.split("-")[1]) - 1] = params.pop(key)
        for head, sub in nested.items():
            dict(self._specs())[head].set_params(**sub)
        return super().set_params(**params)

    def _specs(self) -> list[tuple[str, LayerSpec]]:
        layers = self.layers if isinstance(self.layers, (list, tuple)) else []
        return [(f"layer-{i}", s) for i, s in enumerate(layers, 1) if isinstance(s, LayerSpec)]

    def __sklearn_clone__(self):
        # clone's default deep-copies non-estimator params: the scheduler (a live Dask
        # client) must be shared instead, so this clone keeps it by reference.
        params = self.get_params(deep=False)
        scheduler = params.pop("scheduler")
        new = type(self)(scheduler=scheduler,
                         **{k: clone(v, safe=False) for k, v in params.items()})
        if hasattr(self, "_sklearn_output_config"):
            new._sklearn_output_config = copy.deepcopy(self._sklearn_output_config)
        return new

    def __deepcopy__(self, memo):
        memo[id(self.scheduler)] = self.scheduler    # shared, never copied
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return new

    def __getstate__(self):
        state = super().__getstate__()
        if state.get("scheduler") is not None:        # a live client does not pickle
            state = dict(state, scheduler=None)
        return state

    # -- classifier or regressor: the meta estimator's ------------------------------------

    @property
    def _estimator_type(self):
        meta = self.meta_estimator
        if not hasattr(meta, "__sklearn_tags__"):   # none yet (or not a scikit-learn one)
            return None
        return "classifier" if is_classifier(meta) else \
            "regressor" if is_regressor(meta) else None

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        kind = self._estimator_type
        tags.estimator_type = kind
        tags.transformer_tags = TransformerTags()     # transform(): the last layer's output
        if kind is not None:
            tags.target_tags.required = True
        if kind == "classifier":
            tags.classifier_tags = ClassifierTags()
        elif kind == "regressor":
            tags.regressor_tags = RegressorTags()
        return tags

    # -- fit -------------------------------------------------------------------------------

    def fit(self, X, y, groups=None, wait=True):
        """Fit every layer (each on the previous one's output), then the meta estimator.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        groups : array-like, optional
            Group labels for grouped splitters (``GroupKFold``).
        wait : bool
            ``False`` returns a :class:`~labkit.Run` at once; its ``result()`` is
            the fitted ensemble.

        Returns
        -------
        self, or a Run with ``wait=False``
        """
        specs = [s for _, s in self._specs()]
        if not specs or len(specs) != len(self.layers):
            raise InputError("an ensemble needs layers: add them with .add(estimators) "
                             f"(layers={self.layers!r})", estimator=type(self).__name__)
        classifier = self._estimator_type == "classifier"
        X, y = self._validate(X, y, classifier)
        if classifier:
            self.classes_, y = np.unique(y, return_inverse=True)  # labels as 0..K-1
            if len(self.classes_) < 2:
                raise InputError(f"a classifier needs at least 2 classes in y, got "
                                 f"{self.classes_.tolist()}", estimator=type(self).__name__)
        groups = _check_groups(groups, X, estimator=type(self).__name__)
        layers = [self._layer(s, i) for i, s in enumerate(specs, 1)]
        meta = None if self.meta_estimator is None else \
            Layer([("meta", clone(self.meta_estimator))], FullIndex(), name="meta")
        scheduler = as_scheduler(self.scheduler)   # None: a serial, in-process LocalScheduler
        pp = ParallelProcessing(scheduler, cache=self.cache)

        def job(scope):
            out, targets, labels, scores = X, y, groups, {}
            for i, layer in enumerate(layers):
                out, rows = pp._fit_layer(scope, i, layer, out, targets, labels)
                targets = targets[rows]            # a blend layer predicts fewer rows
                labels = None if labels is None else labels[rows]
                scores[layer.name] = self._scores(layer, out, targets)
            if meta is not None:
                pp._fit_layer(scope, len(layers), meta, out, targets)
            self.layers_ = layers
            self.meta_ = None if meta is None else meta.fitted_["meta"][1]
            if self.scorer is not None:
                self.scores_ = scores
            return self
        return start("ensemble", [scheduler], job, wait=wait,
                     n_nodes=len(layers) + (meta is not None))

    def _validate(self, X, y, classifier):
        """``X`` and ``y`` checked as scikit-learn does; errors are :class:`InputError`."""
        try:
            X, y = validate_data(self, X, y, ensure_min_samples=2,
                                 y_numeric=not classifier)
            if classifier:
                check_classification_targets(y)
        except ValueError as exc:
            raise InputError(str(exc), estimator=type(self).__name__) from None
        return X, y

    def _layer(self, spec: LayerSpec, i: int) -> Layer:
        """The backend layer of ``spec`` (estimators cloned: the params stay unfitted)."""
        name = f"layer-{i}"
        if spec.kind not in KINDS:
            raise InputError(f"layer kind must be one of {KINDS}, got {spec.kind!r}",
                             layer=name)
        try:
            estimators = clone(spec.estimators, safe=False)
            indexer = as_indexer(spec.indexer, what="indexer") if spec.indexer is not None \
                else self._default_indexer(spec.kind)
        except InputError as err:
            raise err.locate(layer=name)
        except (TypeError, ValueError) as exc:
            raise InputError(str(exc), layer=name) from None
        if spec.kind == "subsemble":
            from .subsemble import subsemble_layer  # (subsemble builds on this module)
            return subsemble_layer(estimators, indexer, clone(spec.preprocessing, safe=False),
                                   spec.proba, spec.propagate_features, name)
        return Layer(estimators, indexer, clone(spec.preprocessing, safe=False),
                     proba=spec.proba, propagate_features=spec.propagate_features, name=name)

    def _default_indexer(self, kind):
        """The split of a ``kind`` layer from the ensemble's settings."""
        if kind == "blend":
            return BlendIndex(self.test_size)
        if kind == "full":
            return FullIndex()
        if kind == "subsemble":
            from .subsemble import SubsetIndex
            return SubsetIndex(self.partitions, self.folds, self.shuffle, self.random_state)
        return as_indexer(self.folds, self.shuffle, self.random_state)

    def _scores(self, layer, out, targets) -> dict:
        """``{estimator: scorer(y, its out-of-fold predictions)}`` when a scorer is set."""
        if self.scorer is None:
            return {}
        k, per = len(layer.propagate_features), out.shape[1] - len(layer.propagate_features)
        per //= len(layer.estimators())
        decode = self.classes_ if hasattr(self, "classes_") and \
            self._estimator_type == "classifier" else None
        scores = {}
        for j, (name, _) in enumerate(layer.estimators()):
            cols = out[:, k + j * per:k + (j + 1) * per]
            pred = cols.argmax(1) if layer.proba else cols[:, 0]
            if decode is not None:
                scores[name] = float(self.scorer(decode[targets],
                                                 decode[np.rint(pred).astype(int)]))
            else:
                scores[name] = float(self.scorer(targets, pred))
        return scores

    # -- predict -----------------------------------------------------------------------------

    def transform(self, X):
        """The last layer's output for ``X`` (the meta estimator's input)."""
        check_is_fitted(self, "layers_")
        try:
            X = validate_data(self, X, reset=False)
        except ValueError as exc:
            raise InputError(str(exc), estimator=type(self).__name__) from None
        return predict_layers(self.layers_, X)

    def fit_transform(self, X, y, **fit_params):
        """``fit(X, y)`` then ``transform(X)``: the final fits' output, as scikit-learn's
        stacking gives (not the out-of-fold predictions the meta estimator learnt on)."""
        return self.fit(X, y, **fit_params).transform(X)

    def _meta(self):
        check_is_fitted(self, "layers_")
        if self.meta_ is None:
            raise InputError("no meta estimator: add one with .add_meta(estimator), or use "
                             "transform()", estimator=type(self).__name__)
        return self.meta_

    def predict(self, X):
        """The meta estimator's predictions (class labels for a classifier)."""
        meta = self._meta()
        pred = meta.predict(self.transform(X))
        if self._estimator_type == "classifier":
            return self.classes_[np.asarray(pred).astype(int)]
        return pred

    def _has_proba(self):
        return self._estimator_type == "classifier" and \
            hasattr(self.meta_estimator, "predict_proba")

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Class probabilities from the meta estimator, columns in ``classes_`` order."""
        meta = self._meta()
        p = meta.predict_proba(self.transform(X))
        out = np.zeros((len(p), len(self.classes_)))
        out[:, np.asarray(meta.classes_).astype(int)] = p  # a blend may drop a class
        return out

    def score(self, X, y, sample_weight=None):
        """Accuracy (classifier) or R² (regressor) of ``predict(X)``."""
        metric = accuracy_score if self._estimator_type == "classifier" else r2_score
        return metric(y, self.predict(X), sample_weight=sample_weight)
