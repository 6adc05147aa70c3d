"""A failed (re)fit leaves the ensemble as it was: classes, layers, meta, feature count."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.utils.validation import check_is_fitted

import labkit as lk
from labkit.ensemble import SuperLearner

X_IRIS, Y_IRIS = load_iris(return_X_y=True)
X2, LABELS2 = X_IRIS[:100], np.array(["a", "b"])[Y_IRIS[:100]]      # two classes, a and b
LABELS3 = np.array(["x", "y", "z"])[Y_IRIS]                          # three new labels


class TwoClassesOnly(ClassifierMixin, BaseEstimator):
    """A logistic regression that refuses (on purpose) to fit more than two classes."""

    def fit(self, X, y):
        if len(np.unique(y)) > 2:
            raise ValueError("more than two classes, on purpose")
        self.model_ = LogisticRegression(max_iter=500).fit(X, y)
        self.classes_ = self.model_.classes_
        return self

    def predict(self, X):
        return self.model_.predict(X)

    def predict_proba(self, X):
        return self.model_.predict_proba(X)


def fitted_on_a_b():
    ens = (SuperLearner(folds=3).add([("two", TwoClassesOnly())], proba=True)
           .add_meta(LogisticRegression(max_iter=500)))
    return ens.fit(X2, LABELS2)


def snapshot(ens):
    """The fitted attributes by identity, and what the model answers."""
    state = {k: v for k, v in vars(ens).items() if k.endswith("_")}
    return state, ens.predict(X_IRIS), ens.predict_proba(X_IRIS)


def assert_unchanged(ens, before):
    state, pred, proba = before
    after = {k: v for k, v in vars(ens).items() if k.endswith("_")}
    assert after.keys() == state.keys()
    assert all(after[k] is state[k] for k in state), [k for k in state if after[k] is not state[k]]
    assert ens.classes_.tolist() == ["a", "b"]
    np.testing.assert_array_equal(ens.predict(X_IRIS), pred)
    np.testing.assert_allclose(ens.predict_proba(X_IRIS), proba)


def test_a_refit_failing_in_a_task_keeps_the_old_model():
    ens = fitted_on_a_b()
    before = snapshot(ens)
    with pytest.raises(lk.TaskError, match="more than two classes"):
        ens.fit(X_IRIS, LABELS3)                 # the report: classes_ became x, y, z
    assert_unchanged(ens, before)
    assert set(ens.predict(X_IRIS)) <= {"a", "b"}


@pytest.mark.parametrize("bad", ["nan in X", "fewer columns", "one class", "y too short"])
def test_a_refit_on_bad_input_keeps_the_old_model(bad):
    ens = fitted_on_a_b()
    before = snapshot(ens)
    X, y = X_IRIS.copy(), LABELS3
    if bad == "nan in X":
        X[3, 1] = np.nan
    elif bad == "fewer columns":                 # checked fine, then a task fails
        X = X[:, :2]
    elif bad == "one class":
        y = np.full(150, "x")
    else:
        y = LABELS3[:-1]
    with pytest.raises(lk.LabkitError):
        ens.fit(X, y)
    assert_unchanged(ens, before)
    assert ens.n_features_in_ == 4


def test_a_failed_run_without_waiting_keeps_the_old_model():
    ens = fitted_on_a_b()
    before = snapshot(ens)
    run = ens.fit(X_IRIS, LABELS3, wait=False)
    with pytest.raises(lk.TaskError):
        run.result(timeout=60)
    assert_unchanged(ens, before)


def test_a_successful_refit_replaces_everything_and_drops_what_it_no_longer_sets():
    ens = fitted_on_a_b()
    ens.set_params(scorer=lambda y, p: float(np.mean(y == p)))
    ens.fit(X2, LABELS2)
    assert set(ens.scores_) == {"layer-1"}
    old_layers = ens.layers_
    ens.set_params(scorer=None, meta_estimator=Ridge(),
                   **{"layer-1": ens.layers[0].set_params(proba=False,
                                                          estimators=[("ridge", Ridge())])})
    ens.fit(X_IRIS, Y_IRIS.astype(float))            # now a regressor: no classes_, no scores_
    assert not hasattr(ens, "classes_") and not hasattr(ens, "scores_")
    assert ens.layers_ is not old_layers and ens.n_features_in_ == 4
    check_is_fitted(ens)
    assert ens.score(X_IRIS, Y_IRIS.astype(float)) > 0.5
