"""The checks a node makes: on its arguments (counts, numbers, dtypes) and on each chunk.

Each raises an :class:`~labkit.errors.InputError` naming the node (and the
argument), in the same words for every node.  The rules themselves are
declared in :mod:`labkit.constraints`.

Examples
--------
>>> import numpy as np
>>> as_chunk("PCA", [[1.0, 2.0]], ("float64",)).shape
(1, 2)
>>> as_chunk("PCA", np.ones(3), None)
Traceback (most recent call last):
...
labkit.errors.InputError: PCA expects a 2-D array (samples x features), got shape (3,) [node 'PCA']
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from typing import Any, Literal, Protocol, overload

import numpy as np

from ..constraints import POSITIVE_INT, Interval
from ..errors import InputError

__all__ = [
    "positive_int",
    "real_number",
    "require_finite",
    "as_chunk",
    "check_parts",
    "checked_dtype",
]


class Named(Protocol):
    """What the checks need of a node: its name and its phase."""

    name: str

    @property
    def phase(self) -> int: ...


@overload
def positive_int(node: Named, value: Any, what: str, allow_none: Literal[False] = False) -> int: ...


@overload
def positive_int(node: Named, value: Any, what: str, allow_none: bool) -> int | None: ...


def positive_int(node: Named, value: Any, what: str, allow_none: bool = False) -> int | None:
    """``value`` as an int >= 1 (``None`` where allowed), else an InputError naming it.

    One rule for every count a node takes (``n_clusters``, ``epochs``,
    ``input_dim``...): a float such as 2.5 is refused rather than truncated.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, np.bool_) or not POSITIVE_INT.accepts(value):
        raise InputError(
            f"{node.name} {what} must be an int >= 1, got {value!r}",
            node_name=node.name,
            argument=what,
        )
    return int(value)


def real_number(
    node: Named,
    value: Any,
    what: str,
    low: float = 0.0,
    high: float = math.inf,
    open_low: bool = False,
    open_high: bool = False,
) -> float:
    """``value`` as a finite float within ``low``..``high``, else an InputError naming it.

    ``open_low``/``open_high`` leave the bound itself out.
    """
    closed = {(False, False): "both", (False, True): "left", (True, False): "right"}
    rule = Interval(
        float,
        low,
        None if high == math.inf else high,
        closed.get((open_low, open_high), "neither"),
        finite=True,
    )
    if isinstance(value, np.bool_) or not rule.accepts(value):
        lower = f"{'(' if open_low else '['}{low:g}"
        upper = f"{high:g}{')' if open_high or high == math.inf else ']'}"
        raise InputError(
            f"{node.name} {what} must be a finite number in {lower}, {upper}, got {value!r}",
            node_name=node.name,
            argument=what,
        )
    return float(value)


def require_finite(node: Named, values: Any, what: str = "its input") -> None:
    """Raise an :class:`InputError` when ``values``, a reduction of one chunk, is not finite.

    Nodes pass a small reduction they compute anyway (a column sum, the
    diagonal of ``x.T @ x``): NaN or inf anywhere in the chunk shows there, so
    the check costs O(columns) instead of another pass over the chunk, and it
    runs before the node's statistics take the chunk in.
    """
    if not np.isfinite(values).all():
        raise InputError(
            f"{node.name} got NaN or inf in {what}: the chunk's data is not "
            "finite (clean it, or set check_finite=True to reject such chunks "
            "on arrival)",
            node_name=node.name,
            phase=node.phase,
        )


def as_chunk(name: str, x: Any, supported: tuple[str, ...] | None) -> np.ndarray:
    """``x`` as a 2-D array with columns, of a ``supported`` dtype, else an InputError."""
    if not isinstance(x, np.ndarray):
        x = _as_array(name, x)
    if x.ndim != 2:
        raise InputError(
            f"{name} expects a 2-D array (samples x features), got shape {x.shape}",
            node_name=name,
        )
    if x.shape[1] == 0:
        raise InputError(
            f"{name} expects at least one column (feature), got shape {x.shape}",
            node_name=name,
        )
    if supported is not None and x.dtype.name not in supported:
        raise InputError(
            f"{name} does not support dtype {x.dtype} (supported: {', '.join(supported)})",
            node_name=name,
        )
    return x


def _as_array(name: str, x: Any) -> np.ndarray:
    """A chunk that is not an array (a list, a DataFrame) as one, or an InputError."""
    try:
        array = np.asarray(x)
    except (ValueError, TypeError) as exc:  # ragged rows, say
        raise InputError(
            f"{name} expects a 2-D array (samples x features), got a "
            f"{type(x).__name__} that is not one ({exc})",
            node_name=name,
        ) from None
    if array.ndim != 2:
        raise InputError(
            f"{name} expects a 2-D array (samples x features), got a "
            f"{type(x).__name__} of shape {array.shape}",
            node_name=name,
        )
    return array


@functools.cache
def _extra_parts(train: Callable[..., Any]) -> tuple[int, int | None]:
    """How many parts besides ``x`` a ``_train`` takes: ``(required, most)``; most None: any."""
    try:
        params = list(inspect.signature(train).parameters.values())[1:]  # without self
    except (TypeError, ValueError):  # no signature to read: let _train judge
        return 0, None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    unlimited = any(p.kind == p.VAR_POSITIONAL for p in params)
    if positional:
        positional = positional[1:]  # x
    required = sum(1 for p in positional if p.default is p.empty)
    return required, None if unlimited else len(positional)


def check_parts(name: str, train: Callable[..., Any], args: tuple) -> None:
    """An InputError when a chunk has more (or fewer) parts than ``train`` takes.

    A chunk ``(x, y)`` for a node that learns from ``x`` alone would otherwise
    fail inside ``_train`` with Python's own argument error, or not at all.
    """
    required, most = _extra_parts(train)
    if most is not None and len(args) > most:
        takes = "x alone" if most == 0 else f"x and at most {most} more part(s)"
        raise InputError(
            f"{name} trains on {takes}, but the chunk has {len(args)} "
            f"more (a tuple (x, ...)); give it "
            f"{'plain arrays' if most == 0 else 'fewer parts'}",
            node_name=name,
        )
    if len(args) < required:
        raise InputError(
            f"{name} needs {required} part(s) besides x in each chunk "
            f"(a tuple (x, ...)), got {len(args)}",
            node_name=name,
        )


def checked_dtype(name: str, dtype: Any, supported: tuple[str, ...] | None) -> np.dtype | None:
    """``dtype`` as a numpy dtype in ``supported``, or an InputError naming the node."""
    if dtype is None:
        return None
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise InputError(
            f"{name} dtype must be a numpy dtype, got {dtype!r}",
            node_name=name,
            argument="dtype",
        ) from None
    if supported is not None and dtype.name not in supported:
        raise InputError(
            f"{name} does not support dtype {dtype} (supported: {', '.join(supported)})",
            node_name=name,
            argument="dtype",
        )
    return dtype
