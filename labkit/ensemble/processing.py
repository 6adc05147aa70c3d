"""Fitting layers in parallel on a labkit scheduler: map one layer, stack several.

Every ``(estimator, fold)`` of a layer is one task.  The inputs travel once
(inside the layer's task callable, see :mod:`.cache`), each task returns the
predictions of its fold's test rows, and they are written into one
preallocated output array as results arrive.  The tasks of a layer show on
the scheduler's board as one phase (node = the layer).

Examples
--------
>>> import numpy as np
>>> from sklearn.linear_model import LinearRegression, Ridge
>>> from labkit.ensemble import FoldIndex, Layer, ParallelProcessing
>>> X = np.random.default_rng(0).normal(size=(40, 3)); y = X @ [1.0, 2.0, 3.0]
>>> layer = Layer([LinearRegression(), Ridge()], FoldIndex(4))
>>> P = ParallelProcessing().map(layer, X, y)
>>> P.shape, sorted(layer.fitted_)
((40, 2), ['linearregression', 'ridge'])
"""

from __future__ import annotations

import threading

import numpy as np

from ..errors import InputError
from ..runs import start
from .cache import as_scheduler, choose_mode
from .fold_fits import FINAL, FitCallable, predict_columns, run_phase
from .validation import check_inputs, dense_columns, n_rows

__all__ = ["ParallelProcessing", "predict_layers"]


class ParallelProcessing:
    """Fits layers of estimators on a scheduler.

    Parameters
    ----------
    scheduler : labkit Scheduler, optional
        Where tasks run (a :class:`~labkit.LocalScheduler` by default).
    cache : {"auto", "memory", "memmap"}
        How inputs reach the tasks: ``"auto"`` memory-maps them from a cache
        folder when Dask workers share this machine, else sends them in memory
        (once per worker).
    cache_dir : str, optional
        Where cache folders are made (the system's temporary folder by default).
    """

    def __init__(self, scheduler=None, cache: str = "auto", cache_dir: str | None = None):
        self.scheduler = as_scheduler(scheduler)
        self.mode = choose_mode(self.scheduler, cache)
        self.cache_dir = cache_dir
        self._controls: list = []  # of the fits under way, for cancel()
        self._lock = threading.Lock()

    # -- public verbs --------------------------------------------------------------------

    def map(self, layer, X, y=None, return_preds: bool = True, wait: bool = True, groups=None):
        """Fit every (estimator, fold) of ``layer`` in parallel; its predictions.

        Returns the layer's output (rows of ``indexer.output_rows``), or the
        layer when ``return_preds`` is false; with ``wait=False`` a
        :class:`~labkit.Run` whose ``result()`` is that.  ``groups`` go to a
        grouped scikit-learn splitter (``GroupKFold``).  ``X`` may be a scipy
        sparse matrix: the estimators get sparse rows, the output is dense.
        """
        X, y, groups = _check_layers([layer], X, y, groups)
        classes = _all_classes([layer], y)

        def job(scope):
            preds, _ = self.fit_layer(scope, 0, layer, X, y, groups, classes)
            return preds if return_preds else layer

        return self._start(job, 1, wait)

    def stack(self, layers, X, y=None, return_preds=True, wait: bool = True, groups=None):
        """Fit ``layers`` in sequence, each on the previous one's predictions.

        ``return_preds``: True for the last layer's output, a list of layer
        names for ``{name: output}``, False for the layers.  A blend layer's
        output holds fewer rows: the targets follow (are rebased onto) it.
        ``wait=False`` returns a :class:`~labkit.Run` at once; ``groups`` go to
        grouped scikit-learn splitters (and follow the rows as the targets do).
        """
        layers = list(layers)
        if not layers:
            raise InputError("stack needs at least one layer")
        names = [layer.name for layer in layers]
        if len(set(names)) != len(names):
            raise InputError(f"layer names must differ to be told apart, got {names}")
        wanted = _wanted(return_preds, names)
        X, y, groups = _check_layers(layers, X, y, groups)
        classes = _all_classes(layers, y)  # of all of y: a later layer's rows may lack one

        def job(scope):
            kept, out, targets, labels = {}, X, y, groups
            for i, layer in enumerate(layers):
                out, rows = self.fit_layer(scope, i, layer, out, targets, labels, classes)
                targets = None if targets is None else targets[rows]
                labels = None if labels is None else labels[rows]
                if layer.name in wanted:
                    kept[layer.name] = out
            if return_preds is True:
                return out
            return kept if wanted else layers

        return self._start(job, len(layers), wait)

    def predict(self, layers, X) -> np.ndarray:
        """New data through fitted layers (their final fits), in sequence."""
        return predict_layers(layers, X)

    def cancel(self) -> None:
        """Cancel the fits under way (from another thread); they raise ``CancelledError``."""
        with self._lock:
            controls = list(self._controls)
        for control in controls:
            control.cancel()

    def _start(self, job, n_layers: int, wait: bool):
        """Run ``job`` as a run on the scheduler; :meth:`cancel` reaches it meanwhile."""

        def tracked(scope):
            with self._lock:
                self._controls.append(scope.control)
            try:
                return job(scope)
            finally:
                with self._lock:
                    self._controls.remove(scope.control)

        return start(
            "ensemble",
            [self.scheduler],
            tracked,
            wait=wait,
            n_nodes=n_layers,
            detail={"nodes": n_layers},
        )

    # -- one layer (the step map, stack and the ensembles repeat) ---------------------------------------------------------------------

    def fit_layer(self, scope, index: int, layer, X, y, groups=None, classes=None):
        """Fit one layer as one batch; ``(output, rows of X the output holds)``.

        ``classes`` are the probability columns of a ``proba`` layer (all the
        classes of the ensemble's ``y``); by default those of ``y``.
        """
        n = n_rows(X)
        try:
            folds = layer.indexer.folds(n, y, groups)
            rows = layer.indexer.output_rows(n, folds)
            restrict = _partitions(layer, n, y)
        except InputError as err:
            err.locate(layer=layer.name)
            raise
        classes = _classes(layer, y, classes)
        out, offsets = _allocate(layer, X, rows, classes)
        position = np.full(n, -1)
        position[rows] = np.arange(len(rows))
        tasks = [(name, f) for name, _ in layer.estimators() for f in range(len(folds))]
        if not layer.indexer.single_fit:
            tasks += [(name, FINAL) for name, _ in layer.estimators()]
        results = run_phase(
            scope,
            self.scheduler,
            index,
            layer.name,
            tasks,
            lambda inputs: FitCallable(layer, inputs, folds, classes, restrict),
            (X, y, self.mode, self.cache_dir),
            where={"layer": layer.name},
            detail=_fits(len(layer.estimators()), len(folds), not layer.indexer.single_fit),
        )
        fitted = {}
        for name, fold, preds, model, _ in results:
            if preds is not None:
                out[position[folds[fold][1]], offsets[name]] = preds
            if model is not None:
                fitted[name] = model
        layer.fitted_, layer.classes_ = fitted, classes
        return out, rows


