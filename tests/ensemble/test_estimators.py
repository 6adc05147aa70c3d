"""The ensembles as scikit-learn estimators: equal to hand-written stacking, usable in
GridSearchCV, cross_val_score and Pipeline, clonable, picklable, on labkit schedulers."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.datasets import load_digits, make_regression
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.model_selection import (GridSearchCV, KFold, StratifiedKFold, cross_val_predict,
                                     cross_val_score)
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.utils.validation import check_is_fitted

import labkit as lk
from labkit.ensemble import (BlendEnsemble, SequentialEnsemble, Subsemble, SuperLearner)
from labkit.events import PhaseStarted, RunFinished

from .reference import Boom

X_REG, Y_REG = make_regression(n_samples=150, n_features=5, noise=10.0, random_state=0)


def digits(n=360):
    X, y = load_digits(return_X_y=True)
    return X[:n] / 16.0, y[:n]


def regressors():
    return [("ridge", Ridge(alpha=2.0)), ("tree", DecisionTreeRegressor(max_depth=4,
                                                                        random_state=0))]


def test_regressor_equals_hand_written_stacking():
    cv = KFold(4, shuffle=True, random_state=3)
    ens = SuperLearner(folds=cv).add(regressors()).add_meta(LinearRegression())
    ens.fit(X_REG[:120], Y_REG[:120])
    Z = np.column_stack([cross_val_predict(e, X_REG[:120], Y_REG[:120], cv=cv)
                         for _, e in regressors()])  # out-of-fold, as scikit-learn does it
    meta = LinearRegression().fit(Z, Y_REG[:120])
    np.testing.assert_allclose(ens.meta_.coef_, meta.coef_, rtol=1e-9)  # learnt on the same OOF
    finals = [clone(e).fit(X_REG[:120], Y_REG[:120]) for _, e in regressors()]
    Z_new = np.column_stack([f.predict(X_REG[120:]) for f in finals])
    np.testing.assert_allclose(ens.predict(X_REG[120:]), meta.predict(Z_new), rtol=1e-9)
    np.testing.assert_allclose(ens.transform(X_REG[120:]), Z_new, rtol=1e-9)
    assert is_regressor(ens) and not is_classifier(ens) and ens._estimator_type == "regressor"
    assert ens.n_features_in_ == 5
    assert ens.score(X_REG[120:], Y_REG[120:]) > 0.8


def test_classifier_probabilities_equal_hand_written_stacking():
    X, y = digits()
    labels = np.array(list("abcdefghij"))[y]          # string labels round-trip
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    base = [("logit", LogisticRegression(max_iter=500)),
            ("tree", DecisionTreeClassifier(max_depth=6, random_state=0))]
    ens = (SuperLearner(folds=cv).add(base, proba=True)
           .add_meta(LogisticRegression(max_iter=500)))
    ens.fit(X[:300], labels[:300])
    Z = np.hstack([cross_val_predict(e, X[:300], labels[:300], cv=cv, method="predict_proba")
                   for _, e in base])
    meta = LogisticRegression(max_iter=500).fit(Z, labels[:300])
    finals = [clone(e).fit(X[:300], labels[:300]) for _, e in base]
    Z_new = np.hstack([f.predict_proba(X[300:]) for f in finals])
    np.testing.assert_allclose(ens.predict_proba(X[300:]), meta.predict_proba(Z_new), atol=1e-6)
    assert (ens.predict(X[300:]) == meta.predict(Z_new)).all()
    assert list(ens.classes_) == list("abcdefghij") and is_classifier(ens)
    assert ens.score(X[300:], labels[300:]) > 0.85


def test_grid_search_and_cross_val_score_reach_nested_params():
    ens = SuperLearner(folds=3).add(regressors()).add_meta(LinearRegression())
    params = ens.get_params()
    assert params["layer-1__ridge__alpha"] == 2.0 and params["meta_estimator__fit_intercept"]
    search = GridSearchCV(ens, {"layer-1__ridge__alpha": [1e6, 0.01],
                                "meta_estimator__fit_intercept": [True, False]}, cv=3)
    search.fit(X_REG, Y_REG)
    assert search.best_params_["layer-1__ridge__alpha"] == 0.01  # a crushed ridge scores worse
    assert search.best_estimator_.layers[0].estimators[0][1].alpha == 0.01
    assert len(search.cv_results_["mean_test_score"]) == 4
    assert ens.get_params()["layer-1__ridge__alpha"] == 2.0   # the search used clones
    scores = cross_val_score(ens, X_REG, Y_REG, cv=3)
    assert scores.shape == (3,) and scores.min() > 0.5


def test_inside_a_pipeline_and_grid_search_on_a_dask_scheduler(dask_scheduler, recorder):
    X, y = digits(240)
    ens = (SuperLearner(folds=2, scheduler=dask_scheduler)
           .add([("logit", LogisticRegression(max_iter=300))], proba=True)
           .add_meta(LogisticRegression(max_iter=300)))
    pipe = make_pipeline(StandardScaler(), ens)
    dask_scheduler.subscribe(recorder)
    search = GridSearchCV(pipe, {"superlearner__layer-1__logit__C": [0.01, 1.0]}, cv=2)
    search.fit(X, y)
    assert search.best_params_ == {"superlearner__layer-1__logit__C": 1.0}
    assert search.best_estimator_[-1].scheduler is dask_scheduler   # shared, never copied
    phases = {e.node_name for e in recorder.of(PhaseStarted)}
    assert phases == {"layer-1", "meta"}                # each fit shows on the board
    assert len(recorder.of(RunFinished)) == 2 * 2 + 1    # 2 candidates × 2 folds + refit


def test_wait_false_returns_a_run(dask_scheduler):
    ens = SuperLearner(folds=3, scheduler=dask_scheduler).add(regressors())
    run = ens.add_meta(LinearRegression()).fit(X_REG, Y_REG, wait=False)
    assert isinstance(run, lk.Run)
    assert run.result(timeout=60) is ens
    check_is_fitted(ens)
    local = clone(ens).set_params(scheduler=None).fit(X_REG, Y_REG)
    np.testing.assert_allclose(ens.predict(X_REG[:10]), local.predict(X_REG[:10]))


def test_clone_deepcopy_and_pickle_keep_the_scheduler_out(local_scheduler):
    ens = SuperLearner(scheduler=local_scheduler).add(regressors()).add_meta(Ridge())
    twin = clone(ens)
    assert twin.scheduler is local_scheduler and twin.layers[0] is not ens.layers[0]
    assert twin.get_params()["layer-1__ridge"] is not ens.get_params()["layer-1__ridge"]
    assert copy.deepcopy(ens).scheduler is local_scheduler
    with pytest.raises(NotFittedError):
        ens.predict(X_REG)
    ens.fit(X_REG, Y_REG)
    back = pickle.loads(pickle.dumps(ens))
    assert back.scheduler is None                      # a live scheduler is not pickled
    np.testing.assert_allclose(back.predict(X_REG[:5]), ens.predict(X_REG[:5]))
    assert ens.scheduler is local_scheduler


def test_set_params_replaces_estimators_and_layers():
    ens = SuperLearner().add([Ridge(), LinearRegression()]).add_meta(LinearRegression())
    ens.set_params(**{"layer-1__ridge": Ridge(alpha=7.0), "layer-1__linearregression__fit_intercept": False})
    assert ens.get_params()["layer-1__ridge__alpha"] == 7.0
    assert ens.get_params()["layer-1__linearregression__fit_intercept"] is False
    with pytest.raises(ValueError, match="Invalid parameter"):
        ens.set_params(**{"layer-1__lasso__alpha": 1.0})
    spec = clone(ens.layers[0]).set_params(proba=True)
    ens.set_params(**{"layer-1": spec})
    assert ens.layers[0] is spec


def test_add_is_chainable_and_does_not_touch_a_given_list():
    given = []
    ens = SuperLearner(layers=given)
    assert ens.add([Ridge()]).add([LinearRegression()]).add_meta(Ridge()) is ens
    assert given == [] and len(ens.layers) == 2


def test_scores_of_base_estimators():
    from sklearn.metrics import r2_score
    cv = KFold(3)
    ens = SuperLearner(folds=cv, scorer=r2_score).add(regressors()).add_meta(LinearRegression())
    ens.fit(X_REG, Y_REG)
    want = r2_score(Y_REG, cross_val_predict(Ridge(alpha=2.0), X_REG, Y_REG, cv=cv))
    assert ens.scores_["layer-1"]["ridge"] == pytest.approx(want)


def test_blend_ensemble_fits_the_meta_on_the_predicted_rows():
    ens = BlendEnsemble(test_size=0.4).add(regressors()).add_meta(LinearRegression())
    ens.fit(X_REG, Y_REG)
    base = [clone(e).fit(X_REG[:90], Y_REG[:90]) for _, e in regressors()]
    Z = np.column_stack([b.predict(X_REG[90:]) for b in base])
    meta = LinearRegression().fit(Z, Y_REG[90:])
    Z_new = np.column_stack([b.predict(X_REG[:7]) for b in base])  # a blend has one fit
    np.testing.assert_allclose(ens.predict(X_REG[:7]), meta.predict(Z_new), rtol=1e-9)


def test_subsemble_fits_each_estimator_per_partition():
    ens = Subsemble(partitions=2, folds=3).add([Ridge()]).add_meta(LinearRegression())
    ens.fit(X_REG, Y_REG)
    layer = ens.layers_[0]
    assert [n for n, _ in layer.estimators()] == ["ridge.1", "ridge.2"]
    first, second = np.arange(75), np.arange(75, 150)
    np.testing.assert_allclose(layer.fitted_["ridge.1"][1].coef_,
                               Ridge().fit(X_REG[first], Y_REG[first]).coef_)
    np.testing.assert_allclose(layer.fitted_["ridge.2"][1].coef_,
                               Ridge().fit(X_REG[second], Y_REG[second]).coef_)
    # the meta learnt on out-of-fold columns: fold v holds rows of both partitions
    Z = np.zeros((150, 2))
    for j, part in enumerate((first, second)):
        pieces = [np.array_split(p, 3) for p in (first, second)]
        for v in range(3):
            test = np.concatenate([p[v] for p in pieces])
            train = np.setdiff1d(part, pieces[j][v])
            Z[test, j] = Ridge().fit(X_REG[train], Y_REG[train]).predict(X_REG[test])
    np.testing.assert_allclose(ens.meta_.coef_, LinearRegression().fit(Z, Y_REG).coef_,
                               rtol=1e-9)
    assert ens.score(X_REG, Y_REG) > 0.9


def test_sequential_ensemble_mixes_layer_kinds():
    X, y = digits(300)
    ens = (SequentialEnsemble(folds=3, test_size=0.5, partitions=2)
           .add("stack", [("logit", LogisticRegression(max_iter=300))], proba=True)
           .add("subsemble", [("tree", DecisionTreeClassifier(max_depth=5, random_state=0))],
                proba=True)
           .add("blend", [("top", LogisticRegression(max_iter=300))], proba=True)
           .add_meta(LogisticRegression(max_iter=300)))
    ens.fit(X, y)
    kinds = [type(layer.indexer).__name__ for layer in ens.layers_]
    assert kinds == ["FoldIndex", "SubsetIndex", "BlendIndex"]
    assert ens.transform(X[:4]).shape == (4, 10)
    # in-sample, through a meta fitted on the blend's 150 rows: a loose bound (0.79 to 0.87
    # as the folds change; the folds of a classifier are stratified since the ordered-data fix)
    assert ens.score(X, y) > 0.75
    with pytest.raises(lk.InputError, match="layer kind"):
        SequentialEnsemble().add("bag", [Ridge()])


def test_errors_name_the_place():
    with pytest.raises(lk.InputError, match="needs layers"):
        SuperLearner().add_meta(Ridge()).fit(X_REG, Y_REG)
    with pytest.raises(lk.InputError, match="NaN") as info:
        X = X_REG.copy()
        X[3, 1] = np.nan
        SuperLearner().add([Ridge()]).add_meta(Ridge()).fit(X, Y_REG)
    assert info.value.where == {"estimator": "SuperLearner", "argument": "X"}
    with pytest.raises(lk.InputError, match="has no predict") as info:
        SuperLearner().add([StandardScaler()]).add_meta(Ridge()).fit(X_REG, Y_REG)
    assert info.value.where["layer"] == "layer-1"
    with pytest.raises(lk.InputError, match="folds must be") as info:
        SuperLearner(folds="five").add([Ridge()]).add_meta(Ridge()).fit(X_REG, Y_REG)
    assert info.value.where["layer"] == "layer-1"
    with pytest.raises(lk.TaskError, match="boom on purpose") as info:
        SuperLearner(folds=2).add([Ridge(), ("boom", Boom())]).add_meta(Ridge()).fit(X_REG, Y_REG)
    assert info.value.where["layer"] == "layer-1" and info.value.where["estimator"] == "boom"
    assert info.value.where["fold"] in (0, 1, "final")
    with pytest.raises(lk.InputError, match="at least 2 classes"):
        (SuperLearner().add([LogisticRegression()]).add_meta(LogisticRegression())
         .fit(X_REG, np.zeros(150, dtype=int)))
    with pytest.raises(lk.InputError, match="no meta estimator"):
        SuperLearner(folds=2).add([Ridge()]).fit(X_REG, Y_REG).predict(X_REG)


@pytest.mark.parametrize("verb", ["predict", "transform", "score"])
def test_an_unfitted_ensemble_raises_an_error_both_labkit_and_scikit_learn_name(verb,
                                                                                local_scheduler):
    ens = SuperLearner(scheduler=local_scheduler).add(regressors()).add_meta(Ridge())
    args = (X_REG, Y_REG) if verb == "score" else (X_REG,)
    with pytest.raises(lk.NotFittedError) as info:
        getattr(ens, verb)(*args)
    err = info.value
    assert isinstance(err, NotFittedError) and isinstance(err, lk.LabkitError)
    assert isinstance(err, lk.TrainingError)
    assert "SuperLearner is not fitted" in str(err) and err.where["estimator"] == "SuperLearner"


def test_untrained_nodes_raise_the_same_not_fitted_error():
    from labkit.nodes import PCA
    with pytest.raises(NotFittedError) as info:
        PCA(output_dim=1).execute(X_REG)
    assert isinstance(info.value, lk.TrainingError)
    with pytest.raises(lk.NotFittedError):
        lk.Flow([PCA(output_dim=1)]).execute(X_REG)
