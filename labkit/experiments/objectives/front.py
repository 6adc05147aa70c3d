"""The Pareto front of a sweep's trials: the non-dominated ones among those that ended ranked.

A trial is on the front when it completed or was stopped early (as ``best``
ranks them), holds a finite final value of every objective, is feasible (every
constraint value <= 0, when the sweep has constraints), and no other such
trial dominates it (:func:`~.dominance.pareto_front`, exact).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..trials.status import RANKED
from .dominance import crowding_distance, nondominated_ranks, pareto_front

__all__ = ["feasible", "candidates", "pareto_records", "dominance_order"]


def feasible(record: Any) -> bool:
    """Whether the record's constraint values (none: feasible) are all <= 0."""
    values = getattr(record, "constraints", None)
    return values is None or all(v <= 0 for v in values)


def candidates(records: Sequence, names: Sequence[str]) -> list:
    """The ranked, feasible records with a finite final value of every objective."""
    out = []
    for r in records:
        values = r.objectives
        if r.status not in RANKED or values is None or not feasible(r):
            continue
        if all(n in values and not math.isnan(values[n]) for n in names):
            out.append(r)
    return out


def pareto_records(records: Sequence, names: Sequence[str], modes: Sequence[str]) -> list:
    """The non-dominated records of :func:`candidates`, in id order."""
    ranked = sorted(candidates(records, names), key=lambda r: r.id)
    if not ranked:
        return []
    values = np.array([[r.objectives[n] for n in names] for r in ranked], dtype=float)
    return [ranked[int(i)] for i in pareto_front(values, list(modes))]


def dominance_order(values: Sequence[Sequence[float]], modes: Sequence[str]) -> list[int]:
    """Row indices best first: by non-dominated front, then crowding (larger first), then
    row order (as NSGA-II keeps its elite; ``keep_best`` of several objectives)."""
    if not len(values):
        return []
    points = np.asarray(values, dtype=float)
    ranks = nondominated_ranks(points, list(modes))
    crowd = np.zeros(len(points))
    for rank in np.unique(ranks):
        members = np.flatnonzero(ranks == rank)
        crowd[members] = crowding_distance(points[members], list(modes))
    return sorted(range(len(points)), key=lambda i: (ranks[i], -crowd[i], i))
