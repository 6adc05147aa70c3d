"""Cross-validated scores of many estimators and parameter sets, in parallel.

Each ``(estimator, parameter set, fold)`` is one task on the scheduler; the
inputs travel once (see :mod:`.cache`).  The result is a :class:`Table`: one
row per estimator and parameter set with the mean and spread of its scores
and its mean fit time, best first.

Examples
--------
>>> import numpy as np
>>> from sklearn.linear_model import Ridge
>>> X = np.random.default_rng(0).normal(size=(60, 3)); y = X @ [1.0, 2.0, 3.0]
>>> table = ParallelEvaluation().evaluate([Ridge()], {"ridge": {"alpha": [0.1, 100.0]}},
...                                       X, y, cv=3)
>>> [row["params"] for row in table.rows]
[{'alpha': 0.1}, {'alpha': 100.0}]
"""

from __future__ import annotations

import copy
import itertools
import time
from typing import Any

import numpy as np

from ..errors import InputError, located
from ..runs import start
from ..scheduling import TaskCallable
from .cache import as_scheduler, choose_mode
from .fold_fits import run_phase
from .layer import named_estimators
from .splitters import as_indexer
from .validation import check_inputs, is_classifier_like, n_rows

__all__ = ["ParallelEvaluation", "Table"]


class ScoreCallable(TaskCallable):
    """Fits one estimator with one parameter set on one fold's training rows; scores the rest.

    ``folds[c]`` are candidate ``c``'s folds (an int ``cv`` stratifies a classifier's only).
    """

    def __init__(self, candidates, inputs, folds, scoring):
        self.candidates, self.inputs, self.folds, self.scoring = candidates, inputs, folds, scoring

    def parts(self) -> dict:
        """The candidates' estimators and the scoring, by name (for messages)."""
        found: dict = {
            f"estimator {name!r} ({type(estimator).__name__})": estimator
            for name, estimator, _ in self.candidates
        }
        if self.scoring is not None and not isinstance(self.scoring, str):
            found[f"scoring {getattr(self.scoring, '__qualname__', self.scoring)!r}"] = self.scoring
        return found

    def __call__(self, data):
        c, fold = data
        name, estimator, params = self.candidates[c]
        try:
            X, y = self.inputs.X, self.inputs.y
            train, test = self.folds[c][fold]
            model = copy.deepcopy(estimator).set_params(**params)
            start = time.perf_counter()
            model.fit(X[train], y[train])
            seconds = time.perf_counter() - start
            if self.scoring is None:
                score = model.score(X[test], y[test])
            elif isinstance(self.scoring, str):  # a scikit-learn scorer name
                from sklearn.metrics import get_scorer

                score = get_scorer(self.scoring)(model, X[test], y[test])
            elif is_scorer(self.scoring):  # make_scorer(...): (estimator, X, y)
                score = self.scoring(model, X[test], y[test])
            else:
                score = self.scoring(y[test], model.predict(X[test]))
            return c, fold, float(score), seconds
        except Exception as exc:
            raise located(exc, estimator=name, params=params, fold=fold) from None


class Table:
    """Scores by estimator and parameter set; ``rows`` are dicts, best first."""

    columns = ("estimator", "params", "mean", "std", "fit_time")

    def __init__(self, rows: list[dict]):
        self.rows = sorted(rows, key=lambda r: -r["mean"])

    def best(self) -> dict:
        """The row with the highest mean score."""
        return self.rows[0]

    def to_pandas(self):
        """The table as a pandas DataFrame (needs pandas)."""
        import pandas as pd

        return pd.DataFrame([{c: r[c] for c in self.columns} for r in self.rows])

    def __len__(self):
        return len(self.rows)

    def __repr__(self):
        lines = [f"{'estimator':<20} {'params':<30} {'mean':>8} {'std':>8} {'fit_time':>9}"]
        lines += [
            f"{r['estimator']:<20} {str(r['params']):<30} {r['mean']:8.4f} "
            f"{r['std']:8.4f} {r['fit_time']:9.4f}"
            for r in self.rows
        ]
        return "\n".join(lines)

    def _repr_html_(self):
        import html

        head = "".join(f"<th>{c}</th>" for c in self.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(_cell(r[c]))}</td>" for c in self.columns) + "</tr>"
            for r in self.rows
        )
        return f'<table class="labkit-evaluation"><tr>{head}</tr>{body}</table>'


def _cell(value) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


