"""Several objectives: dominance, the Pareto front, non-dominated sorting, crowding, hypervolume.

Every function takes the objectives as an ``(n, k)`` array and their modes
(``"min"``/``"max"`` each); values are turned to minimisation once
(:func:`as_minimised`) so the rest only compares "smaller is better".  A row
with a NaN is never on a front and sorts last.

Examples
--------
>>> import numpy as np
>>> values = np.array([[1.0, 5.0], [2.0, 2.0], [3.0, 3.0], [4.0, 1.0]])
>>> pareto_front(values, ("min", "min")).tolist()
[0, 1, 3]
>>> nondominated_ranks(values, ("min", "min")).tolist()
[0, 0, 1, 0]
>>> hypervolume(values[[0, 1, 3]], ("min", "min"), reference=(5.0, 6.0))
14.0
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "as_minimised",
    "dominates",
    "pareto_front",
    "nondominated_ranks",
    "crowding_distance",
    "hypervolume",
]


def as_minimised(values, modes: Sequence[str]) -> np.ndarray:
    """``values`` as floats where smaller is better in every column (``max`` columns negated)."""
    array = np.asarray(values, dtype=float)
    if array.ndim == 1:
        array = array.reshape(1, -1) if len(modes) > 1 else array.reshape(-1, 1)
    if array.shape[1] != len(modes):
        raise ValueError(f"{array.shape[1]} objectives against {len(modes)} modes")
    signs = np.array([-1.0 if m == "max" else 1.0 for m in modes])
    return array * signs


def dominates(a, b, modes: Sequence[str]) -> bool:
    """Whether ``a`` is no worse than ``b`` in every objective and better in one."""
    x, y = (
        as_minimised(np.asarray(a, float).reshape(1, -1), modes)[0],
        as_minimised(np.asarray(b, float).reshape(1, -1), modes)[0],
    )
    return bool(np.all(x <= y) and np.any(x < y))


def _finite_rows(minimised: np.ndarray) -> np.ndarray:
    """The indices of the rows without NaN (only they can be on a front)."""
    return np.flatnonzero(~np.isnan(minimised).any(axis=1))


def _front_of(points: np.ndarray) -> np.ndarray:
    """Positions (into ``points``, minimised, no NaN) of its non-dominated rows, in order."""
    n = len(points)
    if n == 0:
        return np.zeros(0, dtype=int)
    if points.shape[1] == 2:
        return _front_2d(points)
    keep = np.ones(n, dtype=bool)
    for i in range(n):
        if not keep[i]:
            continue
        # rows i dominates leave; i leaves if any row dominates it
        le = np.all(points <= points[i], axis=1) & np.any(points < points[i], axis=1)
        if le.any():
            keep[i] = False
            continue
        worse = np.all(points >= points[i], axis=1) & np.any(points > points[i], axis=1)
        keep &= ~worse
    return np.flatnonzero(keep)


def _front_2d(points: np.ndarray) -> np.ndarray:
    """The 2-objective front in O(n log n): sort by the first, keep strict drops of the second."""
    order = np.lexsort((points[:, 1], points[:, 0]))
    kept: list[int] = []
    best = np.inf
    last: tuple[float, float] | None = None
    for i in order:
        x, y = points[i]
        if y < best:
            kept.append(int(i))
            best = y
            last = (x, y)
        elif last is not None and (x, y) == last:
            kept.append(int(i))  # an equal point is not dominated either
    return np.sort(np.array(kept, dtype=int))


def pareto_front(values, modes: Sequence[str]) -> np.ndarray:
    """Indices (ascending) of the rows no other row dominates; rows with NaN are left out."""
    minimised = as_minimised(values, modes)
    rows = _finite_rows(minimised)
    return rows[_front_of(minimised[rows])]


def nondominated_ranks(values, modes: Sequence[str]) -> np.ndarray:
    """Each row's front number (0: the Pareto front, 1: the front once 0 is removed, ...).

    Rows with NaN get the rank after the last front.
    """
    minimised = as_minimised(values, modes)
    ranks = np.full(len(minimised), -1, dtype=int)
    left = _finite_rows(minimised)
    rank = 0
    while len(left):
        front = left[_front_of(minimised[left])]
        ranks[front] = rank
        left = np.setdiff1d(left, front, assume_unique=True)
        rank += 1
    ranks[ranks < 0] = rank
    return ranks


def crowding_distance(values, modes: Sequence[str]) -> np.ndarray:
    """NSGA-II's crowding distance of each row within ``values`` (one front): ends infinite."""
    minimised = as_minimised(values, modes)
    n, k = minimised.shape
    distance = np.zeros(n)
    if n <= 2:
        return np.full(n, np.inf)
    for j in range(k):
        order = np.argsort(minimised[:, j], kind="stable")
        column = minimised[order, j]
        span = column[-1] - column[0]
        distance[order[0]] = distance[order[-1]] = np.inf
        if span > 0:
            distance[order[1:-1]] += (column[2:] - column[:-2]) / span
    return distance


def hypervolume(values, modes: Sequence[str], reference: Sequence[float]) -> float:
    """The volume dominated by ``values`` and bounded by ``reference`` (in the objectives' units).

    Points not better than the reference in every objective add nothing.  Exact, by slicing
    along the first objective (fine for the 2 to 4 objectives and fronts of a sweep).
    """
    minimised = as_minimised(values, modes)
    ref = as_minimised(np.asarray(reference, float).reshape(1, -1), modes)[0]
    rows = _finite_rows(minimised)
    points = minimised[rows]
    points = points[np.all(points < ref, axis=1)]
    if len(points) == 0:
        return 0.0
    return float(_volume(points[_front_of(points)], ref))


def _volume(points: np.ndarray, ref: np.ndarray) -> float:
    """Hypervolume of mutually non-dominated, minimised ``points`` below ``ref`` (recursive)."""
    if points.shape[1] == 1:
        return float(ref[0] - points[:, 0].min())
    order = np.argsort(points[:, 0], kind="stable")
    points = points[order]
    total = 0.0
    for i in range(len(points)):
        upper = points[i + 1, 0] if i + 1 < len(points) else ref[0]
        width = upper - points[i, 0]
        if width <= 0:
            continue
        slab = points[: i + 1, 1:]
        total += width * _volume(slab[_front_of(slab)], ref[1:])
    return total
