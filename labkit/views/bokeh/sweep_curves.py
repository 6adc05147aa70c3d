"""A sweep's curves on Bokeh: the running and best trials as lines, the rest as a quantile band.

:class:`SweepCurves` draws the metric against the step.  Up to
:data:`~.sweep_lines.LINES` trials every curve is a line; beyond, the running
trials and the best :data:`~.sweep_lines.LEADERS` are, and every other
curve is summed up in a band (10–90th and 25–75th percentiles, the median
as a line), as the sweep's tracker settles them (:mod:`.sweep_lines`).  Lines live in *slots*, the rows of one
``multi_line`` source (``labkit-sweep-lines``): a trial that becomes a line
takes a free slot, one that stops being one leaves its slot empty for the
next, and a line that grew is *patched* in its slot, so a tick sends the
lines that changed, never all of them.  The band's source
(``labkit-sweep-band``) is small (a row a step) and replaced when the band
changed.

Examples
--------
>>> from labkit.views.trackers.sweep_tracker import SweepTracker
>>> from labkit.events import SweepStarted
>>> sweep = SweepTracker("r")
>>> sweep(SweepStarted("r", "demo", "acc", "max", {}, (
...     {"id": 0, "config": {}, "status": "running", "history": [(0, {"acc": 0.5}, 0.0)]},), 1))
>>> curves = SweepCurves()
>>> curves.paint(sweep)
>>> curves.lines.data["trial"], curves.lines.data["ys"]
([0], [[0.5]])
"""

from __future__ import annotations

import math

from bokeh.models import (  # type: ignore[attr-defined]  # bokeh's stubs miss lazy exports
    ColumnDataSource,
    HoverTool,
)
from bokeh.plotting import figure

from ..sweep.style import PALETTE, config_words, fmt
from ..trackers.sweep_grid import QUANTILES
from ..trackers.sweep_tracker import SweepTracker
from .node_panel import named

__all__ = ["SweepCurves"]

_LINE = ("xs", "ys", "trial", "status", "color", "alpha", "width", "config", "value")
_EMPTY: tuple = ([], [], -1, "", "#000000", 0.0, 0.0, "", "")
_BAND_COLOR = "#5b7fa6"