class ParallelEvaluation:
    """Cross-validates estimators over parameter grids on a scheduler.

    Parameters
    ----------
    scheduler : labkit Scheduler, optional
        Where tasks run (a :class:`~labkit.LocalScheduler` by default).
    cache, cache_dir
        As for :class:`~labkit.ensemble.ParallelProcessing`.
    """

    def __init__(self, scheduler=None, cache: str = "auto", cache_dir: str | None = None):
        self.scheduler = as_scheduler(scheduler)
        self.mode, self.cache_dir = choose_mode(self.scheduler, cache), cache_dir

    def evaluate(
        self, estimators, param_grid, X, y, cv=3, scoring=None, wait: bool = True, groups=None
    ):
        """Scores of every estimator × parameter set × fold.

        Parameters
        ----------
        estimators : list
            ``[(name, estimator), ...]`` or bare estimators.
        param_grid : dict
            ``{name: {param: [values]}}`` (every combination) or
            ``{name: [params, ...]}``; an estimator without an entry is scored
            with its own parameters.
        cv : int, FoldIndex or scikit-learn splitter
            Folds: an int k as scikit-learn's ``cross_val_score`` takes it
            (``StratifiedKFold(k)`` for a classifier and class labels ``y``,
            ``KFold(k)`` otherwise); a ``FoldIndex``, or ``KFold``,
            ``StratifiedKFold``, ``GroupKFold`` with ``groups``...
        scoring : callable or str, optional
            ``scoring(y_true, y_pred)``, a scikit-learn scorer name such as
            ``"neg_mean_squared_error"``, or a scikit-learn scorer
            (``make_scorer(...)``, called as ``scorer(estimator, X, y)``); the
            estimator's ``score`` by default.
        wait : bool
            ``False`` returns a :class:`~labkit.Run` whose ``result()`` is the table.
        groups : array-like, optional
            Group labels for a grouped splitter.

        Returns
        -------
        Table
        """
        named = _check_estimators(estimators, param_grid)
        classifier = {n: is_classifier_like(est) for n, est in named}
        X, y, groups = check_inputs(
            X, y, groups, steps=named, needs_y=True, classifier=any(classifier.values())
        )
        candidates = [
            (n, est, p) for n, est in named for p in _expand((param_grid or {}).get(n), n)
        ]
        _check_candidates(candidates)
        _check_scoring(scoring)
        split = {kind: _folds(cv, kind, X, y, groups) for kind in set(classifier.values())}
        folds = [split[classifier[n]] for n, _, _ in candidates]

        def job(scope):
            scores = self._scores(scope, candidates, folds, X, y, scoring)
            return Table([_row(candidates[c], s) for c, s in sorted(scores.items())])

        return start("evaluate", [self.scheduler], job, wait=wait)

    def _scores(self, scope, candidates, folds, X, y, scoring) -> dict:
        """``{candidate: [(score, seconds), ...]}`` from one batch (one phase on the board)."""
        pairs = [(c, f) for c in range(len(candidates)) for f in range(len(folds[c]))]
        results = run_phase(
            scope,
            self.scheduler,
            0,
            "evaluate",
            pairs,
            lambda inputs: ScoreCallable(candidates, inputs, folds, scoring),
            (X, y, self.mode, self.cache_dir),
            detail=f"{len(candidates)} candidates × {len(folds[0])} folds",
        )
        scores: dict = {}
        for c, _fold, score, seconds in sorted(results):  # fold order, whatever finished first
            scores.setdefault(c, []).append((score, seconds))
        return scores


def _check_estimators(estimators, param_grid) -> list[tuple[str, Any]]:
    """``estimators`` as ``(name, estimator)`` pairs, and ``param_grid`` keyed by their names."""
    named = named_estimators(estimators, "evaluation")
    if not named:
        raise InputError("evaluate needs at least one estimator", argument="estimators")
    names = [n for n, _ in named]
    if len(set(names)) != len(names):
        raise InputError(f"duplicate estimator names {names}: name them with pairs")
    if param_grid is not None and not isinstance(param_grid, dict):
        raise InputError(
            f"param_grid must be a dict {{estimator name: grid}}, got {param_grid!r}",
            argument="param_grid",
        )
    unknown = set(param_grid or {}) - set(names)
    if unknown:
        raise InputError(f"param_grid names unknown estimator(s) {sorted(unknown)}")
    return named


def _folds(cv, classifier: bool, X, y, groups) -> list:
    """The folds of ``cv`` for a classifier or not (as ``check_cv``); errors name ``cv``."""
    try:
        return as_indexer(cv, what="cv", classifier=classifier).folds(n_rows(X), y, groups)
    except InputError as err:
        err.locate(argument="cv")
        raise


def _expand(grid, name: str = "") -> list[dict]:
    """Parameter sets of one estimator's grid entry."""
    if grid is None:
        return [{}]
    if isinstance(grid, dict):
        for param, values in grid.items():
            if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
                raise InputError(
                    f"param_grid[{name!r}][{param!r}] must be a list of values "
                    f"to try, got {values!r}",
                    estimator=name,
                )
        keys = list(grid)
        return [
            dict(zip(keys, values, strict=True)) for values in itertools.product(*grid.values())
        ]
    try:
        return [dict(p) for p in grid]
    except (TypeError, ValueError):
        raise InputError(
            f"param_grid[{name!r}] must be a dict of lists or a list of dicts, got {grid!r}",
            estimator=name,
        ) from None


def _check_candidates(candidates) -> None:
    """Every parameter set names parameters its estimator has, checked before any fit."""
    for name, estimator, params in candidates:
        if not hasattr(estimator, "get_params"):
            continue
        known = estimator.get_params(deep=True)
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise InputError(
                f"{name} has no parameter(s) {unknown}; it has "
                f"{sorted(k for k in known if '__' not in k)}",
                estimator=name,
            )


def is_scorer(scoring) -> bool:
    """Whether ``scoring`` is a scikit-learn scorer object (``scorer(estimator, X, y)``)."""
    return type(scoring).__module__.startswith("sklearn.metrics") and callable(
        getattr(scoring, "_score_func", None)
    )


def _check_scoring(scoring) -> None:
    """``None``, a callable or a scikit-learn scorer name."""
    if scoring is None or callable(scoring):
        return
    if isinstance(scoring, str):
        from sklearn.metrics import get_scorer, get_scorer_names

        if scoring in get_scorer_names():
            get_scorer(scoring)
            return
    raise InputError(
        f"scoring must be a callable (y_true, y_pred) -> float or a scikit-learn "
        f"scorer name (sklearn.metrics.get_scorer_names()), got {scoring!r}"
    )


def _row(candidate, results) -> dict:
    name, _, params = candidate
    values = np.array([s for s, _ in results])
    return {
        "estimator": name,
        "params": params,
        "mean": float(values.mean()),
        "std": float(values.std()),
        "fit_time": float(np.mean([t for _, t in results])),
        "scores": values.tolist(),
    }
