"""Sparse X: estimators get sparse rows, the outputs are dense and equal the dense run's."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits
from sklearn.ensemble import StackingClassifier
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import StratifiedKFold
from sklearn.tree import DecisionTreeClassifier

from labkit.ensemble import (FoldIndex, Layer, ParallelEvaluation, ParallelProcessing,
                             SuperLearner)
from labkit.ensemble.cache import open_inputs

X_DIGITS, Y_DIGITS = load_digits(return_X_y=True)
X, Y = X_DIGITS[:240] / 16.0, Y_DIGITS[:240]   # digits: mostly zeros
XS = sp.csr_matrix(X)


class Recording(Ridge):
    """A ridge that records whether its input was sparse (what the tasks hand it)."""

    def fit(self, X, y):
        self.sparse_input_ = sp.issparse(X)
        return super().fit(X, y)


def logit():
    return LogisticRegression(max_iter=500)


def test_superlearner_on_sparse_equals_dense_and_stacking_classifier():
    def make():
        return (SuperLearner(folds=3).add([("logit", logit()),
                                           ("tree", DecisionTreeClassifier(max_depth=5,
                                                                           random_state=0))],
                                          proba=True)
                .add_meta(logit()))
    dense, sparse = make().fit(X, Y), make().fit(XS, Y)   # the report: "got shape ()"
    np.testing.assert_allclose(sparse.predict_proba(XS), dense.predict_proba(X), atol=1e-6)
    out = sparse.transform(sp.csc_matrix(X[:10]))         # any sparse format
    assert isinstance(out, np.ndarray) and out.shape == (10, 20)
    ref = StackingClassifier([("logit", logit())], logit(), cv=StratifiedKFold(3))
    ours = SuperLearner(folds=3).add([("logit", logit())], proba=True).add_meta(logit())
    np.testing.assert_allclose(ours.fit(XS, Y).predict_proba(XS),
                               ref.fit(XS, Y).predict_proba(XS), atol=1e-6)


@pytest.mark.parametrize("cache", ["memory", "memmap"])
def test_map_on_sparse_rows_equals_dense(scheduler, cache, tmp_path):
    def layer():
        ridge = Recording(solver="lsqr", tol=1e-12)   # one solver for sparse and dense rows
        return Layer([("ridge", ridge), ("logit", logit())], FoldIndex(3),
                     propagate_features=[20, 21])
    pp = ParallelProcessing(scheduler, cache=cache, cache_dir=str(tmp_path))
    sparse_layer, dense_layer = layer(), layer()
    P = pp.map(sparse_layer, XS, Y)              # the report: "X must be 2-D, got shape ()"
    assert isinstance(P, np.ndarray)
    np.testing.assert_allclose(P, ParallelProcessing(scheduler).map(dense_layer, X, Y),
                               atol=1e-8)
    np.testing.assert_allclose(P[:, :2], X[:, [20, 21]])      # propagated, dense
    assert sparse_layer.fitted_["ridge"][1].sparse_input_           # sparse rows, not densified
    assert not dense_layer.fitted_["ridge"][1].sparse_input_
    new = pp.predict(sparse_layer, sp.csr_matrix(X[:7]))
    assert isinstance(new, np.ndarray) and new.shape == (7, 4)
    np.testing.assert_allclose(new, pp.predict(dense_layer, X[:7]), atol=1e-8)
    assert list(tmp_path.iterdir()) == []


def test_the_memmap_cache_maps_a_sparse_matrix_back():
    with open_inputs(XS, Y, mode="memmap") as inputs:
        back = inputs.X
        assert sp.issparse(back) and back.format == "csr"
        assert (back != XS).nnz == 0
        assert (back[[3, 1, 200]] != XS[[3, 1, 200]]).nnz == 0


def test_64_bit_indices_reach_estimators_as_32_bit():
    big = sp.csr_matrix(X)
    big.indices, big.indptr = big.indices.astype(np.int64), big.indptr.astype(np.int64)
    ens = (SuperLearner(folds=2).add([("tree", DecisionTreeClassifier(random_state=0))],
                                     proba=True).add_meta(logit()))
    assert ens.fit(big, Y).score(big, Y) > 0.9     # trees refuse 64-bit sparse indices


def test_evaluation_on_sparse_equals_dense():
    pe = ParallelEvaluation()
    sparse = pe.evaluate([("logit", logit())], {"logit": {"C": [0.1, 1.0]}}, XS, Y, cv=3)
    dense = pe.evaluate([("logit", logit())], {"logit": {"C": [0.1, 1.0]}}, X, Y, cv=3)
    assert [r["params"] for r in sparse.rows] == [r["params"] for r in dense.rows]
    for ours, theirs in zip(sparse.rows, dense.rows):
        assert ours["scores"] == pytest.approx(theirs["scores"])
