"""A layer: estimators (per preprocessing case) fitted by an indexer; its output columns.

Estimators are given as a list of ``(name, estimator)`` pairs (or bare
estimators, named after their class), or as a dict ``{case: [...]}`` with
``preprocessing={case: [transformer, ...]}``: each case's transformers are
fitted on an estimator's training rows before it.  Every estimator gives one
output column (``proba=False``) or one per class (``proba=True``); columns of
``propagate_features`` (input columns copied through) come first.

A layer *classifies* when ``proba=True`` or all its estimators are
classifiers; then an int number of folds (and the default, 2) is stratified
by class, as scikit-learn's ``check_cv`` does for a classifier.

Examples
--------
>>> from sklearn.linear_model import LinearRegression, Ridge
>>> layer = Layer([LinearRegression(), ("ridge", Ridge())], FoldIndex(3))
>>> [name for name, _ in layer.estimators()]
['linearregression', 'ridge']
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError
from .indexers import BlendIndex, FoldIndex, FullIndex
from .layerspec import default_name
from .splitters import as_indexer
from .validation import is_classifier_like

__all__ = ["Layer", "FullIndex", "FoldIndex", "BlendIndex", "named_estimators"]


class Layer:
    """Estimators fitted in parallel by an indexer.

    Parameters
    ----------
    estimators : list or dict
        ``[(name, estimator), ...]``, or ``{case: [(name, estimator), ...]}``.
    indexer : FullIndex, FoldIndex, BlendIndex, int or scikit-learn splitter
        How rows are split (default 2 folds); an int k is ``FoldIndex(k)``,
        stratified when the layer classifies (:attr:`classifies`); a splitter
        (``KFold``, ``StratifiedKFold``, ``GroupKFold``...) gives its folds.
    preprocessing : dict, optional
        ``{case: [transformer, ...]}`` fitted before each estimator of the case.
    proba : bool
        Output ``predict_proba`` columns (classes) instead of ``predict``.
    propagate_features : list of int, optional
        Input columns copied into the output (first).
    name : str, optional
        Used in errors, events and ``stack(..., return_preds=[names])``.
    """

    def __init__(
        self,
        estimators,
        indexer=None,
        preprocessing=None,
        proba: bool = False,
        propagate_features=None,
        name: str | None = None,
    ):
        self.name = name or "layer"
        self.cases = _cases(estimators, self.name)
        self.preprocessing = _preprocessing(preprocessing, self.cases, self.name)
        self.proba = proba
        try:
            self.indexer = as_indexer(
                2 if indexer is None else indexer, what="indexer", classifier=self.classifies
            )
        except InputError as err:
            err.locate(layer=self.name)
            raise
        self.propagate_features = _columns(propagate_features, self.name)
        #: ``{estimator name: partition}``: a subsemble's estimators fit one partition's rows.
        self.partition_of: dict[str, int] = {}
        self.fitted_: dict[str, Any] | None = None
        self.classes_: np.ndarray | None = None

    def estimators(self) -> list[tuple[str, Any]]:
        """Every ``(name, estimator)``, cases in order; names are unique in the layer."""
        return [(name, est) for case in self.cases.values() for name, est in case]

    @property
    def classifies(self) -> bool:
        """Whether the layer outputs probabilities or all its estimators are classifiers."""
        return bool(self.proba) or all(is_classifier_like(est) for _, est in self.estimators())

    def first_steps(self) -> list[tuple[str, Any]]:
        """``(name, what sees X first)``: each estimator, or its case's first transformer."""
        return [
            (name, (self.preprocessing.get(self.case_of(name)) or [est])[0])
            for name, est in self.estimators()
        ]

    def case_of(self, name: str):
        """The preprocessing case of estimator ``name``."""
        for case, items in self.cases.items():
            if any(n == name for n, _ in items):
                return case
        raise KeyError(name)

    def n_columns(self, n_classes: int | None = None) -> int:
        """Output columns: propagated features, then one (or one per class) an estimator."""
        if not self.proba:
            per = 1
        elif n_classes is None:
            raise InputError("a proba layer's columns need its number of classes", layer=self.name)
        else:
            per = n_classes
        return len(self.propagate_features) + per * len(self.estimators())

    def final_estimator(self, name: str) -> Any:
        """The estimator ``name`` of the final fit (its chain's last step), once fitted."""
        if self.fitted_ is None:
            raise InputError("the layer is not fitted yet", layer=self.name)
        return self.fitted_[name][1]

    def __repr__(self):
        names = ", ".join(n for n, _ in self.estimators())
        return f"<Layer {self.name!r}: {names}; {self.indexer!r}>"


