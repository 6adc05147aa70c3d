"""The sweeps on the Bokeh dashboard: a picker of every sweep, and the picked one's board.

:class:`SweepPlots` lists the sweeps a dashboard knows (a scheduler's,
:mod:`.sweep_shelf`; a store's, :mod:`.store_shelf`) in a picker
(``labkit-sweep-picker``, the newest first and picked until a reader picks
another) and shows the picked one with the parts of the notebook board: the
status line (``labkit-sweep-status``: counts by status, the best trial),
the table (:mod:`.sweep_table`), the curves (:mod:`.sweep_curves`) and the
parallel coordinates (:mod:`.sweep_parallel`).  A sweep picked is painted
whole once; after that each tick asks its tracker what changed since the last
one and sends only that (streams and patches), at most ``MAX_RATE`` times a
second and within the share of a core a board's writer takes; while a tick finds
``CROWD`` trials changed or more (100 trials that all report), at most every
``CROWDED_GAP`` seconds, since each tick then sends every line whole.  With no
sweep it says so.  :func:`attach` adds it to a dashboard's document.

The views are linked: the trials kept by the ranges brushed on the parallel
coordinates, or picked on the Pareto scatter or in the table, are drawn
bright on all three (the others dim), and stay so as trials come.
"""

from __future__ import annotations

import html
import time

from bokeh.layouts import column
from bokeh.models import Div, Select  # type: ignore[attr-defined]  # bokeh's stubs

from ..sweep.style import COLOURS, config_words, fmt
from ..trackers.sweep_shelf import Sweeps
from ..trackers.sweep_tracker import SweepTracker
from ..writer import Pacer
from .node_panel import named
from .sweep_curves import SweepCurves
from .sweep_parallel import SweepParallel
from .sweep_pareto import SweepPareto
from .sweep_table import SweepTable

__all__ = ["SweepPlots", "attach", "NO_SWEEP", "CROWD", "CROWDED_GAP"]

NO_SWEEP = "<i>no sweep yet</i>"

#: Trials changed in one tick from which the sweep's board is crowded: each tick then
#: patches that many rows and whole curves (a line's points are sent whole when it grew).
CROWD = 64
#: Fewest seconds between two ticks of a crowded board (MAX_GAP's double): at 100 trials
#: that all report, the dashboard's ticks cost half as much, and still show every change.
CROWDED_GAP = 1.0
_ORDER = ("running", "pending", "completed", "stopped", "failed", "cancelled")


def attach(doc, sweeps: Sweeps, names=None, period_ms: int = 250, reference=None) -> SweepPlots:
    """Add the sweeps' picker and board to ``doc``, looked at every ``period_ms``
    (``reference``: the Pareto view's hypervolume reference point)."""
    plots = SweepPlots(sweeps, names, reference)
    plots.update()
    doc.add_root(plots.layout)
    doc.add_periodic_callback(plots.update, period_ms)
    return plots


