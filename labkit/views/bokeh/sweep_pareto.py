"""A several-objective sweep's Pareto view on Bokeh: two objectives as a scatter, the front a
staircase, the hypervolume over the trials ended (issue 48).

:class:`SweepPareto` keeps a :class:`~labkit.views.sweep.pareto.ParetoFrames`
of the picked sweep (the front kept as trials end, as the notebook board's)
and draws from its parts: a paint puts every ended trial in the scatter's
source (``labkit-sweep-pareto-points``); after that each tick streams the
trials that ended and patches the front's flags of those that entered or
left it, and draws the staircase (``labkit-sweep-pareto-front``: the front's
points non-dominated in the two objectives shown) and the hypervolume
(``labkit-sweep-pareto-hv``) again, both the size of the front or less.  Two
pickers choose the objectives shown.  A sweep of one metric shows none of it.

The hypervolume is against the reference point a user gives
(``lk.dashboard(..., reference=(...))``, ``labkit dashboard --store S
--reference 1,2``; :data:`REFERENCE_RULES`), one value an objective, else
against the worst seen plus a margin (:mod:`~labkit.views.sweep.pareto`); its
title says which.  A reader may type another in the page
(``labkit-sweep-pareto-reference``: numbers separated by commas, empty for the
default): the view is drawn again against it; words that are no point are
said in the title, and the reference stays as it was.  A sweep with another number of objectives than the
reference's gets the default, and the title says that too.

Points picked on the scatter (the box-select or tap tool) are told to
:attr:`SweepPareto.on_pick_trials` (the dashboard draws their lines and rows
bright too); :meth:`SweepPareto.show` draws the trials another view picked
bright and the others dim.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from bokeh.layouts import column, row
from bokeh.models import (  # type: ignore[attr-defined]  # bokeh's stubs miss lazy exports
    ColumnDataSource,
    HoverTool,
    Select,
    TextInput,
)
from bokeh.plotting import figure

from ...constraints import Satisfies, check_argument
from ..sweep.pareto import ParetoFrames
from .node_panel import named
from .sweep_parallel import select_rows

__all__ = ["SweepPareto", "REFERENCE", "REFERENCE_RULES", "check_reference"]

_FRONT, _OTHER = "#e8590c", "#1f77b4"


def _is_point(value: object) -> bool:
    """Whether ``value`` is 2 to 4 finite numbers (a list or a tuple)."""
    return (
        isinstance(value, (list, tuple))
        and 2 <= len(value) <= 4
        and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for v in value
        )
    )


#: A hypervolume's reference point: one finite number an objective.
REFERENCE = Satisfies(_is_point, "2 to 4 finite numbers, one an objective")
#: What a hypervolume's ``reference`` may be: a point, or None (the default).
REFERENCE_RULES = [REFERENCE, None]


def check_reference(reference, what: str = "") -> tuple[float, ...] | None:
    """``reference`` as a tuple of floats (None: the default), or an InputError naming it."""
    check_argument("reference", reference, REFERENCE_RULES, what)
    return None if reference is None else tuple(float(v) for v in reference)


class SweepPareto:
    """The Pareto view of the picked sweep; :meth:`paint` it whole, then :meth:`update`."""

    def __init__(self, height: int = 300, reference=None):
        self.reference = check_reference(reference)
        self.points = ColumnDataSource(
            {"trial": [], "x": [], "y": [], "colour": [], "size": []},
            name="labkit-sweep-pareto-points",
        )
        self.stairs = ColumnDataSource({"x": [], "y": []}, name="labkit-sweep-pareto-front")
        self.hv = ColumnDataSource({"n": [], "hv": []}, name="labkit-sweep-pareto-hv")
        fig = figure(
            title="Pareto front",
            height=height,
            sizing_mode="stretch_width",
            tools="pan,wheel_zoom,box_zoom,box_select,tap,reset",
        )
        dots = fig.scatter("x", "y", source=self.points, color="colour", size="size", alpha=0.7)
        dots.nonselection_glyph = dots.glyph.clone(fill_alpha=0.12, line_alpha=0.12)
        fig.line("x", "y", source=self.stairs, color=_FRONT, line_width=2)
        fig.add_tools(HoverTool(tooltips=[("trial", "@trial"), ("x", "@x"), ("y", "@y")]))
        self.figure = named(fig, "labkit-sweep-pareto")
        self.hv_figure = self._hv_figure()
        self.x = named(Select(title="x", value="", options=[], width=160), "labkit-sweep-pareto-x")
        self.y = named(Select(title="y", value="", options=[], width=160), "labkit-sweep-pareto-y")
        for pick in (self.x, self.y):
            pick.on_change("value", self._on_pick)
        self.typed = named(
            TextInput(
                title="hypervolume reference",
                value=", ".join(f"{v:g}" for v in self.reference or ()),
                placeholder="worst seen + margin",
                width=220,
            ),
            "labkit-sweep-pareto-reference",
        )
        self.typed.on_change("value", self._on_reference)
        self.layout = column(
            row(self.x, self.y, self.typed),
            self.figure,
            self.hv_figure,
            visible=False,
            sizing_mode="stretch_width",
        )
        self.frames: ParetoFrames | None = None
        self._values: dict[int, list] = {}  # trial -> its objectives
        self._row: dict[int, int] = {}  # trial -> its row in the scatter's source
        self._painting = False
        self.on_pick_trials: Callable[[set[int] | None], None] | None = None
        self._showing = False
        self._chosen: set[int] | None = None  # the trials shown bright
        self._sweep = None  # the sweep painted
        self.points.selected.on_change("indices", self._on_selected)

    def _hv_figure(self):
        """The hypervolume over the trials ended."""
        hv = figure(
            title="hypervolume by trials ended",
            height=150,
            sizing_mode="stretch_width",
            tools="pan,wheel_zoom,reset",
        )
        hv.line("n", "hv", source=self.hv, line_width=2)
        hv.scatter("n", "hv", source=self.hv, size=5)  # a history of one point shows too
        return named(hv, "labkit-sweep-hv")

    def _on_reference(self, _attr, _old, new) -> None:
        """A reader typed a reference point: the view drawn again against it."""
        text = new.strip()
        try:
            point = tuple(float(v) for v in text.split(",")) if text else None
        except ValueError:
            point = ()
        if point is not None and not REFERENCE.accepts(point):
            # a title is drawn on the canvas as text, never as HTML
            self.hv_figure.title.text = f"reference '{text[:40]}' refused: {REFERENCE.describe()}"
            return
        self.reference = point
        if self._sweep is not None:
            self.paint(self._sweep)

    def _on_selected(self, _attr, _old, new) -> None:
        """A reader picked points (none: the pick cleared): their trials told."""
        if self._showing or self.on_pick_trials is None:
            return
        trials = self.points.data["trial"]
        self.on_pick_trials({trials[i] for i in new if i < len(trials)} if new else None)

    def show(self, trials: set[int] | None) -> None:
        """Draw ``trials`` bright, the others dim (None: all as they are)."""
        self._chosen = trials
        self._showing = True  # our own change, not a reader's pick
        try:
            select_rows(self.points, self._row, trials)
        finally:
            self._showing = False

    def _on_pick(self, _attr, _old, _new) -> None:
        """A reader picked another objective: every point drawn again."""
        if not self._painting:
            self._redraw()

    def paint(self, sweep) -> None:
        """The sweep's ended trials whole (none shown for a sweep of one metric)."""
        self._values, self._row, self._sweep = {}, {}, sweep
        if len(sweep.objectives) < 2:
            self.frames = None
            self.layout.visible = False
            return
        given = self.reference if len(self.reference or ()) == len(sweep.objectives) else None
        self.frames = ParetoFrames(sweep.objectives, sweep.modes, given)
        self.hv_figure.title.text = _hv_title(self.reference, given, len(sweep.objectives))
        self.frames.fold(sweep.state(None).rows)
        names = list(sweep.objectives)
        self._painting = True  # the pickers set here: one draw below
        try:
            self.x.options, self.y.options = names, names
            self.x.value, self.y.value = names[0], names[1]
        finally:
            self._painting = False
        self._values = dict(self.frames.points())
        self._redraw()
        self.frames.delta()  # what the paint drew
        self.layout.visible = True
        self.show(self._chosen)  # drawn again: the same trials bright

    def update(self, sweep, changed) -> None:
        """The trials ``changed`` folded in; what moved streamed and patched."""
        if self.frames is None:
            return
        self.frames.fold(sweep.state(changed).rows)
        part = self.frames.delta()
        if part is None:
            return
        new = part.get("points", {})
        a, b = self._axes()
        front = set(self.frames.front.ids())
        ids, values = new.get("id", []), new.get("values", [])
        rows: dict[str, Any] = {"trial": [], "x": [], "y": [], "colour": [], "size": []}
        for trial, v in zip(ids, values, strict=True):
            self._values[trial] = v
            self._row[trial] = len(self._row)
            for key, cell in zip(rows, _point(trial, v, a, b, trial in front), strict=True):
                rows[key].append(cell)
        flips = [t for t in part.get("added", []) + part.get("removed", []) if t not in set(ids)]
        if flips:
            self.points.patch(
                {
                    "colour": [(self._row[t], _FRONT if t in front else _OTHER) for t in flips],
                    "size": [(self._row[t], 7 if t in front else 4) for t in flips],
                }
            )
        if ids:
            self.points.stream(rows)
        self._draw_front(a, b)

    def _axes(self) -> tuple[int, int]:
        """The positions of the two objectives shown."""
        names = list(self.frames.names) if self.frames else []
        pick = lambda s, d: names.index(s.value) if s.value in names else d  # noqa: E731
        return pick(self.x, 0), pick(self.y, 1)

    def _redraw(self) -> None:
        """Every point again (a paint, or another objective picked)."""
        if self.frames is None:
            return
        a, b = self._axes()
        front = set(self.frames.front.ids())
        cells = [_point(t, v, a, b, t in front) for t, v in self._values.items()]
        self._row = {t: i for i, t in enumerate(self._values)}
        self.points.data = {k: [c[i] for c in cells] for i, k in enumerate(self.points.data)}
        self._draw_front(a, b)

    def _draw_front(self, a: int, b: int) -> None:
        """The staircase of the front in objectives ``a`` and ``b``, and the hypervolume."""
        frames = self.frames
        if frames is None:
            return
        sa, sb = (-1 if frames.modes[i] == "max" else 1 for i in (a, b))
        pts = sorted(
            ((v[a], v[b]) for v in frames.front.values().tolist()),
            key=lambda p: (sa * p[0], sb * p[1]),
        )
        steps: list = []
        for x, y in pts:
            if steps and sb * y >= sb * steps[-1][1]:
                continue  # not on the front of these two
            if steps:
                steps.append((x, steps[-1][1]))
            steps.append((x, y))
        self.stairs.data = {"x": [p[0] for p in steps], "y": [p[1] for p in steps]}
        self.hv.data = {"n": [p[0] for p in frames.hv], "hv": [p[1] for p in frames.hv]}


def _hv_title(reference, given, n: int) -> str:
    """The hypervolume's title: against which reference point."""
    title = "hypervolume by trials ended"
    if given is not None:
        return f"{title} · reference ({', '.join(f'{v:g}' for v in given)})"
    if reference is not None:
        return f"{title} · default reference (the one given has {len(reference)} values, not {n})"
    return f"{title} · default reference (the worst seen plus a margin)"


def _point(trial: int, values: list, a: int, b: int, front: bool) -> tuple:
    """A trial's cells in the scatter's source."""
    return (trial, values[a], values[b], _FRONT if front else _OTHER, 7 if front else 4)
