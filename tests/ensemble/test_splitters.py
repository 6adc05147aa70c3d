"""folds/cv: an int, a labkit indexer or a scikit-learn splitter, everywhere."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.metrics import make_scorer, mean_absolute_error
from sklearn.model_selection import (GroupKFold, KFold, ShuffleSplit, StratifiedKFold,
                                     TimeSeriesSplit, cross_val_predict, cross_val_score)

import labkit as lk
from labkit.ensemble import (FoldIndex, Layer, ParallelEvaluation, ParallelProcessing,
                             SplitterIndex, SuperLearner, as_indexer)

X, Y = make_regression(n_samples=90, n_features=4, noise=3.0, random_state=1)
XC, YC = make_classification(n_samples=120, n_features=6, n_classes=3, n_informative=4,
                             random_state=0)
GROUPS = np.repeat(np.arange(9), 10)


def test_as_indexer_accepts_int_indexer_and_splitter():
    assert isinstance(as_indexer(3), FoldIndex) and as_indexer(3).n_splits == 3
    fold = FoldIndex(4)
    assert as_indexer(fold) is fold
    assert isinstance(as_indexer(KFold(3)), SplitterIndex)
    for bad in (1, "five", 2.5, None):
        with pytest.raises(lk.InputError, match="must be"):
            as_indexer(bad)


def test_int_folds_equal_kfold():
    for n in (10, 11, 13):
        ours = FoldIndex(4).folds(n)
        theirs = list(KFold(4).split(np.zeros(n)))
        for (a, b), (c, d) in zip(ours, theirs, strict=True):
            assert a.tolist() == c.tolist() and b.tolist() == d.tolist()


@pytest.mark.parametrize("cv", [KFold(3, shuffle=True, random_state=2), StratifiedKFold(3)])
def test_layer_out_of_fold_predictions_equal_cross_val_predict(scheduler, cv):
    layer = Layer([("logit", LogisticRegression(max_iter=300))], cv, proba=True)
    P = ParallelProcessing(scheduler).map(layer, XC, YC)
    want = cross_val_predict(LogisticRegression(max_iter=300), XC, YC, cv=cv,
                             method="predict_proba")
    np.testing.assert_allclose(P, want, atol=1e-8)


def test_group_kfold_with_groups_keeps_groups_apart():
    ens = SuperLearner(folds=GroupKFold(3)).add([Ridge()]).add_meta(LinearRegression())
    ens.fit(X, Y, groups=GROUPS)
    want = cross_val_predict(Ridge(), X, Y, cv=GroupKFold(3), groups=GROUPS)
    np.testing.assert_allclose(ens.meta_.coef_, LinearRegression().fit(want[:, None], Y).coef_)
    with pytest.raises(lk.InputError, match="groups") as info:
        SuperLearner(folds=GroupKFold(3)).add([Ridge()]).add_meta(Ridge()).fit(X, Y)
    assert info.value.where["layer"] == "layer-1"


def test_time_series_split_outputs_the_predicted_rows_only():
    cv = TimeSeriesSplit(3)
    layer = Layer([Ridge()], cv)
    P = ParallelProcessing().map(layer, X, Y)
    first_test = next(cv.split(X))[1][0]
    assert P.shape == (90 - first_test, 1)          # rows no fold predicts are left out
    for train, test in cv.split(X):
        np.testing.assert_allclose(P[test - first_test, 0],
                                   Ridge().fit(X[train], Y[train]).predict(X[test]))
    ens = SuperLearner(folds=cv).add([Ridge()]).add_meta(LinearRegression()).fit(X, Y)
    np.testing.assert_allclose(ens.meta_.coef_,
                               LinearRegression().fit(P, Y[first_test:]).coef_)  # rebased


def test_overlapping_test_sets_are_refused():
    with pytest.raises(lk.InputError, match="more than one test set") as info:
        ParallelProcessing().map(Layer([Ridge()], ShuffleSplit(4, test_size=0.5, random_state=0), name="L"),
                                 X, Y)
    assert info.value.where["layer"] == "L"


def test_evaluation_takes_splitters_and_scorers(local_scheduler):
    pe = ParallelEvaluation(local_scheduler)
    table = pe.evaluate([Ridge()], None, X, Y, cv=KFold(3))     # the example
    want = cross_val_score(Ridge(), X, Y, cv=KFold(3))
    assert table.rows[0]["scores"] == pytest.approx(want.tolist())
    table = pe.evaluate([Ridge()], None, X, Y, cv=GroupKFold(3), groups=GROUPS,
                        scoring="neg_mean_absolute_error")
    want = cross_val_score(Ridge(), X, Y, cv=GroupKFold(3), groups=GROUPS,
                           scoring="neg_mean_absolute_error")
    assert table.rows[0]["scores"] == pytest.approx(want.tolist())
    scorer = make_scorer(mean_absolute_error, greater_is_better=False)
    table = pe.evaluate([Ridge()], None, X, Y, cv=KFold(3), scoring=scorer)
    want = cross_val_score(Ridge(), X, Y, cv=KFold(3), scoring=scorer)
    assert table.rows[0]["scores"] == pytest.approx(want.tolist())
    with pytest.raises(lk.InputError, match="cv must be"):
        pe.evaluate([Ridge()], None, X, Y, cv="three")
