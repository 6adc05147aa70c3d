"""Early stopping by dominance: ASHA's rungs with several objectives (MOASHA).

With one objective, ASHA lets a trial that reaches a rung go on if it is
among the best ``ceil(n / reduction)`` of the ``n`` trials recorded there.
With several, "best" is an order by dominance, as Syne Tune's MOASHA has it
(Schmucker et al., "Multi-objective Asynchronous Successive Halving", 2021):
the trials at a rung are sorted into non-dominated fronts
(:func:`~.dominance.nondominated_ranks`), and within a front the one with the
larger crowding distance (:func:`~.dominance.crowding_distance`, NSGA-II's)
comes first, so the front's ends and its sparse parts go on.  A trial with a
NaN among its values sorts last.

:class:`DominanceRungs` keeps the objective values each trial had at each
rung (in their own units: the modes come with every decision) and answers the
rung decision; :class:`~labkit.experiments.search.rules.ASHA` uses it when its
sweep has several objectives.

Examples
--------
>>> rungs = DominanceRungs()
>>> for trial, values in enumerate([(2.0, 2.0), (3.0, 3.0), (1.0, 4.0), (5.0, 5.0)]):
...     print(trial, rungs.record(0, trial, values, ("min", "min"), 2))
0 None
1 (2, 2, 2)
2 None
3 (3, 4, 4)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .dominance import crowding_distance, nondominated_ranks

__all__ = ["DominanceRungs", "promotion_keys", "ahead_of", "fmt_number", "ordinal"]


def promotion_keys(values, modes: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``(front, crowding)``: smaller front first, then larger crowding first.

    Crowding is computed within each front; rows with a NaN (the last front) get 0.
    """
    array = np.asarray(values, dtype=float).reshape(len(values), len(modes))
    ranks = nondominated_ranks(array, modes)
    crowding = np.zeros(len(array))
    finite = ~np.isnan(array).any(axis=1)
    for rank in np.unique(ranks[finite]):
        rows = np.flatnonzero((ranks == rank) & finite)
        crowding[rows] = crowding_distance(array[rows], modes)
    return ranks, crowding


def ahead_of(position: int, ranks: np.ndarray, crowding: np.ndarray) -> int:
    """How many rows come strictly before row ``position`` (ties do not: as ASHA's scores)."""
    rank, crowd = ranks[position], crowding[position]
    return int(np.sum((ranks < rank) | ((ranks == rank) & (crowding > crowd))))


class DominanceRungs:
    """Per rung, each trial's objective values there; the rung decision by dominance."""

    def __init__(self) -> None:
        self.recorded: list[dict[int, tuple[float, ...]]] = []  # per rung: trial -> values
        self.revision = 0  # changes whenever :meth:`state` would

    def decide(
        self,
        trial: int,
        reached: Sequence[tuple[int, Any]],
        values: Sequence[float],
        modes: Sequence[str],
        reduction,
    ) -> str | None:
        """``trial``'s ``values`` at each rung ``(k, step)`` in ``reached`` it is new to;
        None while it goes on, else the reason it stops (at the first rung it is not kept)."""
        for k, at in reached:
            while len(self.recorded) <= k:
                self.recorded.append({})
            if trial in self.recorded[k]:
                continue
            verdict = self.record(k, trial, values, modes, reduction)
            if verdict is not None:
                front, place, n = verdict
                return (
                    f"ASHA: at step {fmt_number(at)} not in the top 1/{fmt_number(reduction)} by dominance "
                    f"(front {front}, {ordinal(place)} of {n} by front and crowding)"
                )
        return None

    def record(
        self, k: int, trial: int, values: Sequence[float], modes: Sequence[str], reduction
    ) -> tuple[int, int, int] | None:
        """Record ``trial``'s ``values`` at rung ``k``; None if it goes on, else why it stops.

        The reason is ``(front, place, n)``: its front (1 is the Pareto front of
        the rung), its place in the order (1st ...) and the trials recorded.
        """
        while len(self.recorded) <= k:
            self.recorded.append({})
        recorded = self.recorded[k]
        recorded[trial] = tuple(float(v) for v in values)
        self.revision += 1
        trials = list(recorded)
        ranks, crowding = promotion_keys([recorded[t] for t in trials], modes)
        position = trials.index(trial)
        better = ahead_of(position, ranks, crowding)
        if better < math.ceil(len(trials) / reduction):
            return None
        return int(ranks[position]) + 1, better + 1, len(trials)

    def forget(self, trial: int, from_step: Any, rung: Callable[[int], Any]) -> None:
        """Drop ``trial``'s values at the rungs ``k`` with ``rung(k) >= from_step`` (all: None)."""
        for k, recorded in enumerate(self.recorded):
            if (from_step is None or rung(k) >= from_step) and recorded.pop(trial, None):
                self.revision += 1

    def state(self) -> list[dict[str, list[float]]]:
        """The records as plain data (JSON: trial ids as strings)."""
        return [{str(t): list(v) for t, v in r.items()} for r in self.recorded]

    def load_state(self, rungs: Sequence[Mapping]) -> None:
        """Take back what :meth:`state` gave."""
        self.recorded = [{int(t): tuple(float(x) for x in v) for t, v in r.items()} for r in rungs]
        self.revision += 1


def fmt_number(x) -> str:
    """A step or a ratio in words (``3``, ``2.5``)."""
    return f"{x:g}" if isinstance(x, float) else str(x)


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th`` ..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
