"""A sweep's objectives as declared: ``metric``/``mode`` a str each, or tuples of 2 to 4.

:func:`objectives_of` turns ``lk.sweep``'s ``metric`` and ``mode`` into two
tuples of the same length (one name a mode); a string is one objective, as
ever.  :func:`missing_final` says which objective a trial's final metrics lack,
and :func:`final_values` is what the trial's record keeps of them;
:func:`checked_final` checks a trial's end against them and computes its
constraint values (``lk.sweep``'s ``constraints=``, as Optuna's
``constraints_func``: a value <= 0 is satisfied).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ...errors import InputError
from ..trials.status import RANKED, Status

__all__ = [
    "MAX_OBJECTIVES",
    "objectives_of",
    "is_names",
    "is_modes",
    "final_values",
    "missing_final",
    "checked_final",
    "constraint_values",
    "final_fields",
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
    trial: int, status: Any, fields: dict, spec: Any, outcome: dict
) -> tuple[Any, dict]:
    """A trial's end as :func:`~..trials.verdict.verdict` said (``status``, ``fields``),
    checked for the sweep's objectives and constraints (``spec``: its SweepSpec).

    A completed trial of several objectives fails unless its final metrics hold
    them all (a bare number returned is no answer to several); a single
    objective is left as verdict said (it checks that one).  A completed or
    stopped trial's final metrics are given to ``spec.constraints`` (when the
    sweep has one): ``fields["constraints"]`` holds its values, or the trial
    fails with an InputError naming ``constraints`` and the trial.
    """
    status, fields = _all_objectives(trial, status, fields, spec.objectives, outcome)
    metrics = fields.get("metrics")
    if spec.constraints is None or status not in RANKED or not metrics:
        return status, fields
    try:
        return status, {**fields, "constraints": constraint_values(spec.constraints, metrics)}
    except InputError as exc:
        return Status.FAILED, {**fields, "error": f"InputError: trial {trial}: {exc}"}


def constraint_values(fn: Any, metrics: dict) -> tuple[float, ...]:
    """``fn(metrics)`` as a tuple of finite floats (<= 0: satisfied); an InputError naming
    ``constraints`` if it raises or returns anything else."""
    try:
        values = fn(dict(metrics))
        out = tuple(float(v) for v in values)
    except Exception as exc:  # noqa: BLE001 - the user's function fails in many ways
        raise InputError(
            f"constraints(metrics) failed ({type(exc).__name__}: {exc}); it must return a "
            "sequence of numbers, each <= 0 when satisfied",
            argument="constraints",
        ) from None
    if any(math.isnan(v) for v in out) or isinstance(values, (str, bytes)):
        raise InputError(
            f"constraints(metrics) returned {values!r:.80}: a sequence of numbers, never NaN",
            argument="constraints",
        )
    return out


def _all_objectives(
    trial: int, status: Any, fields: dict, names: tuple[str, ...], outcome: dict
) -> tuple[Any, dict]:
    """A completed trial of several objectives fails unless its final metrics hold them all."""
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


def final_fields(names: tuple[str, ...], fields: dict) -> dict:
    """What a trial's record keeps of its end: ``objectives`` (every one's final value, or
    None) and the ``constraints`` values :func:`checked_final` found (None: none)."""
    return {
        "objectives": final_values(names, fields.get("metrics")),
        "constraints": fields.get("constraints"),
    }
