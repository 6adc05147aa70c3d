"""A layer: estimators (per preprocessing case) fitted by an indexer; its output columns.

Estimators are given as a list of ``(name, estimator)`` pairs (or bare
estimators, named after their class), or as a dict ``{case: [...]}`` with
``preprocessing={case: [transformer, ...]}``: each case's transformers are
fitted on an estimator's training rows before it.  Every estimator gives one
output column (``proba=False``) or one per class (``proba=True``); columns of
``propagate_features`` (input columns copied through) come first.

Examples
--------
>>> from sklearn.linear_model import LinearRegression, Ridge
>>> layer = Layer([LinearRegression(), ("ridge", Ridge())], FoldIndex(3))
>>> [name for name, _ in layer.estimators()]
['linearregression', 'ridge']
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from .indexers import BlendIndex, FoldIndex, FullIndex
from .splitters import as_indexer

__all__ = ["Layer", "FullIndex", "FoldIndex", "BlendIndex"]


class Layer:
    """Estimators fitted in parallel by an indexer.

    Parameters
    ----------
    estimators : list or dict
        ``[(name, estimator), ...]``, or ``{case: [(name, estimator), ...]}``.
    indexer : FullIndex, FoldIndex, BlendIndex, int or scikit-learn splitter
        How rows are split (default ``FoldIndex(2)``); an int k is ``FoldIndex(k)``,
        a splitter (``KFold``, ``StratifiedKFold``, ``GroupKFold``...) gives its folds.
    preprocessing : dict, optional
        ``{case: [transformer, ...]}`` fitted before each estimator of the case.
    proba : bool
        Output ``predict_proba`` columns (classes) instead of ``predict``.
    propagate_features : list of int, optional
        Input columns copied into the output (first).
    name : str, optional
        Used in errors, events and ``stack(..., return_preds=[names])``.
    """

    def __init__(self, estimators, indexer=None, preprocessing=None,
                 proba: bool = False, propagate_features=None, name: str | None = None):
        try:
            self.indexer = FoldIndex(2) if indexer is None else as_indexer(indexer,
                                                                           what="indexer")
        except InputError as err:
            raise err.locate(layer=name)
        self.name = name or "layer"
        self.cases = _cases(estimators, self.name)
        self.preprocessing = _preprocessing(preprocessing, self.cases, self.name)
        self.proba = proba
        self.propagate_features = list(propagate_features or [])
        #: ``{estimator name: partition}``: a subsemble's estimators fit one partition's rows.
        self.partition_of: dict[str, int] = {}
        self.fitted_: dict[str, object] | None = None
        self.classes_: np.ndarray | None = None

    def estimators(self) -> list[tuple[str, object]]:
        """Every ``(name, estimator)``, cases in order; names are unique in the layer."""
        return [(name, est) for case in self.cases.values() for name, est in case]

    def case_of(self, name: str):
        """The preprocessing case of estimator ``name``."""
        for case, items in self.cases.items():
            if any(n == name for n, _ in items):
                return case
        raise KeyError(name)

    def n_columns(self, n_classes: int | None = None) -> int:
        """Output columns: propagated features, then one (or one per class) an estimator."""
        per = n_classes if self.proba else 1
        return len(self.propagate_features) + per * len(self.estimators())

    def __repr__(self):
        names = ", ".join(n for n, _ in self.estimators())
        return f"<Layer {self.name!r}: {names}; {self.indexer!r}>"


def _cases(estimators, layer: str) -> dict:
    """``{case: [(name, estimator)]}``, checked; the case is None for a plain list."""
    if isinstance(estimators, dict):
        cases = {case: _named(items, layer) for case, items in estimators.items()}
    else:
        cases = {None: _named(estimators, layer)}
    names = [n for items in cases.values() for n, _ in items]
    if not names:
        raise InputError("a layer needs at least one estimator", layer=layer)
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InputError(f"duplicate estimator name(s) {duplicates}: give each a name with "
                         f"(name, estimator) pairs", layer=layer)
    return cases


def _named(items, layer: str) -> list[tuple[str, object]]:
    """``[(name, estimator)]`` from pairs or bare estimators; each must fit and predict."""
    if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
        raise InputError(f"estimators must be a list, got {items!r}", layer=layer)
    out = []
    for item in items:
        name, est = item if isinstance(item, tuple) and len(item) == 2 else \
            (type(item).__name__.lower(), item)
        missing = [m for m in ("fit", "predict") if not callable(getattr(est, m, None))]
        if missing:
            raise InputError(f"estimator {name!r} has no {' or '.join(missing)}()",
                             layer=layer, estimator=name)
        out.append((str(name), est))
    return out


def _preprocessing(preprocessing, cases: dict, layer: str) -> dict:
    """``{case: [transformers]}``, checked against the cases."""
    preprocessing = dict(preprocessing or {})
    unknown = [c for c in preprocessing if c not in cases]
    if unknown:
        raise InputError(f"preprocessing case(s) {unknown} have no estimators "
                         f"(cases: {list(cases)})", layer=layer)
    for case, steps in preprocessing.items():
        for step in steps:
            if not callable(getattr(step, "fit", None)) or \
                    not callable(getattr(step, "transform", None)):
                raise InputError(f"preprocessing step {step!r} of case {case!r} has no "
                                 "fit() or transform()", layer=layer)
    return preprocessing
