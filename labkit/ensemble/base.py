"""The scikit-learn front end shared by the ensembles: params, fit on a scheduler, predict.

:class:`BaseEnsemble` turns its parameters (``layers`` recorded by
``.add``, ``meta_estimator`` by ``.add_meta``, the split settings and a
labkit ``scheduler``) into :class:`~labkit.ensemble.Layer` objects at fit
and fits them with :class:`~labkit.ensemble.ParallelProcessing`: every
(estimator, fold) is one task, the whole fit is one run on the scheduler's
board.  The meta estimator is one more layer (one fit on all rows).

Classifier or regressor follows the meta estimator.  A classifier's labels
are encoded as ``0..K-1`` for the layers (so ``proba=False`` layers give
numeric columns) and decoded by ``predict``; every ``proba`` layer gives one
column per class of ``classes_`` (0 for a class a fit never saw), and an int
number of folds is stratified by class, as scikit-learn's ``check_cv`` does.

A fit works on an unfitted twin of the ensemble (same parameters) and hands
its fitted attributes over only once everything succeeded: a failed fit or
refit leaves ``classes_``, ``layers_``, ``meta_``... as they were.

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
from sklearn.exceptions import NotFittedError as SklearnNotFittedError
from sklearn.utils.validation import check_is_fitted

from ..errors import InputError, NotFittedError
from ..runs import start
from .cache import as_scheduler
from .indexers import BlendIndex, FullIndex
from .layer import Layer, check_estimator
from .layerspec import KINDS, LayerSpec, _cases
from .processing import ParallelProcessing, predict_layers
from .splitters import as_indexer
from .validation import check_inputs, is_classifier_like, refuses_nan, takes_sparse

__all__ = ["BaseEnsemble"]


class BaseEnsemble(BaseEstimator):
    """Layers of estimators and a meta estimator, fitted on a labkit scheduler.

    Subclasses define ``__init__`` (their parameters) and ``_kind`` (the kind
    of layer ``.add`` records).  See :class:`~labkit.ensemble.SuperLearner`.
    """

    _kind = "stack"

    # -- building ------------------------------------------------------------------------

    def add(
        self, estimators, preprocessing=None, proba=False, propagate_features=None, indexer=None
    ):
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
        return self._append(
            LayerSpec(estimators, self._kind, preprocessing, proba, propagate_features, indexer)
        )

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
            else:  # a whole layer replaced
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
        new = type(self)(
            scheduler=scheduler, **{k: clone(v, safe=False) for k, v in params.items()}
        )
        if hasattr(self, "_sklearn_output_config"):
            new._sklearn_output_config = copy.deepcopy(self._sklearn_output_config)
        return new

    def __deepcopy__(self, memo):
        memo[id(self.scheduler)] = self.scheduler  # shared, never copied
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return new

    def __getstate__(self):
        state = super().__getstate__()
        if state.get("scheduler") is not None:  # a live client does not pickle
            state = dict(state, scheduler=None)
        return state

    # -- classifier or regressor: the meta estimator's ------------------------------------

    @property
    def _estimator_type(self):
        meta = self.meta_estimator
        if isinstance(meta, type) or not hasattr(meta, "__sklearn_tags__"):
            return None  # none yet, not a scikit-learn one, or a class: fit says
        try:
            return (
                "classifier" if is_classifier(meta) else "regressor" if is_regressor(meta) else None
            )
        except (AttributeError, TypeError):
            return None

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        kind = self._estimator_type
        tags.estimator_type = kind
        tags.transformer_tags = TransformerTags()  # transform(): the last layer's output
        steps = self._first_steps()  # what sees X, as scikit-learn's stacking
        tags.input_tags.allow_nan = bool(steps) and not refuses_nan(steps)
        tags.input_tags.sparse = bool(steps) and takes_sparse(steps)
        if kind is not None:
            tags.target_tags.required = True
        if kind == "classifier":
            tags.classifier_tags = ClassifierTags()
        elif kind == "regressor":
            tags.regressor_tags = RegressorTags()
        return tags

    def _first_steps(self) -> list[tuple[str, object]]:
        """``(name, what sees X first)`` in the first layer's spec; nothing for junk."""
        specs = self._specs()
        if not specs:
            return []
        spec = specs[0][1]
        pre = spec.preprocessing if isinstance(spec.preprocessing, dict) else {}
        try:
            return [
                (name, (list(pre.get(case) or []) or [est])[0])
                for case, items in _cases(spec.estimators)
                for name, est in items
            ]
        except TypeError:
            return []

    # -- fit -------------------------------------------------------------------------------

    def fit(self, X, y, groups=None, wait=True):
        """Fit every layer (each on the previous one's output), then the meta estimator.

        The fit goes into an unfitted twin whose fitted attributes replace this
        ensemble's only when it succeeds: a failed fit leaves it as it was.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            A sparse matrix reaches the first layer's estimators as CSR rows.
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
        twin = type(self).__new__(type(self))
        twin.__dict__.update({k: v for k, v in vars(self).items() if k not in _fitted(self)})
        scheduler, job, n_nodes = twin._fit_job(X, y, groups)

        def fit_then_take_over(scope):
            job(scope)
            for key in _fitted(self):  # a refit may not set them all (scores_...)
                delattr(self, key)
            self.__dict__.update({k: getattr(twin, k) for k in _fitted(twin)})
            return self

        detail = {
            "estimator": type(self).__name__,
            "nodes": n_nodes,
            "params": _plain_params(self),
        }  # a search's candidates, named on a board
        return start(
            "ensemble", [scheduler], fit_then_take_over, wait=wait, n_nodes=n_nodes, detail=detail
        )

    def _fit_job(self, X, y, groups):
        """Check everything and build the layers; ``(scheduler, job fitting them, nodes)``.

        Sets ``n_features_in_`` and ``classes_`` on this (unfitted) ensemble.
        """
        name = type(self).__name__
        specs = [s for _, s in self._specs()]
        if not specs or len(specs) != len(self.layers):
            raise InputError(
                "an ensemble needs layers: add them with .add(estimators) "
                f"(layers={self.layers!r})",
                estimator=name,
                argument="layers",
            )
        if self.scorer is not None and not callable(self.scorer):
            raise InputError(
                f"scorer must be a callable scorer(y_true, y_pred), got {self.scorer!r}",
                estimator=name,
                argument="scorer",
            )
        kind = self._estimator_type
        classifier = kind == "classifier"
        meta = self._meta_layer()
        layers = [self._layer(s, i, kind) for i, s in enumerate(specs, 1)]
        X, y, groups = check_inputs(
            X,
            y,
            groups,
            steps=layers[0].first_steps(),
            classifier=classifier,
            needs_y=kind is not None,
            owner=self,
            min_rows=2,
            y_numeric=kind == "regressor",
            estimator=name,
        )
        codes = None
        if classifier:
            self.classes_, y = np.unique(y, return_inverse=True)  # labels as 0..K-1
            codes = np.arange(len(self.classes_))  # every proba layer's columns
        try:
            scheduler = as_scheduler(self.scheduler)  # None: a serial, in-process LocalScheduler
            pp = ParallelProcessing(scheduler, cache=self.cache)
        except InputError as err:
            raise err.locate(estimator=name)

        def job(scope):
            out, targets, labels, scores = X, y, groups, {}
            for i, layer in enumerate(layers):
                out, rows = pp._fit_layer(scope, i, layer, out, targets, labels, codes)
                targets = None if targets is None else targets[rows]  # a blend: fewer rows
                labels = None if labels is None else labels[rows]
                scores[layer.name] = self._scores(layer, out, targets)
            if meta is not None:
                pp._fit_layer(scope, len(layers), meta, out, targets)
            self.layers_ = layers
            self.meta_ = None if meta is None else meta.fitted_["meta"][1]
            if self.scorer is not None:
                self.scores_ = scores

        return scheduler, job, len(layers) + (meta is not None)

    def _meta_layer(self):
        """The meta estimator as a one-fit layer (a clone), or None."""
        if self.meta_estimator is None:
            return None
        check_estimator(
            self.meta_estimator, "meta", estimator=type(self).__name__, argument="meta_estimator"
        )
        return Layer([("meta", clone(self.meta_estimator, safe=False))], FullIndex(), name="meta")

    def _layer(self, spec: LayerSpec, i: int, kind=None) -> Layer:
        """The backend layer of ``spec`` (estimators cloned: the params stay unfitted).

        ``kind`` is the ensemble's (``"classifier"``...): an int number of folds (and a
        blend or subsemble split) is stratified for a classifier, as ``check_cv`` does;
        without a meta estimator, when the layer itself classifies.
        """
        name = f"layer-{i}"
        if spec.kind not in KINDS:
            raise InputError(f"layer kind must be one of {KINDS}, got {spec.kind!r}", layer=name)
        try:
            estimators = clone(spec.estimators, safe=False)
            stratify = kind == "classifier" or (kind is None and _classifies(spec))
            indexer = (
                as_indexer(spec.indexer, what="indexer", classifier=stratify)
                if spec.indexer is not None
                else self._default_indexer(spec.kind, stratify)
            )
        except InputError as err:
            raise err.locate(layer=name)
        except (TypeError, ValueError) as exc:
            raise InputError(str(exc), layer=name) from None
        if spec.kind == "subsemble":
            from .subsemble import subsemble_layer  # (subsemble builds on this module)

            return subsemble_layer(
                estimators,
                indexer,
                clone(spec.preprocessing, safe=False),
                spec.proba,
                spec.propagate_features,
                name,
            )
        return Layer(
            estimators,
            indexer,
            clone(spec.preprocessing, safe=False),
            proba=spec.proba,
            propagate_features=spec.propagate_features,
            name=name,
        )

    def _default_indexer(self, kind, stratify=False):
        """The split of a ``kind`` layer from the ensemble's settings."""
        if kind == "blend":
            return BlendIndex(self.test_size, stratify=stratify)
        if kind == "full":
            return FullIndex()
        if kind == "subsemble":
            from .subsemble import SubsetIndex

            return SubsetIndex(
                self.partitions, self.folds, self.shuffle, self.random_state, stratify=stratify
            )
        return as_indexer(self.folds, self.shuffle, self.random_state, classifier=stratify)

    def _scores(self, layer, out, targets) -> dict:
        """``{estimator: scorer(y, its out-of-fold predictions)}`` when a scorer is set."""
        if self.scorer is None:
            return {}
        k, per = len(layer.propagate_features), out.shape[1] - len(layer.propagate_features)
        per //= len(layer.estimators())
        decode = (
            self.classes_
            if hasattr(self, "classes_") and self._estimator_type == "classifier"
            else None
        )
        scores = {}
        for j, (name, _) in enumerate(layer.estimators()):
            cols = out[:, k + j * per : k + (j + 1) * per]
            pred = cols.argmax(1) if layer.proba else cols[:, 0]
            if decode is not None:
                scores[name] = float(
                    self.scorer(decode[targets], decode[np.rint(pred).astype(int)])
                )
            else:
                scores[name] = float(self.scorer(targets, pred))
        return scores

    # -- predict -----------------------------------------------------------------------------

    def _check_fitted(self) -> None:
        """A labkit ``NotFittedError`` (also scikit-learn's) naming the estimator, unless fitted."""
        try:
            check_is_fitted(self, "layers_")
        except SklearnNotFittedError as exc:
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted yet: call fit(X, y) before "
                "transform, predict or score",
                estimator=type(self).__name__,
            ) from exc

    def transform(self, X):
        """The last layer's output for ``X`` (the meta estimator's input); dense."""
        self._check_fitted()
        X, _, _ = check_inputs(
            X,
            steps=self.layers_[0].first_steps(),
            owner=self,
            reset=False,
            estimator=type(self).__name__,
        )
        return predict_layers(self.layers_, X, checked=True)

    def fit_transform(self, X, y, **fit_params):
        """``fit(X, y)`` then ``transform(X)``: the final fits' output, as scikit-learn's
        stacking gives (not the out-of-fold predictions the meta estimator learnt on)."""
        return self.fit(X, y, **fit_params).transform(X)

    def _meta(self):
        self._check_fitted()
        if self.meta_ is None:
            raise InputError(
                "no meta estimator: add one with .add_meta(estimator), or use transform()",
                estimator=type(self).__name__,
            )
        return self.meta_

    def predict(self, X):
        """The meta estimator's predictions (class labels for a classifier)."""
        meta = self._meta()
        pred = meta.predict(self.transform(X))
        if self._estimator_type == "classifier":
            return self.classes_[np.asarray(pred).astype(int)]
        return pred

    def _has_proba(self):
        return self._estimator_type == "classifier" and hasattr(
            self.meta_estimator, "predict_proba"
        )

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


def _fitted(estimator) -> list[str]:
    """Names of the fitted attributes (``name_``, scikit-learn's convention) set on it."""
    return [k for k in vars(estimator) if k.endswith("_") and not k.startswith("__")]


def _classifies(spec: LayerSpec) -> bool:
    """Whether a layer spec outputs probabilities or holds only classifiers."""
    named = spec.named()
    return bool(spec.proba) or (bool(named) and all(is_classifier_like(e) for _, e in named))


def _plain_params(estimator) -> dict:
    """The estimator's parameters that are plain values (numbers, strings, None), deep."""
    try:
        params = estimator.get_params(deep=True)
    except Exception:  # a view's detail must never fail a fit
        return {}
    return {k: v for k, v in params.items() if v is None or isinstance(v, (bool, int, float, str))}
