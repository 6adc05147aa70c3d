"""ParallelEvaluation: the table equals cross-validating one fit at a time."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score
from sklearn.tree import DecisionTreeClassifier

import labkit as lk
from labkit.ensemble import FoldIndex, ParallelEvaluation

from .reference import Boom


def data():
    d = load_digits()
    return d.data[:400] / 16.0, d.target[:400]


def test_table_equals_sequential_cross_validation(scheduler):
    X, y = data()
    grid = {"logit": {"C": [0.1, 1.0]}, "tree": [{"max_depth": 3}, {"max_depth": 8}]}
    estimators = [("logit", LogisticRegression(max_iter=300)),
                  ("tree", DecisionTreeClassifier(random_state=0))]
    table = ParallelEvaluation(scheduler).evaluate(estimators, grid, X, y,
                                                   cv=FoldIndex(3, shuffle=True, random_state=1),
                                                   scoring=accuracy_score)
    assert len(table) == 4
    folds = FoldIndex(3, shuffle=True, random_state=1).folds(len(X))
    for row in table.rows:
        est = dict(estimators)[row["estimator"]]
        want = [accuracy_score(y[te], clone(est).set_params(**row["params"])
                               .fit(X[tr], y[tr]).predict(X[te])) for tr, te in folds]
        assert row["scores"] == pytest.approx(want)
        assert row["mean"] == pytest.approx(np.mean(want)) and row["std"] == pytest.approx(np.std(want))
        assert row["fit_time"] > 0
    means = [r["mean"] for r in table.rows]
    assert means == sorted(means, reverse=True) and table.best() is table.rows[0]
    assert "logit" in repr(table) and "<table" in table._repr_html_()


def test_evaluation_is_one_phase_on_the_board(local_scheduler, recorder):
    from labkit.views.trackers.tracker import Tracker
    tracker = Tracker()
    local_scheduler.subscribe(tracker)
    X, y = data()
    ParallelEvaluation(local_scheduler).evaluate([LogisticRegression(max_iter=200)],
                                                 {"logisticregression": {"C": [0.5, 1.0]}},
                                                 X, y, cv=3)
    (phase,) = tracker.snapshot().phases
    assert (phase.node_name, phase.done, phase.total, phase.ok) == ("evaluate", 6, 6, True)


def test_default_score_and_errors(local_scheduler):
    X, y = data()
    table = ParallelEvaluation(local_scheduler).evaluate([LogisticRegression(max_iter=300)],
                                                         None, X, y, cv=2)
    assert len(table) == 1 and 0.8 < table.best()["mean"] <= 1.0
    pe = ParallelEvaluation(local_scheduler)
    with pytest.raises(lk.InputError, match="unknown estimator"):
        pe.evaluate([LogisticRegression()], {"svm": {"C": [1]}}, X, y)
    with pytest.raises(lk.InputError, match="400 rows but y has 399"):
        pe.evaluate([LogisticRegression()], None, X, y[:-1])
    with pytest.raises(lk.TaskError, match="boom on purpose") as info:
        pe.evaluate([("boom", Boom())], None, X, y.astype(float), cv=2)
    assert info.value.where["estimator"] == "boom"
