"""An ensemble's parameters made into backend layers, and the scores of a fitted layer.

:class:`~labkit.ensemble.BaseEnsemble` records layers as :class:`.LayerSpec`
parameters; at fit each becomes a :class:`.Layer` (estimators cloned, its
split chosen), the meta estimator one more layer.  Below :mod:`.base`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.base import clone

from ..constraints import check_argument
from ..errors import InputError
from .indexers import FullIndex
from .layer import Layer, check_estimator
from .layerspec import KIND_RULE, LayerSpec
from .splitters import as_indexer
from .subsets import subsemble_layer
from .validation import is_classifier_like

__all__ = ["build_layer", "meta_layer", "classifies", "layer_scores"]

#: The split of a layer of a kind, from the ensemble's settings: ``(kind, stratify)``.
DefaultIndexer = Callable[[str, bool], Any]


def build_layer(spec: LayerSpec, i: int, kind: str | None, default: DefaultIndexer) -> Layer:
    """The backend layer of ``spec`` (estimators cloned: the params stay unfitted).

    ``kind`` is the ensemble's (``"classifier"``...): an int number of folds (and a
    blend or subsemble split) is stratified for a classifier, as ``check_cv`` does;
    without a meta estimator, when the layer itself classifies.  ``default`` gives
    the split when the spec has no indexer of its own.
    """
    name = f"layer-{i}"
    check_argument("layer kind", spec.kind, KIND_RULE, layer=name)
    try:
        estimators = clone(spec.estimators, safe=False)
        stratify = kind == "classifier" or (kind is None and classifies(spec))
        indexer = (
            as_indexer(spec.indexer, what="indexer", classifier=stratify)
            if spec.indexer is not None
            else default(spec.kind, stratify)
        )
    except InputError as err:
        err.locate(layer=name)
        raise
    except (TypeError, ValueError) as exc:
        raise InputError(str(exc), layer=name) from None
    make = subsemble_layer if spec.kind == "subsemble" else _layer
    return make(
        estimators,
        indexer,
        clone(spec.preprocessing, safe=False),
        spec.proba,
        spec.propagate_features,
        name,
    )


def _layer(
    estimators: Any, indexer: Any, preprocessing: Any, proba: Any, propagate: Any, name: str
) -> Layer:
    """A plain layer, called as :func:`~.subsets.subsemble_layer` is."""
    return Layer(
        estimators,
        indexer,
        preprocessing,
        proba=proba,
        propagate_features=propagate,
        name=name,
    )


def meta_layer(meta_estimator: Any, owner: str) -> Layer | None:
    """The meta estimator as a one-fit layer (a clone), or None; ``owner`` names the ensemble."""
    if meta_estimator is None:
        return None
    check_estimator(meta_estimator, "meta", estimator=owner, argument="meta_estimator")
    return Layer([("meta", clone(meta_estimator, safe=False))], FullIndex(), name="meta")


def classifies(spec: LayerSpec) -> bool:
    """Whether a layer spec outputs probabilities or holds only classifiers."""
    named = spec.named()
    return bool(spec.proba) or (bool(named) and all(is_classifier_like(e) for _, e in named))


def layer_scores(
    scorer: Callable[[Any, Any], Any],
    layer: Layer,
    out: np.ndarray,
    targets: Any,
    decode: np.ndarray | None,
) -> dict[str, float]:
    """``{estimator: scorer(y, its out-of-fold predictions)}`` of a fitted layer.

    ``decode``: a classifier's ``classes_``, to score labels rather than their codes.
    """
    k, per = len(layer.propagate_features), out.shape[1] - len(layer.propagate_features)
    per //= len(layer.estimators())
    scores = {}
    for j, (name, _) in enumerate(layer.estimators()):
        cols = out[:, k + j * per : k + (j + 1) * per]
        pred = cols.argmax(1) if layer.proba else cols[:, 0]
        if decode is not None:
            scores[name] = float(scorer(decode[targets], decode[np.rint(pred).astype(int)]))
        else:
            scores[name] = float(scorer(targets, pred))
    return scores
