"""A sweep's objectives as declared: ``metric``/``mode`` a str each, or tuples of 2 to 4.

:func:`objectives_of` turns ``lk.sweep``'s ``metric`` and ``mode`` into two
tuples of the same length (one name a mode); a string is one objective, as
ever.  :func:`missing_final` says which objective a trial's final metrics lack,
and :func:`final_values` is what the trial's record keeps of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import InputError
from ..trials.status import Status

__all__ = [
    "MAX_OBJECTIVES",
    "objectives_of",
    "is_names",
    "is_modes",
    "final_values",
    "missing_final",
    "checked_final",
]

#: The most objectives a sweep may have (a front of more is mostly the whole population).
MAX_OBJECTIVES = 4

_MODES = ("min", "max")


def is_names(value: Any) -> bool:
    """Whether ``value`` is a metric's name or a tuple/list of 2 to 4 names (non-empty str)."""
    if isinstance(value, str):
        return bool(value)
    return (
        isinstance(value, (tuple, list))
        and 2 <= len(value) <= MAX_OBJECTIVES
        and all(isinstance(v, str) and v for v in value)
    )


def is_modes(value: Any) -> bool:
    """Whether ``value`` is ``"min"``/``"max"`` or a tuple/list of 2 to 4 of them."""
    if isinstance(value, str):
        return value in _MODES
    return (
        isinstance(value, (tuple, list))
        and 2 <= len(value) <= MAX_OBJECTIVES
        and all(isinstance(v, str) and v in _MODES for v in value)
    )


def objectives_of(metric: Any, mode: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(names, modes)``, a mode a name; an InputError naming ``metric`` or ``mode`` if they
    do not pair (a str with a tuple, tuples of other lengths) or a name comes twice."""
    names = (metric,) if isinstance(metric, str) else tuple(metric)
    modes = (mode,) if isinstance(mode, str) else tuple(mode)
    if isinstance(metric, str) != isinstance(mode, str) or len(names) != len(modes):
        raise InputError(
            f"lk.sweep: metric={metric!r} names {len(names)} objective(s) but "
            f"mode={mode!r} gives {len(modes)}: give one mode per objective, e.g. "
            "metric=('loss', 'latency_ms'), mode=('min', 'min')",
            argument="mode",
        )
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(
            f"lk.sweep: metric={metric!r} names the objective {twice[0]!r} twice",
            argument="metric",
        )
    return names, modes


def missing_final(names: tuple[str, ...], metrics: Mapping[str, Any] | None) -> list[str]:
    """The objectives ``metrics`` (a trial's final metrics) lack, in order."""
    return [n for n in names if not metrics or n not in metrics]


def final_values(names: tuple[str, ...], metrics: Mapping[str, Any] | None) -> dict | None:
    """``{name: value}`` of every objective in ``metrics``; None unless all are there."""
    if not metrics or any(n not in metrics for n in names):
        return None
    return {n: float(metrics[n]) for n in names}


def checked_final(
    trial: int, status: Any, fields: dict, names: tuple[str, ...], outcome: dict
) -> tuple[Any, dict]:
    """A completed trial of several objectives fails unless its final metrics hold them all.

    ``status``/``fields`` are what :func:`~..trials.verdict.verdict` said; a single
    objective is left as it said (it checks that one).  A bare number returned is
    no answer to several objectives.
    """
    if len(names) < 2 or status != Status.COMPLETED:
        return status, fields
    if "value" in outcome:
        why = (
            f"returned a number ({outcome['value']!r}), but the sweep has the objectives "
            f"{', '.join(map(repr, names))}: return a dict of them"
        )
    else:
        lacking = missing_final(names, fields.get("metrics"))
        if not lacking:
            return status, fields
        why = (
            f"finished without the objective {lacking[0]!r} (the sweep has "
            f"{', '.join(map(repr, names))}); report it with trial.report(step, "
            f"{lacking[0]}=...) or return it in a dict"
        )
    return Status.FAILED, {**fields, "error": f"InputError: trial {trial} {why}"}