class SweepPlots:
    """The picker and the board of the picked sweep, for one browser session."""

    def __init__(self, sweeps: Sweeps, names=None, reference=None):
        self.sweeps = sweeps
        self.picker = named(
            Select(title="sweep", value="", options=[], width=420), "labkit-sweep-picker"
        )
        self.picker.on_change("value", self._on_pick)
        self.status = named(Div(text=NO_SWEEP, sizing_mode="stretch_width"), "labkit-sweep-status")
        self.table = SweepTable(names)
        self.curves = SweepCurves()
        self.parallel = SweepParallel()
        self.pareto = SweepPareto(reference=reference)  # several objectives only
        self.picked: set[int] | None = None  # trials picked on the scatter or in the table
        self.parallel.on_brush = lambda _kept: self._pick(None)
        self.pareto.on_pick_trials = self.table.on_pick_trials = self._pick
        self.board = column(
            self.table.table,
            self.curves.figure,
            self.parallel.figure,
            self.pareto.layout,
            visible=False,
            sizing_mode="stretch_width",
        )
        self.layout = named(
            column(self.picker, self.status, self.board, sizing_mode="stretch_width"),
            "labkit-sweep-plots",
        )
        self.sweep: SweepTracker | None = None  # the sweep shown
        self._chosen: str | None = None  # the run a reader picked (None: the newest)
        self._picking = False
        self._mark = 0
        self._meta = -1
        self._best: int | None = None
        self._options: list = []
        self._pacer, self._next = Pacer(), 0.0
        self.changed = 0  # trials the last tick sent

    def update(self) -> None:
        """Look at the sweeps and send what changed, paced as a board's writer is; every
        ``CROWDED_GAP`` seconds at most while a tick finds ``CROWD`` trials or more changed."""
        if time.monotonic() < self._next:
            return
        self.changed = 0
        gap = self._pacer.timed(self.tick)
        if self.changed >= CROWD:  # a whole curve a line each time: fewer, fuller ticks
            gap = max(gap, CROWDED_GAP)
        self._next = time.monotonic() + gap

    def tick(self) -> None:
        """One look: new sweeps into the picker, the picked one's changes sent."""
        self.sweeps.refresh()
        trackers = self.sweeps.feeds()
        self._list(trackers)
        sweep = self._picked(trackers)
        if sweep is None:
            return
        if sweep.metric is None:  # its run began, the sweep has not said what it is yet
            self.status.text = f"<i>sweep {html.escape(str(sweep.name or sweep.run))} starting</i>"
            self.sweep = None
            return
        if sweep is not self.sweep:
            self._paint(sweep)
        else:
            self._send_changes(sweep)

    # -- the picker ------------------------------------------------------------------------

    def _list(self, trackers: list[SweepTracker]) -> None:
        options = [(f.run, _label(f)) for f in reversed(trackers)]
        if options != self._options:
            self._options = options
            self._set(options=options)

    def _picked(self, trackers: list[SweepTracker]) -> SweepTracker | None:
        by_run = {f.run: f for f in trackers}
        sweep = by_run.get(self._chosen) if self._chosen else None
        sweep = sweep or (trackers[-1] if trackers else None)
        if sweep is not None and self.picker.value != sweep.run:
            self._set(value=sweep.run)
        return sweep

    def _set(self, **changes) -> None:
        self._picking = True  # our own change, not a reader's pick
        try:
            for name, value in changes.items():
                setattr(self.picker, name, value)
        finally:
            self._picking = False

    def _on_pick(self, _attr, _old, new) -> None:
        """A reader picked a sweep: show it at once, and keep it picked."""
        if self._picking:
            return
        self._chosen = new or None
        self._next = 0.0
        self.tick()

    # -- drawing -----------------------------------------------------------------------------

    def _pick(self, trials: set[int] | None) -> None:
        """Trials picked on a view (None: the pick cleared, or ranges brushed): shown on all."""
        if trials is not None and self.parallel.brushes:
            self.parallel.clear()  # a pick replaces the ranges (it comes back here: None)
        self.picked = trials
        self._show_chosen()

    def _show_chosen(self) -> None:
        """The trials brushed or picked bright on every view, the others dim."""
        chosen = self.parallel.kept() if self.parallel.brushes else self.picked
        self.parallel.show(chosen)
        self.pareto.show(chosen)
        self.table.show(chosen)

    def _paint(self, sweep: SweepTracker) -> None:
        """The picked sweep whole: every trial, line and axis."""
        if sweep is not self.sweep and (self.parallel.brushes or self.picked is not None):
            self.parallel.clear()  # another sweep: nothing of it brushed or picked yet
            self.picked = None
        self.sweep = sweep
        self._mark, self._meta = sweep.mark, sweep.meta_mark
        trials = sweep.trials()
        best = sweep.best()
        self._best = best.id if best is not None else None
        self.table.paint(_params(sweep, trials), trials, self._best)
        self.curves.paint(sweep)
        self.parallel.paint(sweep.space, sweep.metric, sweep.mode, trials, self._best)
        self.pareto.paint(sweep)
        self.status.text = _status(sweep, best)
        self._show_chosen()
        self.board.visible = True

    def _send_changes(self, sweep: SweepTracker) -> None:
        """What changed in the picked sweep since the last tick, and only that."""
        mark, changed = sweep.changes(self._mark)
        if not changed and sweep.meta_mark == self._meta:
            return
        if sweep.meta_mark != self._meta and _params(sweep, []) != self.table.params:
            self._paint(sweep)  # its space came after its first trials: new columns and axes
            return
        self._mark, self._meta = mark, sweep.meta_mark
        self.changed = len(changed)
        trials = sweep.trials(changed)
        best = sweep.best()
        best_id = best.id if best is not None else None
        self.table.update(trials, best_id)
        self.curves.update(sweep, changed, best_id, views=trials)
        self.parallel.update(trials, best, sweep.trials)
        self.pareto.update(sweep, changed)
        if self.parallel.brushes or self.picked is not None:
            self._show_chosen()  # the trials that came inside the ranges
        self._best = best_id
        text = _status(sweep, best)
        if text != self.status.text:
            self.status.text = text


def _params(sweep: SweepTracker, trials) -> list[str]:
    """The parameters that vary: the space's, or the keys of the configurations."""
    names = [k for k, d in sweep.space.items() if k != "list" and d.get("type") != "constant"]
    if names or not trials:
        return names
    seen: dict = {}
    for t in trials[:100]:
        seen.update(dict.fromkeys(t.config))
    return list(seen)


def _label(sweep: SweepTracker) -> str:
    """A sweep in the picker: its name, status and size."""
    n = len(sweep)
    return f"{sweep.name or sweep.run} · {sweep.status} · {n} trial{'s' * (n != 1)}"


def _status(sweep: SweepTracker, best) -> str:
    """The status line: name, status, counts by status, the best trial."""
    counts = sweep.counts()
    parts = " · ".join(
        f'<span style="color:{COLOURS.get(s, "#333")}" data-status="{s}">{counts[s]} {s}</span>'
        for s in _ORDER
        if counts.get(s)
    )
    n = len(sweep)
    words = ""
    if best is not None:
        value = best.value if best.status != "running" else best.best
        words = (
            f' · <span class="labkit-sweep-best-line">best {html.escape(str(sweep.metric))} '
            f"<b>{fmt(value)}</b> (trial {best.id}: {html.escape(config_words(best.config))})</span>"
        )
    rule = f" · {html.escape(sweep.rule)}" if sweep.rule else ""
    if sweep.waiting and not sweep.ended:  # its cluster has no worker: it says so
        rule += ' · <b class="labkit-sweep-waiting" style="color:#b08a2e">waiting for workers</b>'
    return (
        f'<div style="overflow-wrap:anywhere;line-height:1.4" data-trials="{n}">'
        f"<b>sweep {html.escape(str(sweep.name or sweep.run))}</b> · "
        f'<span class="labkit-run-status">{html.escape(sweep.status)}</span> · '
        f'<span class="labkit-sweep-total">{n}</span> trial{"s" * (n != 1)}: {parts}{words}{rule}</div>'
    )
