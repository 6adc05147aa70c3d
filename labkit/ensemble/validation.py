"""What the ensembles are given, checked in one place: ``X``, ``y`` and ``groups``.

Every entry of :mod:`labkit.ensemble` that takes data (``ParallelProcessing.map``,
``.stack`` and ``.predict``, ``ParallelEvaluation.evaluate``, the ensembles'
``fit``, ``transform`` and ``predict``) goes through :func:`check_inputs`
before any task starts, so a bad input is one :class:`~labkit.errors.InputError`
naming the argument (``X``, ``y``, ``groups``) and the place, never an
exception from deep inside a task:

* ``X`` is 2-D with at least one row (two for an ensemble), numeric; scipy
  sparse input is accepted and becomes CSR (the folds index its rows);
* NaN is accepted where every estimator that sees ``X`` first takes it (its
  scikit-learn ``allow_nan`` tag, as scikit-learn's stacking decides), refused
  otherwise; inf never;
* ``y`` (and ``groups``) hold one value a row; a classifier's ``y`` holds class
  labels, at least two classes.

Examples
--------
>>> import numpy as np, scipy.sparse as sp
>>> X, y, _ = check_inputs(sp.random(6, 3, density=0.5, random_state=0), np.arange(6) % 2)
>>> X.format, n_rows(X)
('csr', 6)
>>> check_inputs(np.ones(4), [0, 1, 0, 1], layer="L1")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
labkit.errors.InputError: X must be 2-D (rows, columns), got shape (4,). ... [argument X, layer L1]
"""

from __future__ import annotations

from typing import NoReturn

import numpy as np
import scipy.sparse as sp
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_array, column_or_1d, validate_data

from ..errors import InputError

__all__ = [
    "check_inputs",
    "n_rows",
    "dense_columns",
    "class_labels",
    "refuses_nan",
    "takes_sparse",
    "is_classifier_like",
]


def check_inputs(
    X,
    y=None,
    groups=None,
    *,
    steps=(),
    classifier=False,
    needs_y=False,
    owner=None,
    reset=True,
    min_rows=1,
    y_numeric=False,
    **where,
):
    """``X``, ``y`` and ``groups`` checked and converted; errors name the argument.

    Parameters
    ----------
    X : array-like or scipy sparse matrix of shape (n_samples, n_features)
    y : array-like of shape (n_samples,) or (n_samples, n_outputs), optional
    groups : array-like of shape (n_samples,), optional
    steps : list of (name, estimator)
        What sees ``X`` first (each estimator, or the first transformer of
        its preprocessing): NaN passes when all of them take it.
    classifier : bool
        ``y`` must hold class labels, at least two of them.
    needs_y : bool
        ``y`` must be given (a supervised estimator's ``fit``).
    owner : scikit-learn estimator, optional
        Checks ``X`` with ``validate_data`` on it (``n_features_in_`` and
        feature names set at fit, ``reset=True``, compared after); ``y`` must
        then be 1-D.
    min_rows : int
        Rows ``X`` needs.
    y_numeric : bool
        ``y`` must be numbers (a regressor's targets).
    **where
        Where an error is located (``layer=``, ``estimator=``).

    Returns
    -------
    X : ndarray or scipy.sparse.csr_matrix
    y : ndarray or None
    groups : ndarray or None
    """
    n = _check_shape(X, min_rows, where)
    if y is None and (needs_y or classifier):
        _no_y(where)
    for name, values in (("y", y), ("groups", groups)):
        if values is not None:
            _check_length(name, values, n, where)
    X = _check_X(X, steps, owner, reset, min_rows, where)
    if y is not None:
        y = _check_y(y, one_column=owner is not None or classifier, numeric=y_numeric, where=where)
        if classifier:
            _check_classes(y, where)
    return X, y, None if groups is None else np.asarray(groups)


def _no_y(where: dict) -> NoReturn:
    """The error for a fit without targets."""
    raise InputError(
        "requires y to be passed, but the target y is None: pass the targets (one a row of X)",
        argument="y",
        **where,
    )


def _check_shape(X, min_rows: int, where: dict) -> int:
    """The rows of ``X``, once it is known to be 2-D with at least ``min_rows`` rows."""
    if X is None:
        raise InputError(
            "X is None: pass a 2-D array of shape (rows, columns)", argument="X", **where
        )
    try:
        shape = _shape(X)
    except ValueError:  # a ragged list: rows of different lengths
        raise InputError("X is ragged: its rows differ in length", argument="X", **where) from None
    if len(shape) != 2:
        hint = (
            (
                ". Reshape your data: X.reshape(-1, 1) if it holds one feature, "
                "X.reshape(1, -1) if it is one row"
            )
            if len(shape) == 1
            else ""
        )
        raise InputError(
            f"X must be 2-D (rows, columns), got shape {tuple(shape)}{hint}", argument="X", **where
        )
    n = int(shape[0])
    if n < min_rows:
        raise InputError(
            f"X has {n} row{'s' * (n != 1)} (n_samples = {n}): at least "
            f"{min_rows} {'are' if min_rows > 1 else 'is'} needed",
            argument="X",
            **where,
        )
    return n


