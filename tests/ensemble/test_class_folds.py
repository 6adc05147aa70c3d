"""An int number of folds follows scikit-learn's check_cv (stratified for a classifier),
and probability columns stay aligned with the classes when a fit lacks one."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_iris, make_regression
from sklearn.ensemble import StackingClassifier
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import (KFold, PredefinedSplit, StratifiedKFold, cross_val_predict,
                                     cross_val_score)
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import labkit as lk
from labkit.ensemble import (BlendEnsemble, BlendIndex, FoldIndex, Layer, ParallelEvaluation,
                             ParallelProcessing, SequentialEnsemble, Subsemble, SubsetIndex,
                             SuperLearner, as_indexer)
from labkit.ensemble.fold_fits import class_columns

X_IRIS, Y_IRIS = load_iris(return_X_y=True)      # as loaded: ordered by class
X_REG, Y_REG = make_regression(n_samples=60, n_features=3, noise=1.0, random_state=0)


def logit():
    return LogisticRegression(max_iter=1000)


def folds_of(index, n, y=None):
    return [(tr.tolist(), te.tolist()) for tr, te in index.folds(n, y)]


def sklearn_folds(cv, X, y):
    return [(tr.tolist(), te.tolist()) for tr, te in cv.split(X, y)]


def test_an_int_is_stratified_for_a_classifier_and_contiguous_otherwise():
    assert folds_of(as_indexer(3, classifier=True), 150, Y_IRIS) == \
        sklearn_folds(StratifiedKFold(3), X_IRIS, Y_IRIS)
    assert folds_of(as_indexer(3), 150, Y_IRIS) == sklearn_folds(KFold(3), X_IRIS, Y_IRIS)
    # check_cv: a classifier with targets that are not class labels gets KFold
    assert folds_of(as_indexer(3, classifier=True), 60, Y_REG) == \
        sklearn_folds(KFold(3), X_REG, Y_REG)
    shuffled = as_indexer(3, shuffle=True, random_state=5, classifier=True)
    assert folds_of(shuffled, 150, Y_IRIS) == \
        sklearn_folds(StratifiedKFold(3, shuffle=True, random_state=5), X_IRIS, Y_IRIS)


def test_layers_stratify_an_int_when_they_classify_and_keep_an_explicit_index():
    assert Layer([logit()], 3).indexer.stratify                     # classifiers
    assert Layer([Ridge()], 3, proba=False).indexer.stratify is False
    assert Layer([logit()]).indexer.stratify                        # the default, 2 folds
    assert Layer([("r", Ridge()), ("l", logit())], 3).indexer.stratify is False  # mixed
    explicit = FoldIndex(3)
    assert Layer([logit()], explicit).indexer is explicit and not explicit.stratify
    layer = Layer([("logit", logit())], 3, proba=True)
    P = ParallelProcessing().map(layer, X_IRIS, Y_IRIS)
    want = cross_val_predict(logit(), X_IRIS, Y_IRIS, cv=3, method="predict_proba")
    np.testing.assert_allclose(P, want, atol=1e-8)                 # cross_val_predict's cv=3


def test_superlearner_int_folds_equal_stacking_classifier_folds():
    ens = SuperLearner(folds=3).add([("logit", logit())], proba=True).add_meta(logit())
    ens.fit(X_IRIS, Y_IRIS)
    ref = StackingClassifier([("logit", logit())], logit(), cv=3).fit(X_IRIS, Y_IRIS)
    np.testing.assert_allclose(ens.meta_.coef_, ref.final_estimator_.coef_, atol=1e-6)
    assert "stratify=True" in repr(ens.layers_[0].indexer)


def ensembles():
    base, meta = [("logit", logit())], logit()
    return {
        "SuperLearner": SuperLearner(folds=3).add(base, proba=True).add_meta(meta),
        "BlendEnsemble": BlendEnsemble().add(base, proba=True).add_meta(clone(meta)),
        "Subsemble": Subsemble(partitions=2, folds=3).add(base, proba=True)
        .add_meta(clone(meta)),
    }


@pytest.mark.parametrize("name", list(ensembles()))
def test_ordered_iris_scores_as_stacking_classifier_does(name):
    """The report: folds=3 on iris as loaded scored 0.04 (each inner fold missed a class)."""
    stacking = StackingClassifier([("logit", logit())], logit(), cv=3)
    want = cross_val_score(make_pipeline(StandardScaler(), stacking), X_IRIS, Y_IRIS,
                           cv=3).mean()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # convergence chatter of the tiny fits
        got = cross_val_score(make_pipeline(StandardScaler(), ensembles()[name]), X_IRIS,
                              Y_IRIS, cv=3).mean()
    assert abs(got - want) <= 0.02, (name, got, want)


def test_blend_and_subsemble_splits_hold_every_class():
    fit, predicted = BlendIndex(0.3, stratify=True).folds(150, Y_IRIS)[0]
    assert np.bincount(Y_IRIS[fit]).tolist() == [35, 35, 35]
    assert np.bincount(Y_IRIS[predicted]).tolist() == [15, 15, 15]
    continuous = np.linspace(0.0, 1.0, 150)              # not class labels: as unstratified
    assert BlendIndex(0.3, stratify=True).folds(150, continuous)[0][1].tolist() == \
        list(range(105, 150))
    index = SubsetIndex(partitions=2, folds=3, stratify=True)
    for part in index.partition_rows(150, Y_IRIS):
        assert np.bincount(Y_IRIS[part]).tolist() == [25, 25, 25]
    for train, test in index.folds(150, Y_IRIS):
        assert set(Y_IRIS[train]) == set(Y_IRIS[test]) == {0, 1, 2}


def test_evaluation_int_cv_is_cross_val_score_s_for_each_estimator():
    table = ParallelEvaluation().evaluate([("logit", logit())], None, X_IRIS, Y_IRIS, cv=3)
    want = cross_val_score(logit(), X_IRIS, Y_IRIS, cv=3)            # stratified
    assert table.rows[0]["scores"] == pytest.approx(want.tolist())
    assert table.best()["mean"] > 0.9
    y = Y_IRIS.astype(float)   # a regressor on the same targets: KFold, as check_cv gives it
    table = ParallelEvaluation().evaluate([("ridge", Ridge())], None, X_IRIS, y, cv=3)
    assert table.rows[0]["scores"] == pytest.approx(cross_val_score(Ridge(), X_IRIS, y,
                                                                    cv=3).tolist())


class ThreeFolds:
    """An explicit splitter: fold 0 trains on classes 0 and 1 only (it tests every class-2 row)."""

    def split(self, X, y=None, groups=None):
        y = np.asarray(y)
        class_two = np.flatnonzero(y == 2)
        rest = np.flatnonzero(y != 2)
        halves = np.array_split(rest, 2)
        yield rest, class_two
        yield np.concatenate([halves[1], class_two]), halves[0]
        yield np.concatenate([halves[0], class_two]), halves[1]

    def get_n_splits(self, X=None, y=None, groups=None):
        return 3


def test_a_fold_without_a_class_leaves_that_column_zero_and_the_others_in_place():
    layer = Layer([("logit", logit())], ThreeFolds(), proba=True)
    P = ParallelProcessing().map(layer, X_IRIS, Y_IRIS)
    rest, class_two = np.flatnonzero(Y_IRIS != 2), np.flatnonzero(Y_IRIS == 2)
    fold0 = logit().fit(X_IRIS[rest], Y_IRIS[rest])
    assert fold0.classes_.tolist() == [0, 1]
    np.testing.assert_allclose(P[class_two, :2], fold0.predict_proba(X_IRIS[class_two]))
    assert (P[class_two, 2] == 0).all()                   # class 2's column: 0, not shifted
    halves = np.array_split(rest, 2)
    fold1 = logit().fit(X_IRIS[np.concatenate([halves[1], class_two])],
                        Y_IRIS[np.concatenate([halves[1], class_two])])
    np.testing.assert_allclose(P[halves[0]][:, fold1.classes_],
                               fold1.predict_proba(X_IRIS[halves[0]]))


def test_a_layer_whose_rows_lack_a_class_keeps_the_ensemble_s_columns():
    # layer 1 predicts no class-0 row (PredefinedSplit -1), so layer 2 learns on classes 1, 2
    test_fold = np.where(Y_IRIS == 0, -1, np.arange(150) % 2)
    labels = np.array(["setosa", "versicolor", "virginica"])[Y_IRIS]
    ens = (SequentialEnsemble()
           .add("stack", [("logit", logit())], proba=True, indexer=PredefinedSplit(test_fold))
           .add("stack", [("logit2", logit())], proba=True, indexer=2)
           .add_meta(logit()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ens.fit(X_IRIS, labels)
    assert ens.classes_.tolist() == ["setosa", "versicolor", "virginica"]
    second = ens.layers_[1]
    assert second.classes_.tolist() == [0, 1, 2]     # the ensemble's classes, not 1, 2
    out = ens.transform(X_IRIS)
    assert out.shape == (150, 3)
    assert (out[:, 0] == 0).all() and np.allclose(out[:, 1:].sum(1), 1.0)
    proba = ens.predict_proba(X_IRIS[50:])
    assert proba.shape == (100, 3) and (proba[:, 0] == 0).all()
    assert (ens.predict(X_IRIS[100:]) == "virginica").mean() > 0.8


def test_class_columns_refuse_a_class_the_layer_does_not_know():
    classes = np.array([0, 1, 2])
    assert class_columns(classes, np.array([0, 2]), 2).tolist() == [0, 2]
    with pytest.raises(lk.InputError, match="not among the classes"):
        class_columns(classes, np.array([1, 3]), 2)        # searchsorted would say [1, 3]
    with pytest.raises(lk.InputError, match="no classes_"):
        class_columns(classes, None, 2)