def _cases(estimators, layer: str) -> dict:
    """``{case: [(name, estimator)]}``, checked; the case is None for a plain list."""
    if isinstance(estimators, dict):
        cases = {case: named_estimators(items, layer) for case, items in estimators.items()}
    else:
        cases = {None: named_estimators(estimators, layer)}
    names = [n for items in cases.values() for n, _ in items]
    if not names:
        raise InputError("a layer needs at least one estimator", layer=layer)
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InputError(
            f"duplicate estimator name(s) {duplicates}: give each a name with "
            f"(name, estimator) pairs",
            layer=layer,
        )
    return cases


def named_estimators(items, layer: str) -> list[tuple[str, Any]]:
    """``[(name, estimator)]`` from pairs or bare estimators; each must fit and predict."""
    if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
        raise InputError(f"estimators must be a list, got {items!r}", layer=layer)
    out = []
    for item in items:
        name, est = (
            item if isinstance(item, tuple) and len(item) == 2 else (default_name(item), item)
        )
        check_estimator(est, str(name), layer=layer, estimator=name)
        out.append((str(name), est))
    return out


def check_estimator(est, name: str, **where) -> None:
    """``est`` is an estimator object with ``fit()`` and ``predict()``; else an InputError."""
    if isinstance(est, type):
        # The class itself has fit and predict, and fails only inside a task.
        raise InputError(
            f"estimator {name!r} is the class {est.__name__}, not an estimator: "
            f"pass an instance, {est.__name__}()",
            **where,
        )
    missing = [m for m in ("fit", "predict") if not callable(getattr(est, m, None))]
    if missing:
        raise InputError(f"estimator {name!r} has no {' or '.join(missing)}()", **where)


def _columns(propagate_features, layer: str) -> list[int]:
    """``propagate_features`` as a list of column indices (ints)."""
    if propagate_features is None:
        return []
    if isinstance(propagate_features, (str, bytes)) or not hasattr(propagate_features, "__iter__"):
        raise InputError(
            f"propagate_features must be a list of column indices, got {propagate_features!r}",
            layer=layer,
            argument="propagate_features",
        )
    columns = list(propagate_features)
    bad = [
        c
        for c in columns
        if isinstance(c, (bool, np.bool_)) or not isinstance(c, (int, np.integer))
    ]
    if bad:
        raise InputError(
            f"propagate_features must be column indices (ints), got {bad!r}",
            layer=layer,
            argument="propagate_features",
        )
    return [int(c) for c in columns]


def _preprocessing(preprocessing, cases: dict, layer: str) -> dict:
    """``{case: [transformers]}``, checked against the cases."""
    if preprocessing is not None and not isinstance(preprocessing, dict):
        raise InputError(
            f"preprocessing must be a dict {{case: [transformer, ...]}}, got {preprocessing!r}",
            layer=layer,
            argument="preprocessing",
        )
    preprocessing = dict(preprocessing or {})
    unknown = [c for c in preprocessing if c not in cases]
    if unknown:
        raise InputError(
            f"preprocessing case(s) {unknown} have no estimators (cases: {list(cases)})",
            layer=layer,
            argument="preprocessing",
        )
    for case, steps in preprocessing.items():
        if isinstance(steps, (str, bytes)) or not hasattr(steps, "__iter__"):
            raise InputError(
                f"preprocessing[{case!r}] must be a list of transformers, got {steps!r}",
                layer=layer,
                argument="preprocessing",
            )
        preprocessing[case] = steps = list(steps)
        for step in steps:
            if (
                isinstance(step, type)
                or not callable(getattr(step, "fit", None))
                or not callable(getattr(step, "transform", None))
            ):
                raise InputError(
                    f"preprocessing step {step!r} of case {case!r} is not a "
                    "transformer object with fit() and transform()",
                    layer=layer,
                    argument="preprocessing",
                )
    return preprocessing
