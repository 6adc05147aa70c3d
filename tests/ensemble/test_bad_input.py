"""The ensembles' bad-input table: every entry that takes data checks it in one place.

Each case makes an object, gives it one bad input, and checks that the error is
an :class:`~labkit.InputError` (never an exception from inside a task or from
scikit-learn's internals), that its message says what is wrong, that it names
the argument (``where["argument"]``) or the layer, and that the same object
works right after.  NaN that the estimators take is accepted, as scikit-learn's
stacking accepts it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest
from sklearn.datasets import load_iris, make_regression
from sklearn.ensemble import HistGradientBoostingClassifier, StackingClassifier
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.preprocessing import StandardScaler

import labkit as lk
from labkit.ensemble import (BlendEnsemble, FoldIndex, Layer, ParallelEvaluation,
                             ParallelProcessing, Subsemble, SuperLearner)

X, Y = make_regression(n_samples=120, n_features=4, noise=1.0, random_state=0)
XC, YC = load_iris(return_X_y=True)


def with_value(value, at=(3, 1), data=X):
    out = data.copy()
    out[at] = value
    return out


def regressor(folds=3, **params):
    return (SuperLearner(folds=folds, **params).add([("ridge", Ridge())])
            .add_meta(LinearRegression()))


def classifier(folds=3, **params):
    return (SuperLearner(folds=folds, **params).add([("logit", LogisticRegression(max_iter=500))],
                                                proba=True)
            .add_meta(LogisticRegression(max_iter=500)))


def fitted_regressor():
    return regressor().fit(X, Y)


def ridge_layer():
    return Layer([("ridge", Ridge())], FoldIndex(2))


def logit_layer():
    return Layer([("logit", LogisticRegression(max_iter=500))], 3, proba=True)


def fit_ok(ens):
    assert ens.fit(X, Y).score(X, Y) > 0.9


def classify_ok(ens):
    assert ens.fit(XC, YC).score(XC, YC) > 0.9


def predict_ok(ens):
    np.testing.assert_allclose(ens.predict(X[:5]), fitted_regressor().predict(X[:5]))


def map_ok(pp):
    assert pp.map(ridge_layer(), X, Y).shape == (120, 1)


def evaluate_ok(pe):
    assert len(pe.evaluate([("r", Ridge())], {"r": {"alpha": [0.1, 1.0]}}, X, Y, cv=3)) == 2


def nothing():
    return None


@dataclass
class Case:
    """``bad(make())`` raises an InputError saying ``names``, located at ``where``; then
    ``good(obj)`` works."""

    make: Callable[[], Any]
    bad: Callable[[Any], Any]
    names: tuple[str, ...]
    where: dict
    good: Callable[[Any], Any]


CASES: dict[str, Case] = {
    # -- the ensembles' fit: X ----------------------------------------------------------------
    "X and y of different lengths": Case(
        regressor, lambda e: e.fit(X, Y[:-1]), ("X has 120 rows but y has 119",),
        {"argument": "y", "estimator": "SuperLearner"}, fit_ok),
    "empty X": Case(
        regressor, lambda e: e.fit(X[:0], Y[:0]), ("X has 0 rows",), {"argument": "X"}, fit_ok),
    "one row": Case(
        regressor, lambda e: e.fit(X[:1], Y[:1]), ("n_samples = 1", "at least 2"),
        {"argument": "X"}, fit_ok),
    "1-D X": Case(
        regressor, lambda e: e.fit(X[:, 0], Y), ("2-D", "got shape (120,)", "Reshape your data"),
        {"argument": "X"}, fit_ok),
    "3-D X": Case(
        regressor, lambda e: e.fit(X[:, :, None], Y), ("2-D", "(120, 4, 1)"), {"argument": "X"},
        fit_ok),
    "ragged X": Case(
        regressor, lambda e: e.fit([[1.0, 2.0], [3.0]], [1.0, 2.0]), ("ragged",),
        {"argument": "X"}, fit_ok),
    "X of strings": Case(
        regressor, lambda e: e.fit(np.full((120, 4), "a"), Y), ("numeric",), {"argument": "X"},
        fit_ok),
    "NaN where the estimators refuse it": Case(
        regressor, lambda e: e.fit(with_value(np.nan), Y), ("NaN", "ridge cannot take NaN",
                                                            "SimpleImputer"),
        {"argument": "X", "estimator": "SuperLearner"}, fit_ok),
    "inf in X": Case(
        regressor, lambda e: e.fit(with_value(np.inf), Y), ("infinity",), {"argument": "X"},
        fit_ok),
    # -- y and groups -------------------------------------------------------------------------
    "y missing": Case(
        regressor, lambda e: e.fit(X, None), ("requires y",), {"argument": "y"}, fit_ok),
    "NaN in y": Case(
        regressor, lambda e: e.fit(X, with_value(np.nan, 3, Y)), ("NaN",), {"argument": "y"},
        fit_ok),
    "words as a regressor's y": Case(
        regressor, lambda e: e.fit(X, np.full(120, "high")), ("could not convert",),
        {"argument": "y"}, fit_ok),
    "y with a single class": Case(
        classifier, lambda e: e.fit(XC, np.zeros(150, dtype=int)), ("at least 2 classes",),
        {"argument": "y"}, classify_ok),
    "continuous y for a classifier": Case(
        classifier, lambda e: e.fit(XC, XC[:, 0] + 0.01), ("class labels", "continuous"),
        {"argument": "y"}, classify_ok),
    "groups of another length": Case(
        regressor, lambda e: e.fit(X, Y, groups=np.zeros(5)), ("groups has 5",),
        {"argument": "groups"}, fit_ok),
    # -- folds --------------------------------------------------------------------------------
    "more folds than rows": Case(
        lambda: regressor(folds=5), lambda e: e.fit(X[:4], Y[:4]), ("5 folds", "got 4"),
        {"layer": "layer-1"}, fit_ok),
    "more stratified folds than any class has rows": Case(
        lambda: classifier(folds=5), lambda e: e.fit(XC[46:54], YC[46:54]),
        ("5 stratified folds", "members in each class"), {"layer": "layer-1"}, classify_ok),
    "folds of one": Case(
        lambda: regressor(folds=1), fit_ok, ("folds must be at least 2",),
        {"argument": "folds", "layer": "layer-1"}, lambda e: fit_ok(e.set_params(folds=2))),
    "subsemble partitions not an int": Case(
        lambda: Subsemble(partitions=1.5).add([Ridge()]).add_meta(Ridge()), fit_ok,
        ("partitions", "1.5"), {"argument": "partitions"},
        lambda e: fit_ok(e.set_params(partitions=2))),
    "a blend predicting no row": Case(
        lambda: BlendEnsemble(test_size=0.001).add([Ridge()]).add_meta(Ridge()), fit_ok,
        ("no rows to predict",), {"layer": "layer-1"},
        lambda e: fit_ok(e.set_params(test_size=0.5))),
    # -- what is not an estimator -------------------------------------------------------------
    "an estimator class, not an instance": Case(
        lambda: SuperLearner().add([LogisticRegression]).add_meta(LogisticRegression()),
        classify_ok, ("the class LogisticRegression", "LogisticRegression()"),
        {"layer": "layer-1"},
        lambda e: classify_ok(e.set_params(**{"layer-1__logisticregression":
                                              LogisticRegression(max_iter=500)}))),
    "a meta estimator that is a number": Case(
        lambda: regressor(meta_estimator=None).add_meta(5), fit_ok, ("meta", "has no fit"),
        {"argument": "meta_estimator"}, lambda e: fit_ok(e.add_meta(LinearRegression()))),
    "a meta estimator class": Case(
        lambda: regressor().add_meta(Ridge), fit_ok, ("the class Ridge", "Ridge()"),
        {"argument": "meta_estimator"}, lambda e: fit_ok(e.add_meta(Ridge()))),
    "a scorer that is not callable": Case(
        lambda: regressor(scorer="r2"), fit_ok, ("scorer", "'r2'"), {"argument": "scorer"},
        lambda e: fit_ok(e.set_params(scorer=None))),
    "an unknown cache": Case(
        lambda: regressor(cache="disk"), fit_ok, ("cache", "'disk'"), {"argument": "cache"},
        lambda e: fit_ok(e.set_params(cache="auto"))),
    "a scheduler given as an address": Case(
        lambda: regressor(scheduler="tcp://x:8786"), fit_ok, ("lk.DaskScheduler",),
        {"argument": "scheduler"}, lambda e: fit_ok(e.set_params(scheduler=None))),
    "propagate_features of names": Case(
        nothing, lambda _: SuperLearner().add([Ridge()], propagate_features=["a"]).fit(X, Y),
        ("propagate_features", "'a'"), {"argument": "propagate_features"},
        lambda _: fit_ok(regressor())),
    "propagate_features out of range": Case(
        lambda: SuperLearner().add([Ridge()], propagate_features=[9]).add_meta(Ridge()),
        fit_ok, ("propagate_features", "4 columns"), {"argument": "propagate_features"},
        lambda e: fit_ok(e.set_params(**{"layer-1__propagate_features": [1]}))),
    "preprocessing not a dict": Case(
        lambda: SuperLearner().add([Ridge()], preprocessing=[StandardScaler()]).add_meta(Ridge()),
        fit_ok, ("preprocessing must be a dict",), {"argument": "preprocessing"},
        lambda e: fit_ok(e.set_params(**{"layer-1__preprocessing": None}))),
    # -- predict ------------------------------------------------------------------------------
    "predict with fewer columns": Case(
        fitted_regressor, lambda e: e.predict(X[:, :3]), ("3 features", "expecting 4"),
        {"argument": "X"}, predict_ok),
    "predict on one 1-D row": Case(
        fitted_regressor, lambda e: e.predict(X[0]), ("Reshape your data",),
        {"argument": "X"}, predict_ok),
    "predict with NaN": Case(
        fitted_regressor, lambda e: e.predict(with_value(np.nan)), ("NaN",), {"argument": "X"},
        predict_ok),
    # -- ParallelProcessing -------------------------------------------------------------------
    "map: fewer targets than rows": Case(
        ParallelProcessing, lambda pp: pp.map(ridge_layer(), X, Y[:10]),
        ("X has 120 rows but y has 10",), {"argument": "y", "layer": "layer"}, map_ok),
    "map: empty X": Case(
        ParallelProcessing, lambda pp: pp.map(ridge_layer(), X[:0], Y[:0]), ("0 rows",),
        {"argument": "X"}, map_ok),
    "map: NaN where the estimators refuse it": Case(
        ParallelProcessing, lambda pp: pp.map(ridge_layer(), with_value(np.nan), Y),
        ("NaN", "ridge cannot take NaN"), {"argument": "X"}, map_ok),
    "map: X of strings": Case(
        ParallelProcessing, lambda pp: pp.map(ridge_layer(), np.full((120, 4), "a"), Y),
        ("numeric",), {"argument": "X"}, map_ok),
    "map: continuous y for a proba layer": Case(
        ParallelProcessing, lambda pp: pp.map(logit_layer(), X, Y), ("class labels",),
        {"argument": "y"}, map_ok),
    "map: one class for a proba layer": Case(
        ParallelProcessing, lambda pp: pp.map(logit_layer(), X, np.ones(120)),
        ("at least 2 classes",), {"argument": "y"}, map_ok),
    "map: a classifier layer without y": Case(
        ParallelProcessing, lambda pp: pp.map(logit_layer(), X), ("requires y",),
        {"argument": "y"}, map_ok),
    "stack: y of another length": Case(
        ParallelProcessing, lambda pp: pp.stack([ridge_layer()], X, Y[:-2]),
        ("y has 118",), {"argument": "y"}, map_ok),
    "predict: no layers": Case(
        ParallelProcessing, lambda pp: pp.predict([], X), ("at least one fitted layer",),
        {"argument": "layers"}, map_ok),
    "layer of an estimator class": Case(
        nothing, lambda _: Layer([Ridge]), ("the class Ridge", "Ridge()"), {"layer": "layer"},
        lambda _: map_ok(ParallelProcessing())),
    # -- ParallelEvaluation -------------------------------------------------------------------
    "evaluate: y of another length": Case(
        ParallelEvaluation, lambda pe: pe.evaluate([Ridge()], None, X, Y[:-1]),
        ("y has 119",), {"argument": "y"}, evaluate_ok),
    "evaluate: no y": Case(
        ParallelEvaluation, lambda pe: pe.evaluate([Ridge()], None, X, None), ("requires y",),
        {"argument": "y"}, evaluate_ok),
    "evaluate: NaN": Case(
        ParallelEvaluation, lambda pe: pe.evaluate([Ridge()], None, with_value(np.nan), Y),
        ("NaN",), {"argument": "X"}, evaluate_ok),
    "evaluate: more folds than rows": Case(
        ParallelEvaluation, lambda pe: pe.evaluate([Ridge()], None, X[:4], Y[:4], cv=5),
        ("5 folds", "got 4"), {"argument": "cv"}, evaluate_ok),
    "evaluate: cv of one": Case(
        ParallelEvaluation, lambda pe: pe.evaluate([Ridge()], None, X, Y, cv=1),
        ("cv must be at least 2",), {"argument": "cv"}, evaluate_ok),
    "evaluate: no estimators": Case(
        ParallelEvaluation, lambda pe: pe.evaluate([], None, X, Y), ("at least one estimator",),
        {"argument": "estimators"}, evaluate_ok),
    "evaluate: a list as param_grid": Case(
        ParallelEvaluation, lambda pe: pe.evaluate([Ridge()], [{"alpha": 1.0}], X, Y),
        ("param_grid must be a dict",), {"argument": "param_grid"}, evaluate_ok),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_an_input_error_naming_the_argument_and_nothing_is_lost(name):
    case = CASES[name]
    obj = case.make()
    with pytest.raises(lk.InputError) as info:
        case.bad(obj)
    message = str(info.value)
    missing = [word for word in case.names if word not in message]
    assert not missing, f"{message!r} does not name {missing}"
    wrong = {k: info.value.where.get(k) for k, v in case.where.items()
             if info.value.where.get(k) != v}
    assert not wrong, f"{message!r} is located at {info.value.where}, not {case.where}"
    case.good(obj)


def test_nan_is_accepted_where_the_estimators_take_it_as_stacking_does():
    Xn = XC.copy()
    Xn[::7, 2] = np.nan
    hgb = HistGradientBoostingClassifier(max_iter=20, random_state=0)
    ens = (SuperLearner(folds=3).add([("hgb", hgb)], proba=True)
           .add_meta(LogisticRegression(max_iter=500)))
    assert ens.__sklearn_tags__().input_tags.allow_nan
    assert not classifier().__sklearn_tags__().input_tags.allow_nan
    ens.fit(Xn, YC)
    ref = StackingClassifier([("hgb", hgb)], LogisticRegression(max_iter=500), cv=3).fit(Xn, YC)
    np.testing.assert_allclose(ens.predict_proba(Xn), ref.predict_proba(Xn), atol=1e-6)
    # an imputer first in a case's preprocessing takes the NaN for the estimator after it
    layer = Layer({"imputed": [("ridge", Ridge())]}, FoldIndex(3),
                  preprocessing={"imputed": [SimpleImputer()]})
    Xr = with_value(np.nan)
    P = ParallelProcessing().map(layer, Xr, Y)
    assert P.shape == (120, 1) and np.isfinite(P).all()
    with pytest.raises(lk.InputError, match="infinity"):       # inf: never
        ParallelProcessing().map(layer, with_value(np.inf), Y)
