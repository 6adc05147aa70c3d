"""The trials a brush holds: each trial's parameters and value as numpy columns, and the pick.

A page brushes an axis of the parallel coordinates (``{axis: [lo, hi]}``, an
axis a parameter or ``"value"``) and asks for the curves of the trials that
fall in every range.  :class:`TrialColumns` keeps, a row a trial (the rows of
a :class:`~.sweep_grid.CurveGrid`), each parameter as a number (a category's
index), the latest value of the metric, a rank key (larger is better; NaN for
a trial that does not rank) and whether it runs, written as trials change, so
picking 10,000 trials is a few vector comparisons.  :func:`pick` then splits
the picked ones as a board draws them: every one a line up to ``lines``, else
the running ones and the best ``k`` as lines and the rest as a band.

Examples
--------
>>> import numpy as np
>>> c = TrialColumns()
>>> for row, x in enumerate([0.1, 0.5, 0.9]):
...     c.set(row, {"x": x, "value": x * 2, "rank": x, "running": False})
>>> c.select({"x": [0.2, 1.0]}).tolist()
[False, True, True]
>>> lines, band = pick(c, c.select({}), lines=2, k=1)
>>> lines.tolist(), band.tolist()
([2], [True, True, False])
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import InputError

__all__ = ["TrialColumns", "pick"]


class TrialColumns:
    """A float column per parameter, and ``value``, ``rank`` and ``running``, a row a trial."""

    def __init__(self, rows: int = 256):
        self.size = 0
        self._room = rows
        self._columns: dict[str, np.ndarray] = {
            "value": np.full(rows, np.nan),
            "rank": np.full(rows, np.nan),
            "running": np.zeros(rows, dtype=bool),
        }

    def set(self, row: int, values: dict) -> None:
        """Write one row (a missing or unplaceable number is NaN)."""
        if row >= self._room:
            self._grow(max(2 * self._room, row + 1))
        self.size = max(self.size, row + 1)
        for name, value in values.items():
            column = self._columns.get(name)
            if column is None:
                column = self._columns[name] = np.full(self._room, np.nan)
            column[row] = _float(value) if column.dtype != bool else bool(value)

    def column(self, name: str) -> np.ndarray:
        """The column ``name`` over the rows written."""
        return self._columns[name][: self.size]

    def select(self, ranges: dict) -> np.ndarray:
        """The rows inside every ``axis: [lo, hi]`` of ``ranges`` (none: every row)."""
        mask = np.ones(self.size, dtype=bool)
        for axis, bounds in ranges.items():
            if axis not in self._columns or axis in ("rank", "running"):
                raise InputError(f"a brush on {axis!r}: no such axis", argument="ranges")
            lo, hi = _bounds(axis, bounds)
            column = self.column(axis)
            with np.errstate(invalid="ignore"):
                mask &= (column >= lo) & (column <= hi)
        return mask

    def _grow(self, rows: int) -> None:
        for name, old in self._columns.items():
            new = np.zeros(rows, dtype=bool) if old.dtype == bool else np.full(rows, np.nan)
            new[: old.size] = old
            self._columns[name] = new
        self._room = rows


def pick(columns: TrialColumns, rows: np.ndarray, lines: int, k: int) -> tuple:
    """``(rows drawn as lines, mask of the rows in the band)`` of the rows in the mask ``rows``.

    Up to ``lines`` rows: all are lines and the band is empty; beyond, the
    running ones and the best ``k`` by rank are lines, the others the band.
    """
    chosen = np.flatnonzero(rows)
    if chosen.size <= lines:
        return chosen, np.zeros_like(rows)
    rank = columns.column("rank")[chosen]
    ranked = chosen[~np.isnan(rank)]
    best = ranked[np.argsort(-rank[~np.isnan(rank)], kind="stable")[:k]]
    running = chosen[columns.column("running")[chosen]]
    drawn = np.union1d(best, running)
    band = rows.copy()
    band[drawn] = False
    return drawn, band


def _float(value) -> float:
    if value is None or isinstance(value, bool):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan


def _bounds(axis: str, bounds) -> tuple[float, float]:
    """``[lo, hi]`` as two numbers in order (None: open that way), else an InputError."""
    try:
        lo, hi = bounds
        lo = -math.inf if lo is None else float(lo)
        hi = math.inf if hi is None else float(hi)
    except (TypeError, ValueError):
        raise InputError(
            f"a brush on {axis!r} needs [lo, hi], got {bounds!r}", argument="ranges"
        ) from None
    return min(lo, hi), max(lo, hi)
