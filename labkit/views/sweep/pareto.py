"""The Pareto front of a several-objective sweep as a board's frames: kept as trials end.

:class:`ParetoFront` keeps the non-dominated trials incrementally: a trial that
ends either is dominated (nothing changes) or enters and evicts the ones it
dominates.  With two objectives the front is a staircase sorted by the first
(the second then strictly falls), so a trial is placed by bisection, O(log n)
comparisons; with three or four it is compared with the front only.

:class:`ParetoFrames` folds a board's changed rows (each trial once, when it
ended ranked with a finite value of every objective) and writes the ``pareto``
part of the board's frames:

- in a paint: ``names``, ``modes``, ``reference``, every ended trial's
  objectives (``points``: ``{"id": [...], "values": [[...], ...]}``; infeasible
  ones in ``infeasible``), the ``front`` (ids) and the hypervolume over time
  (``hv``: ``[[trials ended, hypervolume], ...]``, at most ``MOST_HV`` points);
- in a delta only what changed: the new ``points``, the ids ``added`` to and
  ``removed`` from the front, the new ``hv`` points; and, when the reference
  moved, the new ``reference`` with the whole ``hv`` again (``hv_all``).

The hypervolume is over every objective against the reference point: the one a
user gives (``lk.board(run, reference=(...))``), else the worst value seen in
each objective plus a tenth of its range seen (1.0 where the range is nought).
A trial past the reference adds nothing.  With 3 or 4 objectives it is exact by slabs
and paced (5% of a core); with 4, only while the front holds at most ``MOST_FRONT_4``
points (then the curve stops: its cost is cubic in the front).  When the default reference moves,
the front's history is replayed against it, so every point of ``hv`` is
against the same reference.  Numbers are rounded to 6 significant digits.

Examples
--------
>>> front = ParetoFront(("min", "min"))
>>> front.add(0, (1.0, 5.0)), front.add(1, (2.0, 2.0)), front.add(2, (3.0, 3.0))
(([0], []), ([1], []), ([], []))
>>> front.add(3, (0.5, 1.0)), front.ids()
(([3], [0, 1]), [3])
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Iterable, Sequence

import numpy as np

from ..trackers.sweep_grid import r6

__all__ = ["ParetoFront", "ParetoFrames", "pareto_frames", "MOST_HV", "MARGIN", "MOST_FRONT_4"]

#: Most points of the hypervolume's history sent at once (a longer one is thinned).
MOST_HV = 200

#: Most points of a 4-objective front whose hypervolume is computed (its cost is cubic).
MOST_FRONT_4 = 150

#: The default reference: the worst value seen plus this part of the range seen.
MARGIN = 0.1

_RANKED = ("completed", "stopped")


class ParetoFront:
    """The non-dominated points of ``(id, values)`` added one by one (``modes``: min/max each)."""

    def __init__(self, modes: Sequence[str]):
        self.signs = tuple(-1.0 if m == "max" else 1.0 for m in modes)
        self.two = len(modes) == 2
        self._keys: list[tuple[float, ...]] = []  # minimised; sorted with two objectives
        self._ids: list[int] = []

    def add(self, trial: int, values: Sequence[float]) -> tuple[list[int], list[int]]:
        """Add one point: ``(added, removed)`` ids (both empty: it is dominated)."""
        key = tuple(s * v for s, v in zip(self.signs, values, strict=True))
        if self.two:
            return self._add_two(trial, key)
        return self._add_many(trial, key)

    def _add_two(self, trial: int, key: tuple) -> tuple[list[int], list[int]]:
        """A staircase: x rises, y falls; bisection finds the place and the dominated run."""
        keys = self._keys
        x, y = key
        last = bisect.bisect_right(keys, (x, math.inf)) - 1  # the last point with x' <= x
        if last >= 0 and keys[last][1] <= y and keys[last] != key:
            return [], []
        start = bisect.bisect_left(keys, key)
        while start < len(keys) and keys[start] == key:  # equal points are all on the front
            start += 1
        end = start
        while end < len(keys) and keys[end][1] >= y:
            end += 1
        removed = self._ids[start:end]
        keys[start:end] = [key]
        self._ids[start:end] = [trial]
        return [trial], removed

    def _add_many(self, trial: int, key: tuple) -> tuple[list[int], list[int]]:
        """Three or four objectives: compared with every point of the front."""
        if self._keys:
            front = np.asarray(self._keys)
            point = np.asarray(key)
            if np.any(np.all(front <= point, axis=1) & np.any(front < point, axis=1)):
                return [], []
            gone = np.all(front >= point, axis=1) & np.any(front > point, axis=1)
            removed = [self._ids[i] for i in np.flatnonzero(gone)]
            keep = np.flatnonzero(~gone)
            self._keys = [self._keys[i] for i in keep]
            self._ids = [self._ids[i] for i in keep]
        else:
            removed = []
        self._keys.append(key)
        self._ids.append(trial)
        return [trial], removed

    def ids(self) -> list[int]:
        """The front's trials (by the first objective with two, else as they came)."""
        return list(self._ids)

    def keys(self) -> np.ndarray:
        """The front's points minimised (``max`` objectives negated), ``(n, k)``."""
        return np.asarray(self._keys, float).reshape(len(self._keys), len(self.signs))

    def values(self) -> np.ndarray:
        """The front's points in the objectives' own units, ``(n, k)``."""
        if not self._keys:
            return np.zeros((0, len(self.signs)))
        return np.asarray(self._keys) * np.asarray(self.signs)

    def __len__(self) -> int:
        return len(self._ids)