def _check_length(name: str, values, n: int, where: dict) -> None:
    """``values`` hold one entry a row of ``X``."""
    shape = _shape(values)
    if len(shape) == 0:
        raise InputError(
            f"{name} must hold one value a row of X, got the scalar {values!r}",
            argument=name,
            **where,
        )
    if shape[0] != n:
        raise InputError(f"X has {n} rows but {name} has {shape[0]}", argument=name, **where)


def _shape(a) -> tuple:
    """The shape of an array, sparse matrix, DataFrame or nested list (never converted
    when it has one: scikit-learn's checks pass array-likes that refuse ``np.shape``)."""
    shape = getattr(a, "shape", None)
    return tuple(shape) if isinstance(shape, tuple) else np.asarray(a).shape


def _check_X(X, steps, owner, reset: bool, min_rows: int, where: dict):
    """``X`` as a numeric array or CSR matrix; NaN only where ``steps`` all take it."""
    refusers = refuses_nan(steps)
    params = dict(
        accept_sparse="csr",
        ensure_min_samples=min_rows,
        ensure_all_finite=True if refusers else "allow-nan",
    )
    try:
        if owner is not None:
            X = validate_data(owner, X, reset=reset, **params)
        else:
            X = check_array(X, input_name="X", **params)
    except ValueError as exc:
        message = str(exc)
        if "NaN" in message and refusers:
            message += (
                f" ({', '.join(refusers)} cannot take NaN: impute first, for "
                "instance with preprocessing={case: [SimpleImputer()]})"
            )
        raise InputError(message, argument="X", **where) from None
    return _small_index(X) if sp.issparse(X) else X


def _small_index(X):
    """A CSR matrix with 32-bit indices where they fit (trees, liblinear refuse 64-bit ones)."""
    if X.indices.dtype == np.int32 and X.indptr.dtype == np.int32:
        return X
    if max(X.nnz, *X.shape) >= np.iinfo(np.int32).max:
        return X
    return type(X)((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), shape=X.shape)


def _check_y(y, one_column: bool, numeric: bool, where: dict) -> np.ndarray:
    """``y`` as an array without NaN or inf; 1-D where ``one_column``; numbers where ``numeric``."""
    try:
        y = column_or_1d(y, warn=True) if one_column else np.asarray(y)
        y = check_array(y, ensure_2d=False, dtype=None, ensure_min_samples=0, input_name="y")
        if numeric and y.dtype.kind not in "biuf":
            y = y.astype(np.float64)
    except ValueError as exc:
        raise InputError(str(exc), argument="y", **where) from None
    return y


def _check_classes(y: np.ndarray, where: dict) -> None:
    """``y`` holds class labels, at least two classes."""
    try:
        check_classification_targets(y)
    except ValueError as exc:
        raise InputError(
            f"y must hold class labels for a classifier: {exc}", argument="y", **where
        ) from None
    classes = np.unique(y)
    if len(classes) < 2:
        raise InputError(
            f"a classifier needs at least 2 classes in y, got one class {classes.tolist()}",
            argument="y",
            **where,
        )


def refuses_nan(steps) -> list[str]:
    """Names of the ``(name, estimator)`` steps whose scikit-learn tags refuse NaN.

    A step without scikit-learn tags (duck-typed) decides for itself.
    """
    return [str(name) for name, step in steps if _input_tag(step, "allow_nan") is False]


def takes_sparse(steps) -> bool:
    """Whether the scikit-learn tags of all ``(name, estimator)`` steps say they take sparse X."""
    return all(_input_tag(step, "sparse") is True for _, step in steps)


def _input_tag(step, tag: str):
    """``step``'s scikit-learn input tag ``tag``; None without scikit-learn tags."""
    from sklearn.utils import get_tags

    try:
        return bool(getattr(get_tags(step).input_tags, tag))
    except (AttributeError, TypeError):
        return None


def is_classifier_like(estimator) -> bool:
    """Whether ``estimator`` is a classifier (scikit-learn's tags, else ``_estimator_type``)."""
    from sklearn.base import is_classifier

    try:
        return is_classifier(estimator)
    except (AttributeError, TypeError):
        return getattr(estimator, "_estimator_type", None) == "classifier"


def class_labels(y) -> bool:
    """Whether ``y`` holds class labels (binary or multiclass), as ``check_cv`` asks."""
    if y is None:
        return False
    try:
        return type_of_target(y) in ("binary", "multiclass")
    except ValueError:
        return False


def n_rows(X) -> int:
    """Rows of an array or sparse matrix (``len`` of a sparse matrix is ambiguous)."""
    return X.shape[0]


def dense_columns(X, columns) -> np.ndarray:
    """``X[:, columns]`` as a dense array (sparse input's propagated features)."""
    part = X[:, columns]
    return part.toarray() if sp.issparse(part) else np.asarray(part)