class SweepCurves:
    """The curves of one sweep; :meth:`paint` it whole, then :meth:`update` what changed."""

    def __init__(self, height: int = 280):
        self.lines = ColumnDataSource({c: [] for c in _LINE}, name="labkit-sweep-lines")
        self.band = ColumnDataSource(
            {"step": [], **{q: [] for q in QUANTILES}}, name="labkit-sweep-band"
        )
        fig = figure(
            title="metric by step",
            height=height,
            tools="pan,wheel_zoom,box_zoom,reset",
            sizing_mode="stretch_width",
        )
        fig.varea(x="step", y1="q10", y2="q90", source=self.band, color=_BAND_COLOR, alpha=0.15)
        fig.varea(x="step", y1="q25", y2="q75", source=self.band, color=_BAND_COLOR, alpha=0.25)
        fig.line(x="step", y="q50", source=self.band, color=_BAND_COLOR, line_width=1.5)
        drawn = fig.multi_line(
            xs="xs", ys="ys", color="color", alpha="alpha", line_width="width", source=self.lines
        )
        fig.add_tools(
            HoverTool(
                renderers=[drawn],
                tooltips=[
                    ("trial", "@trial (@status)"),
                    ("config", "@config"),
                    ("value", "@value"),
                ],
            )
        )
        fig.xaxis.axis_label = "step"
        self.figure = named(fig, "labkit-sweep-curves")
        self._slot: dict[int, int] = {}  # trial -> its slot
        self._free: list[int] = []
        self._sent: list[tuple] = []  # each slot's row, as last sent
        self._band = -1  # the band's version sent (-1: none)
        self._best: int | None = None
        self._banded = 0  # trials in the band sent

    @property
    def drawn(self) -> set[int]:
        """The trials drawn as lines."""
        return set(self._slot)

    def paint(self, sweep: SweepTracker) -> None:
        """Every line and the band anew (a new sweep picked)."""
        best = sweep.best()
        self._best = best_id = best.id if best is not None else None
        lines = sorted(sweep.lines())
        rows = [self._row(t, best_id) for t in sweep.trials(lines)]
        self._slot = {row[2]: i for i, row in enumerate(rows)}
        self._free, self._sent = [], rows
        self.lines.data = {c: [r[k] for r in rows] for k, c in enumerate(_LINE)}
        self.figure.yaxis.axis_label = sweep.metric or ""
        self._band = -1
        self._send_band(sweep)

    def update(
        self, sweep: SweepTracker, changed: list[int], best_id: int | None, views=()
    ) -> None:
        """Lines that came, went or grew, and the band if it changed (``views``: trials
        read already this tick, not read again)."""
        lines = sweep.lines()
        gone = [i for i in self._slot if i not in lines]
        patches: dict[int, list] = {}
        for trial in gone:
            freed = self._slot.pop(trial)
            self._free.append(freed)
            self._patch(patches, freed, _EMPTY)
        came = [i for i in lines if i not in self._slot]
        redraw = {i for i in changed if i in lines} | set(came)
        if best_id != self._best:  # the old best's width and the new one's
            redraw |= {i for i in (self._best, best_id) if i in lines}
            self._best = best_id
        new: list[tuple] = []
        read = {t.id: t for t in views if t.id in redraw}
        unread = sweep.trials(sorted(redraw.difference(read)))
        for t in sorted([*read.values(), *unread], key=lambda t: t.id):
            row = self._row(t, best_id)
            slot = self._slot.get(t.id)
            if slot is None and self._free:
                slot = self._slot[t.id] = self._free.pop()
            if slot is not None:
                self._patch(patches, slot, row)
            else:
                self._slot[t.id] = len(self._sent) + len(new)
                new.append(row)
        if patches:
            self.lines.patch({_LINE[k]: cells for k, cells in patches.items()})
        if new:
            self._sent.extend(new)
            self.lines.stream({c: [r[k] for r in new] for k, c in enumerate(_LINE)})
        self._send_band(sweep)

    def _patch(self, patches: dict, slot: int, row: tuple) -> None:
        for k, (old, value) in enumerate(zip(self._sent[slot], row, strict=True)):
            if old != value and not (k == 1 and _same_floats(old, value)):
                patches.setdefault(k, []).append((slot, value))
        self._sent[slot] = row

    def _send_band(self, sweep: SweepTracker) -> None:
        """The band, when it changed since sent; the title."""
        version, q = sweep.band()
        if version != self._band:
            self._band = version
            self._banded = q["n"] if q else 0
            if q is None:
                self.band.data = {"step": [], **{name: [] for name in QUANTILES}}
            else:
                self.band.data = {"step": q["steps"], **{name: q[name] for name in QUANTILES}}
        n = len(self._slot)
        title = f"metric by step · {n} line{'s' * (n != 1)}" + (
            f", {self._banded} more trials as a band (10–90th, 25–75th percentile, median)"
            if self._banded
            else ""
        )
        if title != self.figure.title.text:
            self.figure.title.text = title

    @staticmethod
    def _row(t, best_id: int | None) -> tuple:
        faded = t.status in ("stopped", "failed", "cancelled") and t.id != best_id
        return (
            [s for s, _ in t.curve],
            [
                v if isinstance(v, (int, float)) and math.isfinite(v) else math.nan
                for _, v in t.curve
            ],
            t.id,
            str(t.status),
            PALETTE[t.id % len(PALETTE)],
            0.3 if faded else 0.95,
            3.5 if t.id == best_id else 1.3,
            config_words(t.config),
            fmt(t.value),
        )


def _same_floats(a: list, b: list) -> bool:
    """Equal lists of values, NaN equal to NaN."""
    return len(a) == len(b) and all(
        x == y
        or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))
        for x, y in zip(a, b, strict=True)
    )
