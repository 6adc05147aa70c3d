"""map, stack and predict equal sequential fits with the same folds, on both schedulers."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits, make_regression
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

import labkit as lk
from labkit.ensemble import BlendIndex, FoldIndex, FullIndex, Layer, ParallelProcessing

from .reference import Boom, sequential_layer

X_REG, Y_REG = make_regression(n_samples=120, n_features=6, noise=5.0, random_state=0)


def digits(n=300):
    d = load_digits()
    return d.data[:n] / 16.0, d.target[:n]


@pytest.mark.parametrize("cache", ["memory", "memmap"])
def test_map_equals_sequential_fits(scheduler, cache, tmp_path):
    layer = Layer({"raw": [LinearRegression(), ("tree", DecisionTreeRegressor(random_state=0))],
                   "scaled": [("ridge", Ridge(alpha=3.0))]},
                  FoldIndex(3, shuffle=True, random_state=4),
                  preprocessing={"scaled": [StandardScaler()]}, propagate_features=[0, 2])
    pp = ParallelProcessing(scheduler, cache=cache, cache_dir=str(tmp_path))
    P = pp.map(layer, X_REG, Y_REG)
    want, _ = sequential_layer(layer, X_REG, Y_REG)
    assert P.shape == (120, 5)
    np.testing.assert_allclose(P, want, rtol=1e-10, atol=1e-10)
    assert sorted(layer.fitted_) == ["linearregression", "ridge", "tree"]
    assert list(tmp_path.iterdir()) == []  # the cache folder is gone


def test_stack_of_proba_and_blend_layers_equals_sequential(scheduler):
    X, y = digits()
    first = Layer([("logit", LogisticRegression(max_iter=500)),
                   ("tree", DecisionTreeClassifier(max_depth=6, random_state=0))],
                  FoldIndex(3), proba=True, name="base")
    second = Layer([("top", LogisticRegression(max_iter=500))], BlendIndex(0.4), proba=True,
                   name="meta")
    pp = ParallelProcessing(scheduler)
    outs = pp.stack([first, second], X, y, return_preds=["base", "meta"])
    P1, rows1 = sequential_layer(first, X, y)
    P2, rows2 = sequential_layer(second, P1, y[rows1])
    np.testing.assert_allclose(outs["base"], P1, atol=1e-10)
    np.testing.assert_allclose(outs["meta"], P2, atol=1e-10)
    assert outs["meta"].shape == (120, 10)  # the blend predicts its last 40%
    accuracy = (outs["meta"].argmax(1) == y[rows2]).mean()  # targets rebased onto the blend rows
    assert accuracy > 0.85
    # new data through both layers: the final fits
    new = pp.predict([first, second], X[:50])
    assert new.shape == (50, 10) and (new.argmax(1) == y[:50]).mean() > 0.9


def test_predict_uses_full_fits_for_kfold_layers(local_scheduler):
    layer = Layer([Ridge(alpha=1.0)], FoldIndex(4))
    pp = ParallelProcessing(local_scheduler)
    pp.map(layer, X_REG, Y_REG)
    full = Ridge(alpha=1.0).fit(X_REG, Y_REG)
    np.testing.assert_allclose(pp.predict(layer, X_REG[:7])[:, 0], full.predict(X_REG[:7]))


def test_full_index_predicts_in_sample(local_scheduler):
    layer = Layer([LinearRegression()], FullIndex())
    P = ParallelProcessing(local_scheduler).map(layer, X_REG, Y_REG)
    np.testing.assert_allclose(P[:, 0], LinearRegression().fit(X_REG, Y_REG).predict(X_REG))


def test_bad_input_is_refused_before_any_task(local_scheduler):
    pp = ParallelProcessing(local_scheduler)
    with pytest.raises(lk.InputError, match="120 rows but y has 119"):
        pp.map(Layer([Ridge()]), X_REG, Y_REG[:-1])
    with pytest.raises(lk.InputError, match="has no predict"):
        Layer([("scaler", StandardScaler())])
    with pytest.raises(lk.InputError, match="duplicate estimator name"):
        Layer([Ridge(), Ridge()])
    with pytest.raises(lk.InputError, match="no rows to fit on"):
        pp.map(Layer([Ridge()], BlendIndex(5)), X_REG[:5], Y_REG[:5])
    with pytest.raises(lk.InputError, match="no rows to predict"):
        pp.map(Layer([Ridge()], BlendIndex(0.001)), X_REG, Y_REG)
    with pytest.raises(lk.InputError, match="propagate_features"):
        pp.map(Layer([Ridge()], propagate_features=[9]), X_REG, Y_REG)
    with pytest.raises(lk.InputError, match="unknown layer"):
        pp.stack([Layer([Ridge()], name="a")], X_REG, Y_REG, return_preds=["b"])
    with pytest.raises(lk.InputError, match="predict before"):
        pp.predict(Layer([Ridge()]), X_REG)
    with pytest.raises(lk.InputError, match="cache must be"):
        ParallelProcessing(local_scheduler, cache="disk")


def test_a_failing_estimator_is_located_and_the_scheduler_stays_usable(scheduler):
    layer = Layer([Ridge(), ("boom", Boom())], FoldIndex(2), name="L1")
    pp = ParallelProcessing(scheduler)
    with pytest.raises(lk.TaskError, match="boom on purpose") as info:
        pp.map(layer, X_REG, Y_REG)
    where = info.value.where
    assert where["estimator"] == "boom" and where["layer"] == "L1" and where["fold"] in (0, 1, "final")
    assert info.value.original_type == "ValueError"
    P = pp.map(Layer([Ridge()], FoldIndex(2)), X_REG, Y_REG)  # usable at once
    assert P.shape == (120, 1)
