"""Fits of estimator chains on folds: a layer's task callable, and a phase of tasks as a batch.

A task fits one ``(estimator, fold)`` pair (:class:`FitCallable`), and
:func:`run_phase` runs a list of such tasks (or ParallelEvaluation's) as one
batch over inputs sent once.  (Named for what it holds: labkit has scheduler
tasks and experiment tasks elsewhere.)
"""

from __future__ import annotations

import copy
import time

import numpy as np

from ..errors import USER_EXITS, InputError, LabkitError, located
from ..events import PhaseFinished, PhaseStarted, TaskInfo
from ..scheduling import TaskCallable
from .cache import open_inputs
from .validation import n_rows

__all__ = ["FitCallable", "FINAL", "predict_columns", "class_columns", "run_phase"]

#: The fold index of the final fit (on every row, kept for new data).
FINAL = -1


class FitCallable(TaskCallable):
    """Fits ``(estimator, fold)`` pairs of one layer; shipped once with the inputs.

    A task's data is ``(name, fold)``; its result ``(name, fold, predictions,
    fitted or None, seconds)``: predictions of the fold's test rows, and the
    fitted pipeline when it is the one kept for new data.
    """

    def __init__(self, layer, inputs, folds, classes, restrict=None):
        self.inputs, self.folds, self.classes = inputs, folds, classes
        self.restrict = restrict or {}  # {name: rows}: a subsemble's partition of each fit
        self.proba = layer.proba
        self.steps = {
            name: (layer.preprocessing.get(layer.case_of(name), []), est)
            for name, est in layer.estimators()
        }
        self.keep = layer.indexer.single_fit  # the one fold's fit serves new data

    def parts(self) -> dict:
        """The layer's estimators and their transformers, by name (for messages)."""
        found: dict = {}
        for name, (transformers, estimator) in self.steps.items():
            for i, transformer in enumerate(transformers):
                found[f"transformer {i} ({type(transformer).__name__}) before {name!r}"] = (
                    transformer
                )
            found[f"estimator {name!r} ({type(estimator).__name__})"] = estimator
        return found

    def __call__(self, data):
        name, fold = data
        try:
            return self._run(name, fold)
        except USER_EXITS as exc:  # sys.exit() in an estimator fails its fit only
            raise located(exc, estimator=name, fold=_fold(fold)) from None

    def _run(self, name, fold):
        transformers, estimator = self.steps[name]
        X, y = self.inputs.X, self.inputs.y
        if fold == FINAL:
            train, test = self.restrict.get(name, np.arange(n_rows(X))), None
        else:
            train, test = self.folds[fold]
            if name in self.restrict:  # fit on the fold's rows of this estimator's partition
                train = np.intersect1d(train, self.restrict[name], assume_unique=True)
        start = time.perf_counter()
        fitted = _fit(
            [copy.deepcopy(t) for t in transformers],
            copy.deepcopy(estimator),
            X[train],
            None if y is None else y[train],
        )
        preds = None if test is None else predict_columns(fitted, X[test], self.proba, self.classes)
        keep = fold == FINAL or self.keep
        return name, fold, preds, fitted if keep else None, time.perf_counter() - start


def _fold(fold: int):
    """A fold as errors name it."""
    return "final" if fold == FINAL else fold


def _fit(transformers, estimator, X, y):
    """Fit the transformers then the estimator on ``X``; the fitted chain."""
    for t in transformers:
        X = t.fit(X, y).transform(X)
    estimator.fit(X, y)
    return transformers, estimator


def predict_columns(fitted, X, proba: bool, classes) -> np.ndarray:
    """The columns one fitted chain contributes: predictions, or class probabilities.

    Probabilities fill one column per class of ``classes`` (the layer's, or the
    ensemble's), whatever classes the fit saw: a fold whose training rows lack
    a class leaves that class's column 0, the others in their places.
    """
    transformers, estimator = fitted
    for t in transformers:
        X = t.transform(X)
    n = n_rows(X)
    if not proba:
        return np.asarray(estimator.predict(X), dtype=float).reshape(n, -1)
    if not callable(getattr(estimator, "predict_proba", None)):
        raise InputError(f"{type(estimator).__name__} has no predict_proba() (proba=True)")
    p = np.asarray(estimator.predict_proba(X), dtype=float).reshape(n, -1)
    out = np.zeros((n, len(classes)))
    out[:, class_columns(classes, getattr(estimator, "classes_", None), p.shape[1])] = p
    return out


def class_columns(classes: np.ndarray, seen, n_columns: int) -> np.ndarray:
    """The column of each of ``seen`` (a fit's ``classes_``) among the sorted ``classes``."""
    if seen is None:  # no classes_: its columns must be the classes themselves
        if n_columns != len(classes):
            raise InputError(
                f"predict_proba gave {n_columns} columns for {len(classes)} "
                "classes, and the estimator has no classes_ to place them"
            )
        return np.arange(len(classes))
    seen = np.asarray(seen)
    at = np.minimum(np.searchsorted(classes, seen), len(classes) - 1)
    unknown = seen[classes[at] != seen]
    if len(unknown) or len(seen) != n_columns:
        # searchsorted would silently put an unknown class in a neighbour's column
        raise InputError(
            f"the estimator's classes_ {seen.tolist()} are not among the "
            f"classes of y {np.asarray(classes).tolist()} or do not match its "
            f"{n_columns} predict_proba columns"
        )
    return at


def run_phase(
    scope,
    scheduler,
    index: int,
    name: str,
    tasks: list,
    make_callable,
    inputs: tuple,
    where: dict | None = None,
    detail: str | None = None,
) -> list:
    """Run ``tasks`` as one batch over shared inputs: one phase on the board; the results.

    ``inputs`` is ``(X, y, mode, cache_dir)`` for :func:`~.cache.open_inputs`; the
    task callable is ``make_callable(opened_inputs)``, shipped once.  An error
    gains ``where`` and ends the phase as failed; the cache is removed either way.
    ``detail`` tells the views what the tasks are ("2 estimators × 5 folds").
    """
    s = scheduler
    s.emit(PhaseStarted(scope.id, index, name, 0, False, len(tasks), detail=detail))
    info = TaskInfo(scope.id, -1, -1, "train", index, name, 0)
    X, y, mode, cache_dir = inputs
    try:
        with (
            open_inputs(X, y, mode, cache_dir, client=getattr(s, "client", None)) as opened,
            s.batch(None, info, scope.control) as batch,
        ):
            batch.add_tasks(tasks, make_callable(opened), ready=True, check=scope.check)
            results = batch.get_results()
    except BaseException as exc:
        s.emit(PhaseFinished(scope.id, index, name, 0, len(tasks), ok=False))
        if where and isinstance(exc, LabkitError):
            exc.locate(**where)  # the same error, now located
        raise
    s.emit(PhaseFinished(scope.id, index, name, 0, len(tasks)))
    return results
