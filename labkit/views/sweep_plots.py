"""A sweep on the Bokeh dashboard: the curves of every trial and the table of trials.

:class:`SweepPlots` draws the newest sweep a dashboard's tracker has seen:
a figure of the metric against the step, one line a trial (stopped ones
faded, the best one bold, a hover per line), and a table of the trials
(sorted by a menu; the best row highlighted).  It reads the live sweep
(:func:`~labkit.experiments.live_sweep`) through a
:class:`~.sweep_tracker.SweepTracker` while a browser session is open, at
most twice a second and within the share of a core a board's writer takes;
with no sweep it shows nothing.  :func:`attach` adds it to a dashboard
document in one call.
"""

from __future__ import annotations

import math
import time

from bokeh.layouts import column
from bokeh.models import (  # type: ignore[attr-defined]  # bokeh's stubs miss lazy exports
    ColumnDataSource,
    Div,
    HoverTool,
    Select,
)
from bokeh.plotting import figure

from ..experiments.live import live_sweep
from . import sweep_draw
from .components import _named
from .sweep_tracker import SweepTracker
from .writer import Pacer

__all__ = ["SweepPlots", "attach"]

_LINE_COLUMNS = ("xs", "ys", "color", "alpha", "width", "trial", "status", "config", "value")


def attach(doc, tracker, period_ms: int = 500) -> SweepPlots:
    """Add the plots of ``tracker``'s newest sweep to ``doc``, looked at every ``period_ms``."""
    plots = SweepPlots(tracker)
    plots.update()
    doc.add_root(plots.layout)
    doc.add_periodic_callback(plots.update, period_ms)
    return plots


class SweepPlots:
    """The curves and the table of the newest sweep that ``tracker`` (a Tracker) has seen."""

    def __init__(self, tracker):
        self.tracker = tracker
        self.run: str | None = None
        self.sweep_tracker: SweepTracker | None = None
        self._drawn = None
        self._pacer, self._next = Pacer(), 0.0
        self.title = _named(Div(text="", sizing_mode="stretch_width"), "labkit-sweep-title")
        self.lines = ColumnDataSource({c: [] for c in _LINE_COLUMNS}, name="labkit-sweep-lines")
        self.figure = figure(
            title="Sweep: metric by step",
            height=260,
            tools="pan,wheel_zoom,reset",
            sizing_mode="stretch_width",
        )
        _named(self.figure, "labkit-sweep-curves")
        renderer = self.figure.multi_line(
            xs="xs", ys="ys", color="color", alpha="alpha", line_width="width", source=self.lines
        )
        self.figure.add_tools(
            HoverTool(
                renderers=[renderer],
                tooltips=[
                    ("trial", "@trial (@status)"),
                    ("config", "@config"),
                    ("value", "@value"),
                ],
            )
        )
        self.figure.xaxis.axis_label = "step"
        self._snap = None
        self.sort = _named(
            Select(title="sort by", value="rank", options=[("rank", "best first")], width=200),
            "labkit-sweep-sort",
        )
        self.sort.on_change("value", self._on_sort)
        self.table = _named(Div(text="", sizing_mode="stretch_width"), "labkit-sweep-table")
        self.layout = column(
            self.title,
            self.figure,
            self.sort,
            self.table,
            visible=False,
            sizing_mode="stretch_width",
        )
        _named(self.layout, "labkit-sweep-plots")

    def _live(self):
        """The newest sweep run's live sweep (a new one: a new tracker), or None."""
        runs = [r for r in self.tracker.progress.runs() if r.kind == "sweep"]
        for r in reversed(runs):
            live = live_sweep(r.run)
            if live is not None:
                if r.run != self.run:
                    self.run, self.sweep_tracker, self._drawn = r.run, SweepTracker(r.run), None
                return live, r
        return None, None

    def update(self) -> None:
        """Read the newest sweep and redraw, paced as the board's writer is (rate, CPU share)."""
        if time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self._pacer.timed(self._update)

    def _update(self) -> None:
        live, run = self._live()
        if live is None:
            return
        tracker = self.sweep_tracker
        if tracker is None:
            return
        tracker.seed(live)
        snap = tracker.snapshot()
        key = tuple((t.id, t.status, t.reports, t.value) for t in snap.trials)
        if key == self._drawn:
            return
        self._drawn = key
        self.layout.visible = True
        self.title.text = sweep_draw.status_line(snap, f"sweep {snap.name}", run.status)
        self.figure.yaxis.axis_label = snap.metric
        self._draw_lines(snap)
        self._draw_table(snap)

    def _draw_lines(self, snap) -> None:
        best = snap.best.id if snap.best is not None else None
        data: dict[str, list] = {c: [] for c in _LINE_COLUMNS}
        for t in snap.trials:
            if not t.curve:
                continue
            data["xs"].append([s for s, _ in t.curve])
            # an infinite value would stretch the axis to infinity: a gap, as NaN is
            data["ys"].append([v if sweep_draw.finite(v) else math.nan for _, v in t.curve])
            data["color"].append(sweep_draw.PALETTE[t.id % len(sweep_draw.PALETTE)])
            faded = t.status in ("stopped", "failed", "cancelled") and t.id != best
            data["alpha"].append(0.25 if faded else 0.95)
            data["width"].append(3.5 if t.id == best else 1.3)
            data["trial"].append(t.id)
            data["status"].append(t.status)
            data["config"].append(sweep_draw.config_words(t.config))
            data["value"].append(sweep_draw.fmt(t.value))
        self.lines.data = data

    def _draw_table(self, snap) -> None:
        options = [v for v, _ in self._sort_options(snap)]
        if list(self.sort.options) != [(v, t) for v, t in self._sort_options(snap)]:
            self.sort.options = self._sort_options(snap)
        key = self.sort.value if self.sort.value in options else "rank"
        self.table.text = sweep_draw.table(snap, key)
        self._snap = snap

    @staticmethod
    def _sort_options(snap) -> list:
        return [
            ("rank", "best first"),
            ("trial", "trial"),
            ("status", "status"),
            ("step", "step"),
            ("latest", "latest"),
            ("best", "best"),
            *((p, p) for p in sweep_draw.params(snap)),
        ]

    def _on_sort(self, _attr, _old, _new) -> None:
        """The sort menu changed: the table again, at once."""
        if self._snap is not None:
            self._draw_table(self._snap)
