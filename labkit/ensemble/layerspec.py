"""A layer as a scikit-learn parameter: what ``.add(...)`` records on an ensemble.

An ensemble's layers are state given after construction (``.add``), yet
``get_params``/``set_params``/``clone`` need them as constructor parameters.
So ``.add`` appends a :class:`LayerSpec` to the ensemble's ``layers``
parameter, and the ensemble exposes each one as ``layer-1``, ``layer-2``, ...
with the layer's named estimators under it: ``layer-1__ridge__alpha``
(as ML-Ensemble did).  A spec holds no fitted state; at fit the ensemble
builds a :class:`~labkit.ensemble.Layer` from a clone of it.

Examples
--------
>>> from sklearn.linear_model import Ridge
>>> spec = LayerSpec([Ridge(), ("r2", Ridge(alpha=2.0))])
>>> spec.get_params()["r2__alpha"]
2.0
>>> spec.set_params(ridge__alpha=5.0).get_params()["ridge__alpha"]
5.0
"""

from __future__ import annotations

from typing import Any

from sklearn.base import BaseEstimator

from ..constraints import Options

__all__ = ["LayerSpec", "KINDS", "KIND_RULE", "case_pairs"]

#: Layer kinds: out-of-fold (k-fold), blend (fit one part, predict the rest), subsemble
#: (per partition of the rows), full (fit and predict every row).
KINDS = ("stack", "blend", "subsemble", "full")

#: What a layer's ``kind`` may be.
KIND_RULE = [Options(KINDS)]


class LayerSpec(BaseEstimator):
    """The parameters of one ensemble layer.

    Parameters
    ----------
    estimators : list or dict
        ``[(name, estimator), ...]`` or bare estimators (named after their
        class, lower case), or ``{case: [...]}`` with ``preprocessing``.
    kind : {"stack", "blend", "subsemble", "full"}
        How rows are split; the ensemble's ``folds``/``test_size``/``partitions``
        set the split unless ``indexer`` is given.
    preprocessing : dict, optional
        ``{case: [transformer, ...]}`` fitted before each estimator of the case.
    proba : bool
        The layer outputs class probabilities (``predict_proba``) rather than
        predictions.
    propagate_features : list of int, optional
        Input columns copied into the layer's output.
    indexer : int, labkit indexer or scikit-learn splitter, optional
        This layer's own split, instead of the ensemble's.
    """

    def __init__(
        self,
        estimators=None,
        kind="stack",
        preprocessing=None,
        proba=False,
        propagate_features=None,
        indexer=None,
    ):
        self.estimators = estimators
        self.kind = kind
        self.preprocessing = preprocessing
        self.proba = proba
        self.propagate_features = propagate_features
        self.indexer = indexer

    def named(self) -> list[tuple[str, Any]]:
        """``(name, estimator)`` of every estimator, cases in order; lenient (no checks)."""
        return [(name, est) for _, items in case_pairs(self.estimators) for name, est in items]

    def get_params(self, deep=True):
        out = super().get_params(deep=False)
        if not deep:
            return out
        for name, est in self.named():
            out[name] = est
            if hasattr(est, "get_params") and not isinstance(est, type):
                out.update((f"{name}__{k}", v) for k, v in est.get_params(deep=True).items())
        return out

    def set_params(self, **params):
        if not params:
            return self
        own = set(super().get_params(deep=False))
        # Whole estimators first (so "ridge" then "ridge__alpha" reaches the new one).
        for key in [k for k in params if "__" not in k and k not in own]:
            self._replace(key, params.pop(key))
        nested: dict = {}
        for key in [k for k in params if "__" in k]:
            name, sub = key.split("__", 1)
            if name in own:
                continue  # a parameter of a plain value: BaseEstimator's
            nested.setdefault(name, {})[sub] = params.pop(key)
        named = dict(self.named())
        for name, sub in nested.items():
            if name not in named:
                raise ValueError(
                    f"Invalid parameter {name!r} for layer {self!r}: its "
                    f"estimators are {sorted(named)}"
                )
            named[name].set_params(**sub)
        return super().set_params(**params)

    def _replace(self, name: str, estimator) -> None:
        """Put ``estimator`` in the place of the one called ``name`` (pairs from then on)."""
        cases = case_pairs(self.estimators)
        if name not in {n for _, items in cases for n, _ in items}:
            raise ValueError(f"Invalid parameter {name!r} for layer {self!r}")
        rebuilt = {
            case: [(n, estimator if n == name else e) for n, e in items] for case, items in cases
        }
        self.estimators = (
            rebuilt[None]
            if isinstance(self.estimators, list) or list(rebuilt) == [None]
            else rebuilt
        )


def case_pairs(estimators) -> list[tuple[object, list[tuple[str, Any]]]]:
    """``[(case, [(name, estimator)])]``; None is the case of a plain list; nothing for junk."""
    if isinstance(estimators, dict):
        return [(case, _pairs(items)) for case, items in estimators.items()]
    return [(None, _pairs(estimators))]


def _pairs(items) -> list[tuple[str, Any]]:
    """Pairs or bare estimators as ``(name, estimator)``, named as :class:`Layer` names them."""
    if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
        return []
    return [
        (str(item[0]), item[1])
        if isinstance(item, tuple) and len(item) == 2
        else (default_name(item), item)
        for item in items
    ]


def default_name(estimator) -> str:
    """The name of a bare estimator: its class's, lower case (a class given by mistake too,
    so that the error about it names it)."""
    cls = estimator if isinstance(estimator, type) else type(estimator)
    return cls.__name__.lower()