def pareto_frames(sweep, reference: Sequence[float] | None = None) -> ParetoFrames | None:
    """The Pareto part of a board of ``sweep`` (a live or stored sweep); None for one metric."""
    names = tuple(getattr(sweep, "objectives", None) or ())
    if len(names) < 2:
        return None
    return ParetoFrames(names, tuple(getattr(sweep, "modes", ())), reference)


class ParetoFrames:
    """The front, its hypervolume over time and the frames' ``pareto`` part (see the module).

    Parameters
    ----------
    names, modes : sequence of str
        The sweep's objectives and their modes.
    reference : sequence of float, optional
        The hypervolume's reference point, in the objectives' units (default: the worst
        value seen plus ``MARGIN`` of the range, moving as trials end).
    """

    def __init__(self, names: Sequence[str], modes: Sequence[str], reference=None):
        from ...errors import InputError

        self.names, self.modes = tuple(names), tuple(modes)
        if reference is not None and len(reference) != len(self.names):
            raise InputError(
                f"reference has {len(reference)} values for {len(self.names)} objectives "
                f"{list(self.names)}",
                argument="reference",
            )
        self.given = None if reference is None else tuple(float(v) for v in reference)
        self.front = ParetoFront(self.modes)
        self._seen: dict[int, list] = {}  # id -> its objectives, each trial folded once
        self._order: list[tuple[int, tuple]] = []  # (id, values) of feasible points, as folded
        self._entered: list[tuple[int, int, tuple]] = []  # (points folded, id, values): entries
        self._due = 0.0  # 3 or 4 objectives: the hypervolume is paced (its cost grows fast)
        self._owed = False
        self._infeasible: list[int] = []
        self._worst: list[float] = [-math.inf] * len(self.names)  # minimised
        self._best: list[float] = [math.inf] * len(self.names)
        self.reference = self.given
        self.hv: list[list] = []  # [[points folded, hypervolume], ...]
        self._new: dict = _empty()  # what changed since the last frame

    # -- folding rows ------------------------------------------------------------------------

    def fold(self, rows: Iterable) -> None:
        """Take the rows that ended ranked with every objective (each trial once)."""
        took = moved = False
        for r in rows:
            if r.id in self._seen or str(r.status) not in _RANKED or not r.objectives:
                continue
            values = [r.objectives.get(n) for n in self.names]
            if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
                continue
            self._seen[r.id] = values
            self._new["points"].append((r.id, values))
            if r.constraints is not None and not all(c <= 0 for c in r.constraints):
                self._infeasible.append(r.id)
                self._new["infeasible"].append(r.id)
                continue
            moved = self._take(r.id, tuple(float(v) for v in values)) or moved
            took = True
        if took or self._owed:
            self._hv_point(moved or self._owed)

    def _take(self, trial: int, values: tuple) -> bool:
        """One feasible point: the front, the range seen; whether it entered the front."""
        self._order.append((trial, values))
        for i, (s, v) in enumerate(zip(self.front.signs, values, strict=True)):
            self._worst[i] = max(self._worst[i], s * v)
            self._best[i] = min(self._best[i], s * v)
        added, removed = self.front.add(trial, values)
        if added:
            self._entered.append((len(self._order), trial, values))
        self._new["added"].extend(added)
        self._new["removed"].extend(removed)
        return bool(added)

    def _hv_point(self, moved: bool) -> None:
        """The hypervolume now, as a point of the history (the reference moved: all again).

        With 3 or 4 objectives at most 5% of a core: after a computation that took ``t``,
        none for ``20 t`` (what came meanwhile is in the next one)."""
        if not self.front.two:
            now = time.monotonic()
            if now < self._due:
                self._owed = True
                return
            cpu = time.thread_time()
            self._owed = False
            self._hv_now(moved)
            self._due = now + 20 * (time.thread_time() - cpu)
        else:
            self._hv_now(moved)

    def _hv_now(self, moved: bool) -> None:
        """The hypervolume's point now (the reference moved: the history again)."""
        reference = self._reference()
        if reference != self.reference:
            self.reference = reference
            self._new["reference"] = True
            self.hv = self._replayed()
            return
        if not moved:  # the front is as it was: so is its volume
            return
        point = [len(self._order), r6(self.volume(self.front.values()))]
        if self.hv and self.hv[-1][0] == point[0]:
            self.hv[-1] = point
        else:
            self.hv.append(point)
            self._new["hv"].append(point)
        if len(self.hv) > 2 * MOST_HV:  # thinned here: a history never grows past it
            self.hv = _thinned(self.hv, MOST_HV)
            self._new["reference"] = True  # sent whole again

    def _reference(self) -> tuple | None:
        """The given reference, or the worst seen plus a margin, in the objectives' units."""
        if self.given is not None:
            return self.given
        out = []
        for s, worst, best in zip(self.front.signs, self._worst, self._best, strict=True):
            span = worst - best
            out.append(r6(s * (worst + (MARGIN * span if span > 0 else 1.0))))
        return tuple(out)

    def volume(self, values: np.ndarray) -> float:
        """The hypervolume of ``values`` against the reference (0 with no point)."""
        if not len(values) or self.reference is None:
            return 0.0
        points = values * np.asarray(self.front.signs)
        if self.front.two:
            return _staircase_volume(
                points[np.argsort(points[:, 0], kind="stable")], self.reference_min()
            )
        if len(self.modes) == 3:
            return _slab_volume(points, self.reference_min())
        if len(points) > MOST_FRONT_4:  # 4 objectives: cubic in the front; the curve stops
            return math.nan
        return _slab_volume_4(points, self.reference_min())

    def reference_min(self) -> np.ndarray:
        """The reference point minimised (``max`` objectives negated)."""
        return np.asarray(self.reference, float) * np.asarray(self.front.signs)

    def _replayed(self) -> list[list]:
        """The history again against the reference now: the front rebuilt as it grew."""
        counts = sorted({n for n, _, _ in self._entered})  # only entries ever moved the front
        most = MOST_HV if self.front.two else MOST_HV // 10
        if len(counts) > most:
            counts = [
                counts[i] for i in np.unique(np.linspace(0, len(counts) - 1, most).astype(int))
            ]
        front = ParetoFront(self.modes)
        history, done = [], 0
        for n in counts:
            while done < len(self._entered) and self._entered[done][0] <= n:
                _, trial, values = self._entered[done]
                front.add(trial, values)
                done += 1
            history.append([n, r6(self.volume(front.values()))])
        return history

    # -- the frames' part -------------------------------------------------------------------

    def paint(self) -> dict:
        """The whole ``pareto`` part of a paint (what changed is in it)."""
        if self._owed:  # a paced hypervolume waits no longer
            self._owed = False
            self._hv_now(True)
        self._new = _empty()
        return {
            "names": list(self.names),
            "modes": list(self.modes),
            "reference": _rounded(self.reference),
            "given": self.given is not None,
            "points": self._points(sorted(self._seen.items()))
            | {"infeasible": list(self._infeasible)},
            "front": self.front.ids(),
            "hv": [list(p) for p in self.hv],
        }

    def delta(self) -> dict | None:
        """What changed since the last frame (None: nothing)."""
        new, self._new = self._new, _empty()
        if not (new["points"] or new["reference"] or new["hv"]):
            return None
        part: dict = {}
        if new["points"]:
            part["points"] = self._points(new["points"]) | {"infeasible": new["infeasible"]}
        if new["added"] or new["removed"]:
            added = set(new["added"]) - set(new["removed"])  # one that came and went: gone
            part["added"] = [t for t in new["added"] if t in added]
            part["removed"] = [t for t in new["removed"] if t not in set(new["added"])]
        if new["reference"]:
            part["reference"] = _rounded(self.reference)
            part["hv_all"] = [list(p) for p in self.hv]
        elif new["hv"]:
            part["hv"] = new["hv"]
        return part

    def points(self) -> list[tuple[int, list]]:
        """Every trial folded and its objectives (rounded), in id order."""
        return [(t, [r6(v) for v in vs]) for t, vs in sorted(self._seen.items())]

    def _points(self, points: list) -> dict:
        """Points as columns: ``{"id": [...], "values": [[...], ...]}``."""
        return {"id": [t for t, _ in points], "values": [[r6(v) for v in vs] for _, vs in points]}


