"""A sweep's parallel coordinates on Bokeh: every trial a faint line, the best one bold.

:class:`SweepParallel` draws each trial as a line across one axis a
parameter and one for the metric (:mod:`.sweep_axes`: each scaled to 0..1),
coloured by the trial's value.  Lines are drawn faint, more so the more
trials there are, so thousands of them read as a density; the best trial's
line is drawn bold on top (``labkit-sweep-parallel-best``).  A trial is one
row of the source (``labkit-sweep-parallel-lines``): a new trial is
*streamed*, a trial whose value changed *patched*; only when an axis that
learns its range from the values widens (rarely: by a margin) is every line
placed again.

A reader *brushes* an axis: a box dragged over part of it (the box-select
tool) keeps the trials whose line crosses that axis inside the box, one range
an axis, all of them at once (``labkit-sweep-parallel-brush`` draws them); a
click on an axis (or a box of no height) clears that axis's range, the reset
tool every range.  The
trials kept are told to :attr:`SweepParallel.on_brush` (the dashboard shows
them on the Pareto view and the table too) and drawn bright, the others dim
(:meth:`SweepParallel.show`: the source's selection).

Examples
--------
>>> from labkit.views.trackers.sweep_tracker import TrialView
>>> p = SweepParallel()
>>> p.paint({"x": {"type": "uniform", "lo": 0, "hi": 2}}, "loss", "min",
...         [TrialView(0, {"x": 1.0}, "completed", 3, 0.5, 0.5)], best=0)
>>> p.source.data["ys"], p.best.data["ys"]
([[0.5, 0.5]], [[0.5, 0.5]])
>>> p.brush(0, 0.4, 0.6), p.brush(1, 0.0, 0.2)
({0}, set())
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from bokeh.core.property.validation import validate
from bokeh.events import Reset, SelectionGeometry, Tap
from bokeh.models import (  # type: ignore[attr-defined]  # bokeh's stubs miss lazy exports
    BoxSelectTool,
    ColumnDataSource,
    FixedTicker,
    HoverTool,
    LabelSet,
    LinearColorMapper,
    Range1d,
)
from bokeh.palettes import Viridis256
from bokeh.plotting import figure
from bokeh.transform import transform

from ..trackers.sweep_axes import Axes
from .node_panel import named

__all__ = ["SweepParallel", "select_rows"]

# no configuration words a line: at 10,000 trials they would be a third of the first paint;
# the table (sorted by a parameter) tells them
_LINE = ("xs", "ys", "value", "trial")

#: A box lower than this (in the axes' 0..1) clears its axes' ranges: a click, not a drag.
NO_HEIGHT = 0.01


class SweepParallel:
    """The parallel coordinates of one sweep; :meth:`paint` it whole, then :meth:`update`."""

    def __init__(self, height: int = 260):
        self.source = ColumnDataSource({c: [] for c in _LINE}, name="labkit-sweep-parallel-lines")
        self.best = ColumnDataSource({"xs": [], "ys": []}, name="labkit-sweep-parallel-best")
        self.ticks = ColumnDataSource({"x": [], "y": [], "text": []})
        self.colors = LinearColorMapper(palette=Viridis256, nan_color="#b0b0b0")
        fig = figure(
            title="parallel coordinates",
            height=height,
            tools="pan,wheel_zoom,reset",
            sizing_mode="stretch_width",
            y_range=Range1d(start=-0.08, end=1.08),
        )
        self.lines = fig.multi_line(
            xs="xs",
            ys="ys",
            source=self.source,
            line_color=transform("value", self.colors),
            line_alpha=0.5,
            line_width=1,
        )
        self.glyph = self.lines.glyph
        fig.multi_line(xs="xs", ys="ys", source=self.best, line_color="#d62728", line_width=3.5)
        fig.add_layout(
            LabelSet(
                x="x",
                y="y",
                text="text",
                source=self.ticks,
                text_font_size="8pt",
                x_offset=3,
                text_color="#555",
            )
        )
        fig.add_tools(
            HoverTool(renderers=[self.lines], tooltips=[("trial", "@trial"), ("value", "@value")])
        )
        self._brushing(fig)
        fig.yaxis.visible = False
        fig.ygrid.visible = False
        self.figure = named(fig, "labkit-sweep-parallel")
        self.axes = Axes()
        self._row: dict[int, int] = {}
        self._sent: list[tuple] = []  # each row's (places, value), as last sent
        self._best: tuple | None = None
        self.repaints = 0  # every line placed again (an axis widened)
        self.brushes: dict[int, tuple[float, float]] = {}  # axis -> (low, high), in 0..1
        self.on_brush: Callable[[set[int] | None], None] | None = None  # the trials kept

    def _brushing(self, fig) -> None:
        """The box that brushes axes (it selects no glyph: this view picks the trials), the
        ranges drawn, the dimmed lines of the trials not kept."""
        self.brush_source = ColumnDataSource(
            {"left": [], "right": [], "bottom": [], "top": []}, name="labkit-sweep-parallel-brush"
        )
        fig.quad(
            left="left",
            right="right",
            bottom="bottom",
            top="top",
            source=self.brush_source,
            fill_color="#ffd43b",
            fill_alpha=0.25,
            line_color="#e8590c",
        )
        box = BoxSelectTool(renderers=[], name="labkit-sweep-parallel-box")
        fig.add_tools(box)
        fig.toolbar.active_drag = box
        fig.on_event(SelectionGeometry, self._on_box)
        fig.on_event(Reset, lambda _event: self.clear())
        fig.on_event(Tap, self._on_tap)
        renderer = self.lines
        renderer.selection_glyph = renderer.glyph.clone(line_alpha=0.9, line_width=1.5)
        renderer.nonselection_glyph = renderer.glyph.clone(line_alpha=0.03, line_color="#999")

    def paint(self, space: dict, metric: str | None, mode: str, trials, best: int | None) -> None:
        """Every trial anew (a new sweep picked, or an axis widened)."""
        names = {k for t in trials[:50] for k in t.config} if not space else ()
        self.axes = Axes.of(space, metric, sorted(names))
        for t in trials:
            self.axes.widen(t.config, t.value)
        self._draw_all(trials, mode)
        self._send_best({t.id: t for t in trials}.get(best) if best is not None else None)

    def _draw_all(self, trials, mode: str | None = None) -> None:
        self.repaints += 1
        if mode is not None:  # the best values bright
            self.colors.palette = Viridis256 if mode == "max" else Viridis256[::-1]
        rows = [self._values(t) for t in trials]
        self._row = {t.id: i for i, t in enumerate(trials)}
        self._sent = [(r[1], r[2]) for r in rows]
        self.source.data = {c: [r[k] for r in rows] for k, c in enumerate(_LINE)}
        self._draw_axes()
        self._fade(len(rows))

    def update(self, trials, best, all_trials) -> None:
        """Stream new trials, patch changed values; ``all_trials()`` if an axis widened."""
        widened = False
        for t in trials:
            widened = self.axes.widen(t.config, t.value) or widened
        if widened:
            self._draw_all(all_trials())
        else:
            new: list[tuple] = []
            patches: dict[str, list] = {"ys": [], "value": []}
            for t in trials:
                row = self._values(t)
                at = self._row.get(t.id)
                if at is None:
                    self._row[t.id] = len(self._sent) + len(new)
                    new.append(row)
                elif (row[1], row[2]) != self._sent[at]:  # NaN is math.nan: equal to itself
                    patches["ys"].append((at, row[1]))
                    patches["value"].append((at, row[2]))
                    self._sent[at] = (row[1], row[2])
            if patches["ys"]:
                self.source.patch(patches)
            if new:
                self._sent.extend((r[1], r[2]) for r in new)
                self.source.stream({c: [r[k] for r in new] for k, c in enumerate(_LINE)})
                self._fade(len(self._sent))
        self._send_best(best)

    def _values(self, t) -> tuple:
        value = (
            t.value if isinstance(t.value, (int, float)) and math.isfinite(t.value) else math.nan
        )
        places = [
            round(p, 4) if not math.isnan(p) else math.nan for p in self.axes.place(t.config, value)
        ]
        value = float(f"{value:.6g}") if not math.isnan(value) else math.nan
        return (list(range(len(self.axes))), places, value, t.id)

    def _send_best(self, best) -> None:
        line = None if best is None else (best.id, tuple(self._values(best)[1]))
        if line == self._best:
            return
        self._best = line
        n = len(self.axes)
        self.best.data = {
            "xs": [list(range(n))] if line else [],
            "ys": [list(line[1])] if line else [],
        }

    # -- brushing ----------------------------------------------------------------------------

    def _on_box(self, event) -> None:
        """A box dragged (its last geometry): the axes inside it, or the nearest, brushed."""
        box = event.geometry or {}
        if not event.final or box.get("type") != "rect" or not len(self.axes):
            return
        x0, x1 = sorted((box["x0"], box["x1"]))
        inside = [i for i in range(len(self.axes)) if x0 <= i <= x1]
        axes = inside or [min(range(len(self.axes)), key=lambda i: abs(i - (x0 + x1) / 2))]
        for axis in axes:
            self._set(axis, box["y0"], box["y1"])
        self._brushed()

    def _on_tap(self, event) -> None:
        """A click on a brushed axis (within a quarter of the gap to the next): its range
        cleared."""
        if event.x is None or not self.brushes:
            return
        axis = round(event.x)
        if abs(event.x - axis) <= 0.25 and axis in self.brushes:
            self.brush(axis, 0.0, 0.0)

    def brush(self, axis: int, low: float, high: float) -> set[int] | None:
        """Keep the trials whose line crosses ``axis`` between ``low`` and ``high`` (0..1 of
        the axis; a range of no height clears it): the trials kept by every range."""
        self._set(axis, low, high)
        return self._brushed()

    def clear(self) -> None:
        """No range: every trial shown."""
        self.brushes = {}
        self._brushed()

    def _set(self, axis: int, low: float, high: float) -> None:
        low, high = sorted((float(low), float(high)))
        if high - low < NO_HEIGHT:
            self.brushes.pop(axis, None)
        else:
            self.brushes[axis] = (low, high)

    def _brushed(self) -> set[int] | None:
        """The ranges drawn, the trials kept told; those trials (None: no range)."""
        b = sorted(self.brushes.items())
        self.brush_source.data = {
            "left": [a - 0.12 for a, _ in b],
            "right": [a + 0.12 for a, _ in b],
            "bottom": [r[0] for _, r in b],
            "top": [r[1] for _, r in b],
        }
        kept = self.kept()
        if self.on_brush is not None:
            self.on_brush(kept)
        else:
            self.show(kept)
        return kept

    def kept(self) -> set[int] | None:
        """The trials inside every range (None: no range)."""
        if not self.brushes:
            return None
        places = np.array([p for p, _ in self._sent], dtype=float).reshape(len(self._sent), -1)
        inside = np.ones(len(self._sent), dtype=bool)
        for axis, (low, high) in self.brushes.items():
            if axis < places.shape[1]:
                inside &= (places[:, axis] >= low) & (places[:, axis] <= high)  # NaN: outside
        return set(np.asarray(self.source.data["trial"])[inside].tolist())

    def show(self, trials: set[int] | None) -> None:
        """Draw ``trials`` bright, the others dim (None: all as they are)."""
        select_rows(self.source, self._row, trials)

    def _draw_axes(self) -> None:
        n = len(self.axes)
        ticks = list(range(n))
        for axis in self.figure.xaxis:  # a new ticker model makes Bokeh walk the document
            if not isinstance(axis.ticker, FixedTicker):
                axis.ticker = FixedTicker(ticks=ticks)
            elif list(axis.ticker.ticks) != ticks:
                axis.ticker.ticks = ticks
        self.figure.xaxis.major_label_overrides = {i: a.name for i, a in enumerate(self.axes)}
        self.figure.x_range.range_padding = 0.05
        xs, ys, texts = [], [], []
        for i, axis in enumerate(self.axes):
            low, high = axis.ticks()
            xs += [i, i]
            ys += [-0.06, 1.02]
            texts += [low, high]
        self.ticks.data = {"x": xs, "y": ys, "text": texts}

    def _fade(self, n: int) -> None:
        """Fainter lines the more there are: many read as a density."""
        alpha = round(min(0.6, max(0.03, 30.0 / max(n, 1))), 2)
        if self.glyph.line_alpha != alpha:
            self.glyph.line_alpha = alpha


def select_rows(source, row: dict[int, int], trials: set[int] | None) -> bool:
    """Select the rows of ``trials`` in ``source`` (``row``: trial -> row; None: no row);
    whether that changed its selection (nothing is sent when not)."""
    rows = np.asarray(
        [] if trials is None else sorted(row[t] for t in trials if t in row), dtype=np.int32
    )
    if np.array_equal(source.selected.indices, rows):
        return False
    with validate(False):  # our own ints: Bokeh would check each (25 ms at 5,000 rows)
        source.selected.indices = rows  # an array: sent as a binary buffer
    return True
