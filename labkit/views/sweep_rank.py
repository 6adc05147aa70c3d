"""A sweep's trials by their value, the best first: the best trial, and the best few as lines.

:class:`Ranking` keeps the trials that rank (ended with a value: completed or
stopped) in one sorted list of ``(key, id)``; placing a trial again (its
value changed, or it no longer ranks) is a binary search and an insert, so a
board learns the best trial and the best ``k`` without sorting the sweep.
Ties go to the lower id, as ``SweepResult.best`` picks.

Examples
--------
>>> r = Ranking("min")
>>> for trial, value in [(0, 0.5), (1, 0.2), (2, 0.2), (3, None)]:
...     r.place(trial, value)
>>> r.top(2), len(r)
([1, 2], 3)
>>> r.place(1, None); r.top(1)
[2]
"""

from __future__ import annotations

import bisect
import math

__all__ = ["Ranking"]


class Ranking:
    """Trials ranked by value, the best first, for a sweep of ``mode`` (``max`` or ``min``)."""

    def __init__(self, mode: str = "max"):
        self.mode = mode
        self._sign = 1 if mode == "max" else -1
        self._ranked: list[tuple] = []  # ((-sign * value, id), ...) sorted: the best first
        self._keys: dict[int, tuple] = {}

    def __len__(self) -> int:
        return len(self._ranked)

    def place(self, trial: int, value) -> None:
        """Rank ``trial`` by ``value`` (None, NaN or infinite: it does not rank)."""
        key = None
        if isinstance(value, (int, float)) and math.isfinite(value):
            key = (-self._sign * value, trial)
        old = self._keys.get(trial)
        if old == key:
            return
        if old is not None:
            del self._ranked[bisect.bisect_left(self._ranked, old)]
            del self._keys[trial]
        if key is not None:
            bisect.insort(self._ranked, key)
            self._keys[trial] = key

    def top(self, k: int) -> list[int]:
        """The best ``k`` trials' ids, the best first."""
        return [trial for (_, trial) in self._ranked[:k]]
