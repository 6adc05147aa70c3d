"""The quantile band of a sweep's curves: trials not drawn as lines, summed up step by step.

A board draws the running trials and the best few as lines; beyond a few
hundred trials every other curve goes into a band: at each step the 10th,
25th, 50th, 75th and 90th percentiles of the values the band's trials
reported there.  :class:`Band` keeps, per step, the band's values in one
sorted list, so adding or removing a curve costs a binary search and an
insert a point (no sort of the whole band; the insert moves pointers, a few
microseconds even at 100,000 values), and the quantiles are read off by index.

Examples
--------
>>> band = Band()
>>> for i in range(5):
...     band.add(i, ((0, float(i)), (1, 10.0 + i)))
>>> q = band.quantiles()
>>> q["steps"], q["q50"], q["n"]
([0, 1], [2.0, 12.0], 5)
>>> band.remove(4); band.quantiles()["q90"]
[2.7, 12.7]
"""

from __future__ import annotations

import bisect
import math

__all__ = ["Band", "QUANTILES"]

#: The percentiles a band shows, by the name of their column.
QUANTILES = {"q10": 0.10, "q25": 0.25, "q50": 0.50, "q75": 0.75, "q90": 0.90}


class Band:
    """Curves ``(step, value)`` of some trials, as sorted values per step (not thread-safe)."""

    def __init__(self) -> None:
        self._values: dict = {}  # step -> its values, sorted
        self._curves: dict[int, tuple] = {}  # member -> the curve it was added with
        self.version = 0  # changes whenever the quantiles would

    def __contains__(self, trial: int) -> bool:
        return trial in self._curves

    def __len__(self) -> int:
        return len(self._curves)

    def curve(self, trial: int) -> tuple | None:
        """The curve ``trial`` is in the band with, or None."""
        return self._curves.get(trial)

    def add(self, trial: int, curve) -> None:
        """Put ``trial``'s curve in the band (its finite values; again: replaced)."""
        self.update({trial: curve})

    def update(self, curves: dict) -> None:
        """Put the curves ``{trial: curve}`` in the band at once."""
        if not curves:
            return
        for trial in curves:
            if trial in self._curves:
                self.remove(trial)
        new: dict = {}
        for trial, curve in curves.items():
            kept = tuple((s, v) for s, v in curve if v is not None and math.isfinite(v))
            self._curves[trial] = kept
            for step, value in kept:
                new.setdefault(step, []).append(float(value))
        for step, values in new.items():
            old = self._values.get(step)
            if old is None or len(values) > len(old) // 8:  # many at once: one sort
                self._values[step] = sorted((old or []) + values)
            else:
                for value in values:
                    bisect.insort(old, value)
        self.version += 1

    def remove(self, trial: int) -> None:
        """Take ``trial``'s curve out of the band (nothing if it is not in)."""
        curve = self._curves.pop(trial, None)
        if curve is None:
            return
        for step, value in curve:
            values = self._values[step]
            del values[bisect.bisect_left(values, value)]
            if not values:
                del self._values[step]
        self.version += 1

    def quantiles(self) -> dict | None:
        """``{"steps": [...], "q10": [...], ..., "n": trials}``, or None for an empty band."""
        if not self._curves:
            return None
        steps = sorted(self._values)
        out: dict = {"steps": steps, **{name: [] for name in QUANTILES}, "n": len(self._curves)}
        for step in steps:
            values = self._values[step]
            for name, q in QUANTILES.items():
                out[name].append(round(_quantile(values, q), 12))
        return out


def _quantile(values: list, q: float) -> float:
    """The ``q`` quantile of sorted ``values`` (linear between neighbours, as numpy's default)."""
    at = (len(values) - 1) * q
    low = math.floor(at)
    high = min(low + 1, len(values) - 1)
    return float(values[low] + (values[high] - values[low]) * (at - low))
