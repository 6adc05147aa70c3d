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
import uuid

import numpy as np

from ..errors import CancelledError, InputError, LabkitError
from ..events import PhaseFinished, PhaseStarted, RunFinished, RunStarted, TaskInfo
from ..scheduling import LocalScheduler
from .cache import choose_mode, open_inputs
from .tasks import FINAL, FitCallable, predict_columns

__all__ = ["ParallelProcessing"]


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
        self.scheduler = scheduler if scheduler is not None else LocalScheduler()
        self.mode = choose_mode(self.scheduler, cache)
        self.cache_dir = cache_dir
        self._cancelled = threading.Event()
        self._run = None

    # -- public verbs --------------------------------------------------------------------

    def map(self, layer, X, y=None, return_preds: bool = True):
        """Fit every (estimator, fold) of ``layer`` in parallel; its predictions.

        Returns the layer's output (rows of ``indexer.output_rows``), or the
        layer when ``return_preds`` is false.
        """
        X, y = _check(X, y, layer.name)
        self._begin(1)
        try:
            preds, _ = self._fit_layer(0, layer, X, y)
        except BaseException as exc:
            self._end(exc)
            raise
        self._end(None)
        return preds if return_preds else layer

    def stack(self, layers, X, y=None, return_preds=True):
        """Fit ``layers`` in sequence, each on the previous one's predictions.

        ``return_preds``: True for the last layer's output, a list of layer
        names for ``{name: output}``, False for the layers.  A blend layer's
        output holds fewer rows: the targets follow (are rebased onto) it.
        """
        layers = list(layers)
        if not layers:
            raise InputError("stack needs at least one layer")
        names = [layer.name for layer in layers]
        if len(set(names)) != len(names):
            raise InputError(f"layer names must differ to be told apart, got {names}")
        wanted = _wanted(return_preds, names)
        X, y = _check(X, y, names[0])
        kept = {}
        self._begin(len(layers))
        try:
            for i, layer in enumerate(layers):
                X, rows = self._fit_layer(i, layer, X, y)
                y = None if y is None else y[rows]
                if layer.name in wanted:
                    kept[layer.name] = X
        except BaseException as exc:
            self._end(exc)
            raise
        self._end(None)
        if return_preds is True:
            return X
        return kept if wanted else layers

    def predict(self, layers, X) -> np.ndarray:
        """New data through fitted layers (their final fits), in sequence."""
        layers = [layers] if not isinstance(layers, (list, tuple)) else list(layers)
        X, _ = _check(X, None, layers[0].name if layers else "layer")
        for layer in layers:
            if layer.fitted_ is None:
                raise InputError("predict before the layer was fitted", layer=layer.name)
            columns = [X[:, layer.propagate_features]] if layer.propagate_features else []
            columns += [predict_columns(layer.fitted_[name], X, layer.proba, layer.classes_)
                        for name, _ in layer.estimators()]
            X = np.hstack(columns)
        return X

    def cancel(self) -> None:
        """Cancel the tasks of the fit under way (from another thread); it raises CancelledError."""
        self._cancelled.set()
        self.scheduler.cancel()

    # -- one layer ---------------------------------------------------------------------

    def _fit_layer(self, index: int, layer, X, y):
        """Fit one layer; ``(output, rows of X the output holds)``."""
        n = len(X)
        folds = layer.indexer.folds(n)
        rows = layer.indexer.output_rows(n)
        classes = _classes(layer, y)
        out, offsets = _allocate(layer, X, rows, classes)
        position = np.full(n, -1)
        position[rows] = np.arange(len(rows))
        tasks = [(name, f) for name, _ in layer.estimators() for f in range(len(folds))]
        if not layer.indexer.single_fit:
            tasks += [(name, FINAL) for name, _ in layer.estimators()]
        info = TaskInfo(self._run, -1, -1, "train", index, layer.name, 0)
        s = self.scheduler
        s.emit(PhaseStarted(self._run, index, layer.name, 0, False, len(tasks)))
        fitted = {}
        client = getattr(s, "client", None)
        with s.exclusive(), open_inputs(X, y, self.mode, self.cache_dir, client) as inputs:
            callable_ = FitCallable(layer, inputs, folds, classes)
            try:
                for k, task in enumerate(tasks):
                    self._check_cancelled()
                    s.add_task(task, callable_, info=_replace(info, chunk=k))
                results = s.get_results()
            except LabkitError as exc:
                s.emit(PhaseFinished(self._run, index, layer.name, 0, len(tasks), ok=False))
                raise exc.locate(layer=layer.name)
            self._check_cancelled()
            for name, fold, preds, model, _ in results:
                if preds is not None:
                    out[position[folds[fold][1]], offsets[name]] = preds
                if model is not None:
                    fitted[name] = model
        layer.fitted_, layer.classes_ = fitted, classes
        s.emit(PhaseFinished(self._run, index, layer.name, 0, len(tasks)))
        return out, rows

    def _check_cancelled(self) -> None:
        if self._cancelled.is_set():
            raise CancelledError("the ensemble fit was cancelled")

    def _begin(self, n_layers: int) -> None:
        self._cancelled.clear()
        self._run = uuid.uuid4().hex[:8]
        self.scheduler.emit(RunStarted(self._run, "train", n_layers))

    def _end(self, error) -> None:
        self.scheduler.emit(RunFinished(self._run, error is None,
                                        None if error is None else str(error),
                                        isinstance(error, CancelledError)))


def _check(X, y, layer):
    """``X`` as a 2-D array and ``y`` as an array of the same length."""
    X = np.asarray(X)
    if X.ndim != 2:
        raise InputError(f"X must be 2-D (rows, columns), got shape {X.shape}", layer=layer)
    if y is not None:
        y = np.asarray(y)
        if len(y) != len(X):
            raise InputError(f"X has {len(X)} rows but y has {len(y)}", layer=layer)
    return X, y


def _classes(layer, y):
    """The sorted classes of ``y`` for a ``proba`` layer, else None."""
    if not layer.proba:
        return None
    if y is None:
        raise InputError("a proba layer needs class labels y", layer=layer.name)
    return np.unique(y)


def _allocate(layer, X, rows, classes):
    """The output array (propagated features filled in) and each estimator's columns."""
    per = len(classes) if classes is not None else 1
    out = np.zeros((len(rows), layer.n_columns(per if layer.proba else None)))
    k = len(layer.propagate_features)
    if k:
        try:
            out[:, :k] = X[rows][:, layer.propagate_features]
        except IndexError:
            raise InputError(f"propagate_features {layer.propagate_features} are not columns "
                             f"of X ({X.shape[1]} columns)", layer=layer.name) from None
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
        raise InputError(f"return_preds names unknown layer(s) {sorted(unknown)} "
                         f"(layers: {names})")
    return wanted


def _replace(info: TaskInfo, **changes) -> TaskInfo:
    import dataclasses
    return dataclasses.replace(info, **changes)