def _staircase_volume(points: np.ndarray, ref: np.ndarray) -> float:
    """The area a 2-objective front (minimised, sorted by the first) dominates up to ``ref``."""
    inside = points[(points[:, 0] < ref[0]) & (points[:, 1] < ref[1])]
    if not len(inside):
        return 0.0
    xs = np.append(inside[:, 0], ref[0])
    return float(np.sum((xs[1:] - xs[:-1]) * (ref[1] - inside[:, 1])))


def _slab_volume(points: np.ndarray, ref: np.ndarray) -> float:
    """The volume 3 minimised objectives dominate up to ``ref``: slabs along the third, each
    the area of the staircase of the points below it."""
    inside = points[(points < ref).all(axis=1)]
    inside = inside[np.argsort(inside[:, 2], kind="stable")]
    stair, total = ParetoFront(("min", "min")), 0.0
    for i, p in enumerate(inside):
        stair.add(i, (p[0], p[1]))
        top = inside[i + 1, 2] if i + 1 < len(inside) else ref[2]
        if top > p[2]:
            total += (top - p[2]) * _staircase_volume(stair.keys(), ref[:2])
    return total


def _slab_volume_4(points: np.ndarray, ref: np.ndarray) -> float:
    """The volume 4 minimised objectives dominate up to ``ref``: slabs along the fourth."""
    inside = points[(points < ref).all(axis=1)]
    inside = inside[np.argsort(inside[:, 3], kind="stable")]
    total = 0.0
    for i, p in enumerate(inside):
        top = inside[i + 1, 3] if i + 1 < len(inside) else ref[3]
        if top > p[3]:
            total += (top - p[3]) * _slab_volume(inside[: i + 1, :3], ref[:3])
    return total


def _empty() -> dict:
    """A frame's changes, none yet."""
    return {
        "points": [],
        "infeasible": [],
        "added": [],
        "removed": [],
        "hv": [],
        "reference": False,
    }


def _rounded(values) -> list | None:
    """A point as the page gets it."""
    return None if values is None else [r6(v) for v in values]


def _thinned(points: list, most: int) -> list:
    """At most ``most`` points, evenly, the last kept."""
    keep = np.unique(np.linspace(0, len(points) - 1, most).round().astype(int))
    return [points[i] for i in keep]