def predict_layers(layers, X, checked: bool = False) -> np.ndarray:
    """New data through fitted layers (their final fits), in sequence.

    ``checked``: ``X`` went through :func:`~.validation.check_inputs` already.
    """
    layers = [layers] if not isinstance(layers, (list, tuple)) else list(layers)
    if not layers:
        raise InputError("predict needs at least one fitted layer", argument="layers")
    for layer in layers:
        if layer.fitted_ is None:
            raise InputError("predict before the layer was fitted", layer=layer.name)
    if not checked:
        X, _, _ = _check_layers(layers, X, fit=False)
    for layer in layers:
        columns = [dense_columns(X, layer.propagate_features)] if layer.propagate_features else []
        columns += [
            predict_columns(layer.fitted_[name], X, layer.proba, layer.classes_)
            for name, _ in layer.estimators()
        ]
        X = np.hstack(columns)
    return X


def _partitions(layer, n: int, y=None) -> dict:
    """``{estimator name: its partition's rows}`` of a subsemble layer, else empty."""
    if not layer.partition_of:
        return {}
    parts = layer.indexer.partition_rows(n, y)
    return {name: parts[p] for name, p in layer.partition_of.items()}


def _check_layers(layers, X, y=None, groups=None, fit: bool = True):
    """:func:`~.validation.check_inputs` for ``layers``: NaN as the first one's estimators
    take it; to ``fit``, class labels ``y`` when one of them classifies."""
    first = layers[0]
    return check_inputs(
        X,
        y,
        groups,
        steps=first.first_steps(),
        classifier=fit and any(layer.classifies for layer in layers),
        layer=first.name,
    )


def _all_classes(layers, y):
    """The classes of ``y`` when a layer outputs probabilities, else None."""
    return np.unique(y) if y is not None and any(layer.proba for layer in layers) else None


def _classes(layer, y, classes=None):
    """The probability columns of a ``proba`` layer (``classes``, or those of ``y``), else None."""
    if not layer.proba:
        return None
    if y is None:
        raise InputError("a proba layer needs class labels y", layer=layer.name, argument="y")
    return np.unique(y) if classes is None else np.asarray(classes)


def _allocate(layer, X, rows, classes):
    """The output array (propagated features filled in) and each estimator's columns."""
    per = len(classes) if classes is not None else 1
    out = np.zeros((len(rows), layer.n_columns(per if layer.proba else None)))
    k = len(layer.propagate_features)
    if k:
        try:
            out[:, :k] = dense_columns(X[rows], layer.propagate_features)
        except IndexError:
            raise InputError(
                f"propagate_features {layer.propagate_features} are not columns "
                f"of X ({X.shape[1]} columns)",
                layer=layer.name,
                argument="propagate_features",
            ) from None
    offsets = {}
    for j, (name, _) in enumerate(layer.estimators()):
        offsets[name] = slice(k + j * per, k + (j + 1) * per)
    return out, offsets


def _wanted(return_preds, names) -> set:
    """Layer names whose outputs ``stack`` returns."""
    if return_preds is True or return_preds is False or return_preds is None:
        return set()
    wanted = set(return_preds)
    unknown = wanted - set(names)
    if unknown:
        raise InputError(f"return_preds names unknown layer(s) {sorted(unknown)} (layers: {names})")
    return wanted


def _fits(n_estimators: int, n_folds: int, final: bool) -> str:
    """What a layer's tasks are, for the board: ``2 estimators × 5 folds (+ 2 final fits)``."""
    text = (
        f"{n_estimators} estimator{'s' * (n_estimators != 1)} × {n_folds} "
        f"fold{'s' * (n_folds != 1)}"
    )
    return text + (f" (+ {n_estimators} final fit{'s' * (n_estimators != 1)})" if final else "")
