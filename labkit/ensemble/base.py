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
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, clone, is_classifier, is_regressor
from sklearn.exceptions import NotFittedError as SklearnNotFittedError
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils import ClassifierTags, RegressorTags, TransformerTags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ..constraints import Satisfies, check_argument
from ..errors import InputError, NotFittedError
from ..runs import start
from .assembly import build_layer, layer_scores, meta_layer
from .cache import as_scheduler
from .indexers import BlendIndex, FullIndex
from .layer import Layer
from .layerspec import LayerSpec, case_pairs
from .processing import ParallelProcessing, predict_layers
from .splitters import as_indexer
from .subsets import SubsetIndex
from .validation import check_inputs, refuses_nan, takes_sparse

__all__ = ["BaseEnsemble"]

#: What ``scorer`` may be.
SCORER_RULE = [Satisfies(callable, "a callable scorer(y_true, y_pred)"), None]

#: scikit-learn's ``set_output`` state, which a clone carries over (as ``sklearn.base.clone``).
_OUTPUT_CONFIG = "_sklearn_output_config"


class BaseEnsemble(BaseEstimator):
    """Layers of estimators and a meta estimator, fitted on a labkit scheduler.

    Subclasses define ``__init__`` (their parameters) and ``_kind`` (the kind
    of layer ``.add`` records).  See :class:`~labkit.ensemble.SuperLearner`.
    """

    _kind = "stack"

    # the parameters every ensemble has (set by the subclasses' __init__)
    layers: Any  # a list of LayerSpec once checked at fit
    meta_estimator: Any
    scheduler: Any
    scorer: Any
    cache: str

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
        if hasattr(self, _OUTPUT_CONFIG):
            setattr(new, _OUTPUT_CONFIG, copy.deepcopy(getattr(self, _OUTPUT_CONFIG)))
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

    def _first_steps(self) -> list[tuple[str, Any]]:
        """``(name, what sees X first)`` in the first layer's spec; nothing for junk."""
        specs = self._specs()
        if not specs:
            return []
        spec = specs[0][1]
        pre = spec.preprocessing if isinstance(spec.preprocessing, dict) else {}
        try:
            return [
                (name, (list(pre.get(case) or []) or [est])[0])
                for case, items in case_pairs(spec.estimators)
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
        scheduler, job, n_nodes = self._fit_job(X, y, groups, twin)

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

    def _fit_job(self, X, y, groups, into: BaseEnsemble) -> tuple[Any, Callable[[Any], None], int]:
        """Check everything and build the layers; ``(scheduler, job fitting them, nodes)``.

        ``into`` is the unfitted twin the fit goes into: it gets ``n_features_in_``
        and ``classes_`` now, ``layers_``, ``meta_`` and ``scores_`` from the job.
        """
        name = type(self).__name__
        self._check_params(name)
        kind = self._estimator_type
        meta = meta_layer(self.meta_estimator, name)
        layers = [self._layer(s, i, kind) for i, s in enumerate(self._layer_specs(), 1)]
        X, y, groups = check_inputs(
            X,
            y,
            groups,
            steps=layers[0].first_steps(),
            classifier=kind == "classifier",
            needs_y=kind is not None,
            owner=into,
            min_rows=2,
            y_numeric=kind == "regressor",
            estimator=name,
        )
        codes = None
        if kind == "classifier":
            into.classes_, y = np.unique(y, return_inverse=True)  # labels as 0..K-1
            codes = np.arange(len(into.classes_))  # every proba layer's columns
        try:
            scheduler = as_scheduler(self.scheduler)  # None: a serial, in-process LocalScheduler
            pp = ParallelProcessing(scheduler, cache=self.cache)
        except InputError as err:
            err.locate(estimator=name)
            raise
        decode = into.classes_ if kind == "classifier" else None

        def job(scope):
            out, targets, labels, scores = X, y, groups, {}
            for i, layer in enumerate(layers):
                out, rows = pp.fit_layer(scope, i, layer, out, targets, labels, codes)
                targets = None if targets is None else targets[rows]  # a blend: fewer rows
                labels = None if labels is None else labels[rows]
                if self.scorer is not None:
                    scores[layer.name] = layer_scores(self.scorer, layer, out, targets, decode)
            if meta is not None:
                pp.fit_layer(scope, len(layers), meta, out, targets)
            into.layers_ = layers
            into.meta_ = None if meta is None else meta.final_estimator("meta")
            if self.scorer is not None:
                into.scores_ = scores

        return scheduler, job, len(layers) + (meta is not None)

    def _check_params(self, name: str) -> None:
        """An InputError naming the parameter unless ``layers`` and ``scorer`` can fit."""
        specs = self._layer_specs()
        if not specs or len(specs) != len(self.layers):
            raise InputError(
                "an ensemble needs layers: add them with .add(estimators) "
                f"(layers={self.layers!r})",
                estimator=name,
                argument="layers",
            )
        check_argument("scorer", self.scorer, SCORER_RULE, estimator=name)

    def _layer_specs(self) -> list[LayerSpec]:
        """The layer specs, in order."""
        return [s for _, s in self._specs()]

    def _layer(self, spec: LayerSpec, i: int, kind: str | None = None) -> Layer:
        """The backend layer of ``spec`` (see :func:`~.assembly.build_layer`)."""
        return build_layer(spec, i, kind, self._default_indexer)

    def _default_indexer(self, kind, stratify=False):
        """The split of a ``kind`` layer from the ensemble's settings."""
        if kind == "blend":
            return BlendIndex(self.test_size, stratify=stratify)
        if kind == "full":
            return FullIndex()
        if kind == "subsemble":
            return SubsetIndex(
                self.partitions, self.folds, self.shuffle, self.random_state, stratify=stratify
            )
        return as_indexer(self.folds, self.shuffle, self.random_state, classifier=stratify)

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


def _plain_params(estimator) -> dict:
    """The estimator's parameters that are plain values (numbers, strings, None), deep."""
    try:
        params = estimator.get_params(deep=True)
    except Exception:  # a view's detail must never fail a fit
        return {}
    return {k: v for k, v in params.items() if v is None or isinstance(v, (bool, int, float, str))}
