"""The axes of a sweep's parallel coordinates: each parameter, then the metric, scaled to 0..1.

A parameter whose range the space states (``uniform``, ``loguniform``,
``randint``, ``choice``, a grid's values) keeps that range for good, so a new
trial never moves the others' lines.  The metric (and a parameter of a list
of configurations) learns its range from the values: it widens only when a
value falls outside, by a margin of a quarter of the span, so the lines of
a sweep of many trials are redrawn a handful of times, not at each one.

Examples
--------
>>> axes = Axes.of({"lr": {"type": "loguniform", "lo": 1e-4, "hi": 1e-2},
...                 "act": {"type": "choice", "values": ["relu", "tanh"]}}, "loss")
>>> [a.name for a in axes], axes.widen({"lr": 1e-3, "act": "tanh"}, 0.5)  # a first value
(['lr', 'act', 'loss'], True)
>>> axes.place({"lr": 1e-3, "act": "tanh"}, 0.5)
[0.5, 1.0, 0.5]
>>> axes.widen({}, 2.0), axes.metric.lo, axes.metric.hi
(True, 0.5, 2.375)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["Axis", "Axes"]

_MARGIN = 0.25


@dataclass
class Axis:
    """One axis: ``number`` (``log``: on a log scale) between ``lo`` and ``hi``, or ``category``."""

    name: str
    kind: str = "number"
    lo: float | None = None
    hi: float | None = None
    labels: list = field(default_factory=list)  # a category axis's values, in order
    fixed: bool = False  # the space states its range: it never widens

    def place(self, value) -> float:
        """``value`` scaled to 0..1 (NaN where it has none)."""
        if self.kind == "category":
            if value not in self.labels:
                return math.nan
            return (
                self.labels.index(value) / (len(self.labels) - 1) if len(self.labels) > 1 else 0.5
            )
        x = _number(value, self.kind == "log")
        if x is None or self.lo is None or self.hi is None:
            return math.nan
        lo, hi = (
            (math.log10(self.lo), math.log10(self.hi)) if self.kind == "log" else (self.lo, self.hi)
        )
        if hi == lo:
            return 0.5
        return min(1.0, max(0.0, (x - lo) / (hi - lo)))

    def widen(self, value) -> bool:
        """Take ``value`` into the range (an axis learned from values); whether it moved."""
        if self.fixed:
            return False
        if self.kind == "category":
            if value is None or value in self.labels:
                return False
            self.labels.append(value)
            return True
        x = _number(value, False)
        if x is None or (self.kind == "log" and x <= 0):
            return False
        if self.lo is None or self.hi is None:
            self.lo = self.hi = x
            return True
        if self.lo <= x <= self.hi:
            return False
        lo, hi = min(self.lo, x), max(self.hi, x)
        span = (hi - lo) * _MARGIN
        self.lo = lo - span if x < self.lo else lo
        self.hi = hi + span if x > self.hi else hi
        return True

    def ticks(self) -> tuple[str, str]:
        """What the axis's bottom and top read."""
        if self.kind == "category":
            return (str(self.labels[0]), str(self.labels[-1])) if self.labels else ("", "")
        return _short(self.lo), _short(self.hi)


class Axes(list):
    """The parameters' axes, then the metric's (:attr:`metric`)."""

    @classmethod
    def of(cls, space: dict, metric: str | None, names=None) -> Axes:
        """The axes of a sweep's space (its description) and metric; ``names`` when it has none."""
        axes = cls()
        for name, d in (space or {}).items():
            if name == "list" or d.get("type") == "constant":
                continue
            axes.append(_axis(name, d))
        known = {a.name for a in axes}
        for name in names or ():
            if name not in known:
                axes.append(Axis(name))
        axes.append(Axis(metric or "value"))
        return axes

    @property
    def metric(self) -> Axis:
        return self[-1]

    def place(self, config: dict, value) -> list[float]:
        """One trial's line: its parameters' and its value's places, 0..1."""
        return [a.place(config.get(a.name)) for a in self[:-1]] + [self.metric.place(value)]

    def widen(self, config: dict, value) -> bool:
        """Take one trial's values in; whether any axis moved (every line must be placed again)."""
        moved = False
        for a in self[:-1]:
            value_here = config.get(a.name)
            if (
                a.kind != "category"
                and _number(value_here, False) is None
                and value_here is not None
            ):
                a.kind, a.lo, a.hi = "category", None, None  # words in a list's configurations
            moved = a.widen(value_here) or moved
        return self.metric.widen(value) or moved


def _axis(name: str, d: dict) -> Axis:
    kind = d.get("type")
    if kind in ("uniform", "randint"):
        return Axis(name, "number", float(d["lo"]), float(d["hi"]), fixed=True)
    if kind == "loguniform":
        return Axis(name, "log", float(d["lo"]), float(d["hi"]), fixed=True)
    values = d.get("values")
    if kind in ("choice", "grid") and values:
        numbers = [n for n in (_number(v, False) for v in values) if n is not None]
        if len(numbers) == len(values):
            return Axis(name, "number", min(numbers), max(numbers), fixed=True)
        return Axis(name, "category", labels=list(values), fixed=True)
    return Axis(name)


def _number(value, log: bool) -> float | None:
    """``value`` as a plotted number (``log``: its log10), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    x = float(value)
    if not math.isfinite(x):
        return None
    if log:
        return math.log10(x) if x > 0 else None
    return x


def _short(x: float | None) -> str:
    return "" if x is None else f"{x:.3g}"
