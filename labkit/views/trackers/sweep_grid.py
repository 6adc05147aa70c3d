"""Many trials' curves as one array, and the quantile band over any set of them.

A board of 10,000 trials cannot draw 10,000 lines: beyond a few hundred it
draws a band, the quantiles of the metric at each step over the trials not
drawn as lines.  :class:`CurveGrid` keeps every trial's curve in one
preallocated float array (a row a trial, a column a step; NaN where a trial
has no finite value), written point by point as reports come, so a band is
a few numpy calls over a row mask, never a Python loop over trials.  Steps
are columns in the order first seen, at most ``max_steps`` of them: points at
steps beyond those are left out of the band (a sweep of 30 reports a trial
uses 30).

Examples
--------
>>> g = CurveGrid()
>>> for trial in range(5):
...     _ = g.put(trial, 0, 0, [(0, float(trial)), (1, 10.0 + trial)])
>>> band = g.band(g.mask([0, 1, 2, 3, 4]))
>>> band["steps"], band["q50"], band["n"]
([0, 1], [2.0, 12.0], 5)
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

__all__ = ["CurveGrid", "QUANTILES", "r6"]

#: The band's quantiles, as its keys name them.
QUANTILES = {"q10": 0.10, "q25": 0.25, "q50": 0.50, "q75": 0.75, "q90": 0.90}


def r6(value):
    """A JSON number rounded to 6 significant digits; None for what is not a finite number.

    >>> r6(0.123456789), r6(12), r6(float("inf")), r6(None), r6(True), r6(2**80)
    (0.123457, 12, None, None, None, 1.20893e+24)
    """
    kind = type(value)
    if kind is float:  # the common case first: a frame rounds thousands
        return float(f"{value:.6g}") if value - value == 0 else None
    if kind is int and -(2**53) < value < 2**53:  # a step: as it is
        return value
    if value is None or kind is bool:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**53:
        return value
    try:
        f = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return float(f"{f:.6g}") if math.isfinite(f) else None


class CurveGrid:
    """Every trial's curve in one float array; the quantiles over any rows of it.

    Parameters
    ----------
    rows, steps : int
        Room made at first; it doubles as trials and steps come.
    max_steps : int
        Most distinct steps kept.
    """

    def __init__(self, rows: int = 256, steps: int = 32, max_steps: int = 256):
        self.max_steps = max_steps
        self.values = np.full((rows, steps), np.nan)
        self.steps: list = []  # the step of each column
        self._column: dict = {}  # step -> column
        self._row: dict[int, int] = {}  # trial -> row
        self._held: dict[int, tuple[int, int]] = {}  # trial -> (epoch, points written)

    @property
    def size(self) -> int:
        """How many trials have a row."""
        return len(self._row)

    def row(self, trial: int) -> int:
        """The row of ``trial`` (a new one the first time)."""
        row = self._row.get(trial)
        if row is None:
            row = self._row[trial] = len(self._row)
            if row >= self.values.shape[0]:
                self._grow(rows=2 * self.values.shape[0])
        return row

    def known(self, trial: int) -> tuple[int, int]:
        """``(epoch, points)`` of ``trial``'s curve as written here (``(-1, 0)``: none yet)."""
        return self._held.get(trial, (-1, 0))

    def put(self, trial: int, epoch: int, start: int, points: list) -> bool:
        """Write ``points`` of ``trial``'s curve from its ``start``-th; whether any was written.

        Another epoch than the one held, or a start of 0, writes the whole curve afresh.
        """
        row = self.row(trial)
        held_epoch, held = self.known(trial)
        if start == 0 or held_epoch != epoch:
            self.values[row] = np.nan
            start = 0
        for step, value in points:
            column = self._step_column(step)
            if column is not None:
                v = r6(value)  # what cannot be placed is no point of the band
                self.values[row, column] = np.nan if v is None else v
        self._held[trial] = (epoch, start + len(points))
        return bool(points) or (start == 0 and held > 0)

    def mask(self, trials: Iterable[int]) -> np.ndarray:
        """The rows of ``trials`` (those that have one) as a boolean mask."""
        mask = np.zeros(self.size, dtype=bool)
        rows = [r for r in map(self._row.get, trials) if r is not None]
        mask[rows] = True
        return mask

    def trials(self) -> np.ndarray:
        """The trial of each row."""
        out = np.empty(self.size, dtype=np.int64)
        out[list(self._row.values())] = list(self._row.keys())
        return out

    def band(self, rows: np.ndarray) -> dict | None:
        """Quantiles per step over the rows in the mask ``rows`` (None: no point among them)."""
        sub = self.values[: self.size][rows[: self.size]][:, : len(self.steps)]
        seen = ~np.isnan(sub)
        has = seen.any(axis=1)
        columns = np.flatnonzero(seen.any(axis=0))
        if not has.any() or not columns.size:
            return None
        order = columns[np.argsort(np.array([self.steps[c] for c in columns], dtype=float))]
        sub = np.sort(sub[has][:, order], axis=0)  # NaN sorts last
        count = seen[has][:, order].sum(axis=0)
        out: dict = {"steps": [r6(self.steps[c]) for c in order]}
        for name, q in QUANTILES.items():
            out[name] = [r6(v) for v in _quantile(sub, count, q)]
        out["n"] = int(has.sum())
        return out

    def _step_column(self, step) -> int | None:
        column = self._column.get(step)
        if column is None and r6(step) is not None and len(self.steps) < self.max_steps:
            column = self._column[step] = len(self.steps)
            self.steps.append(step)
            if column >= self.values.shape[1]:
                self._grow(steps=min(2 * self.values.shape[1], self.max_steps))
        return column

    def _grow(self, rows: int | None = None, steps: int | None = None) -> None:
        old = self.values
        rows, steps = rows or old.shape[0], steps or old.shape[1]
        self.values = np.full((rows, steps), np.nan)
        self.values[: old.shape[0], : old.shape[1]] = old


def _quantile(ordered: np.ndarray, count: np.ndarray, q: float) -> np.ndarray:
    """The ``q`` quantile of each column of ``ordered`` (its first ``count`` rows), linearly."""
    at = q * (count - 1)
    lo = np.floor(at).astype(np.int64)
    hi = np.minimum(lo + 1, count - 1)
    columns = np.arange(ordered.shape[1])
    low, high = ordered[lo, columns], ordered[hi, columns]
    return low + (high - low) * (at - lo)
