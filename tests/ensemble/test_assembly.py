"""An ensemble's layer specs made into backend layers (labkit.ensemble.assembly), and the
public parts the ensembles use of each other (fit_layer, final_estimator, the subsets)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.metrics import r2_score

import labkit as lk
from labkit.ensemble import (BlendIndex, FoldIndex, FullIndex, Layer, LayerSpec,
                             ParallelProcessing, SubsetIndex)
from labkit.ensemble import subsemble as subsemble_module
from labkit.ensemble import subsets
from labkit.ensemble.assembly import build_layer, classifies, layer_scores, meta_layer

X = np.random.default_rng(0).normal(size=(40, 3))
Y = X @ [1.0, 2.0, 3.0]


def default(kind, stratify):
    """The split an ensemble would choose, recorded to check what build_layer asks."""
    return {"stack": FoldIndex(3, stratify=stratify), "blend": BlendIndex(0.5),
            "full": FullIndex(), "subsemble": SubsetIndex(2, 2)}[kind]


@pytest.mark.parametrize("kind, index", [("stack", FoldIndex), ("blend", BlendIndex),
                                         ("full", FullIndex), ("subsemble", SubsetIndex)])
def test_each_kind_of_spec_becomes_a_layer_with_its_split(kind, index):
    spec = LayerSpec([Ridge()], kind)
    layer = build_layer(spec, 2, "regressor", default)
    assert isinstance(layer, Layer) and layer.name == "layer-2"
    assert isinstance(layer.indexer, index)
    assert layer.estimators()[0][1] is not spec.named()[0][1]     # a clone: the spec stays unfitted
    names = [n for n, _ in layer.estimators()]
    assert names == (["ridge.1", "ridge.2"] if kind == "subsemble" else ["ridge"])


def test_a_spec_of_an_unknown_kind_is_an_input_error_naming_the_layer():
    with pytest.raises(lk.InputError, match="layer kind") as info:
        build_layer(LayerSpec([Ridge()], "stack").set_params(kind="pile"), 1, None, default)
    assert info.value.where["layer"] == "layer-1"


def test_a_classifying_layer_is_stratified_without_a_meta_estimator():
    assert classifies(LayerSpec([LogisticRegression()], "stack"))
    assert not classifies(LayerSpec([Ridge()], "stack"))
    layer = build_layer(LayerSpec([LogisticRegression()], "stack"), 1, None, default)
    assert layer.indexer.stratify


def test_the_meta_layer_is_one_fit_of_a_clone_and_its_estimator_is_public_once_fitted():
    assert meta_layer(None, "SuperLearner") is None
    meta = LinearRegression()
    layer = meta_layer(meta, "SuperLearner")
    assert isinstance(layer.indexer, FullIndex) and layer.estimators()[0][1] is not meta
    with pytest.raises(lk.InputError, match="not fitted"):
        layer.final_estimator("meta")
    ParallelProcessing().map(layer, X, Y)
    assert isinstance(layer.final_estimator("meta"), LinearRegression)


def test_fit_layer_is_the_step_map_and_the_ensembles_take():
    layer = Layer([Ridge()], FoldIndex(4))
    out = ParallelProcessing().map(layer, X, Y)
    scores = layer_scores(r2_score, layer, out, Y, None)
    assert scores == {"ridge": pytest.approx(r2_score(Y, out[:, 0]))}
    assert callable(ParallelProcessing.fit_layer)


def test_the_subsemble_module_keeps_the_names_that_moved_to_subsets():
    assert subsemble_module.SubsetIndex is subsets.SubsetIndex is SubsetIndex
    assert subsemble_module.subsemble_layer is subsets.subsemble_layer


def test_a_blend_takes_a_numpy_row_count_as_a_count():
    """test_size: a fraction in (0, 1) or a positive row count (any int, NumPy's too)."""
    assert BlendIndex(np.int64(10)).output_rows(40).tolist() == list(range(30, 40))
    assert len(BlendIndex(0.25).output_rows(40)) == 10
    with pytest.raises(lk.InputError, match="test_size"):
        BlendIndex(0)
