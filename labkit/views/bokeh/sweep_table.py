"""A sweep's trials as a Bokeh ``DataTable``: drawn only where in view, sorted by a header click.

:class:`SweepTable` keeps one row a trial in a ``ColumnDataSource``
(``labkit-sweep-table-source``): new trials are *streamed*, changed cells
*patched*, each against what this table last sent, so a tick costs the
trials that changed.  SlickGrid, under Bokeh's ``DataTable``
(``labkit-sweep-table``), draws only the rows in view and sorts a column
when its header is clicked (again: the other way).  The best trial's row
carries a star; statuses are coloured as on the notebook board.  Rows a
reader selects are told to :attr:`SweepTable.on_pick_trials` (the dashboard
draws those trials bright on the other views); :meth:`SweepTable.show`
selects the trials another view picked.

Examples
--------
>>> from labkit.views.trackers.sweep_tracker import TrialView
>>> table = SweepTable()
>>> table.paint(["lr"], [TrialView(0, {"lr": 0.1}, "running", 2, 0.5, 0.4)], best=0)
>>> table.source.data["p0"], table.source.data["star"], table.rows
([0.1], ['★'], 1)
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable

from bokeh.models import (  # type: ignore[attr-defined]  # bokeh's stubs miss lazy exports
    ColumnDataSource,
    CustomJS,
    DataTable,
    HTMLTemplateFormatter,
    StringFormatter,
    TableColumn,
)

from ..sweep.style import COLOURS
from ..trackers.trial_tasks import worker_of
from .node_panel import named
from .sweep_parallel import select_rows

__all__ = ["SweepTable", "COLUMNS"]

#: The table's fixed columns: (field, title, width).
COLUMNS = (
    ("star", "", 24),
    ("id", "trial", 50),
    ("status", "status", 80),
    ("step", "step", 50),
    ("latest", "latest", 80),
    ("best", "best", 80),
    ("worker", "worker", 110),
    ("attempts", "runs", 40),
    ("moves", "moved", 60),  # its worker left under it (it went on elsewhere): "moved ×n"
)

_STATUS = (
    '<span class="labkit-status" data-status="<%- value %>" style="color:<%= '
    + "{"
    + ",".join(f'"{s}":"{c}"' for s, c in COLOURS.items())
    + '}[value] || "#333" %>"><%- value %></span>'
)
#: Numbers in 4 significant digits, words as they are (escaped), a dash for none.
_VALUE = (
    '<%- (typeof value === "number") ? (isNaN(value) ? "–" : '
    "(Number.isInteger(value) && Math.abs(value) < 1e6 ? String(value) : value.toPrecision(4)))"
    " : value %>"
)

_REDRAW = "for (const view of Bokeh.index.find(table)) view.updateGrid()"


class SweepTable:
    """The table of one sweep's trials; :meth:`paint` it whole, then :meth:`update` changes."""

    def __init__(self, names=None, height: int = 320):
        self.names = names or (lambda worker: worker)
        self.source = named(ColumnDataSource({}), "labkit-sweep-table-source")
        self.table = named(
            DataTable(
                source=self.source,
                columns=[],
                height=height,
                sizing_mode="stretch_width",
                index_position=None,
                sortable=True,
                selectable=True,
                row_height=24,
            ),
            "labkit-sweep-table",
        )
        # A patch leaves the table's length as it was, so Bokeh's table does not redraw on
        # its own: redraw (and sort again) the views of this table when its source is patched
        self.source.js_on_change("patching", CustomJS(args={"table": self.table}, code=_REDRAW))
        self.params: list[str] = []
        self._columned: list[str] | None = None  # the parameters the table's columns are for
        self._row: dict[int, int] = {}  # trial -> its row in the source
        self._sent: list[tuple] = []  # each row's values, as last sent
        self._best: int | None = None
        self.on_pick_trials: Callable[[set[int] | None], None] | None = None
        self._showing = False
        self.source.selected.on_change("indices", self._on_selected)

    def _on_selected(self, _attr, _old, new) -> None:
        """A reader selected rows (none: cleared): their trials told."""
        if self._showing or self.on_pick_trials is None:
            return
        ids = self.source.data.get("id", [])
        self.on_pick_trials({ids[i] for i in new if i < len(ids)} if new else None)

    def show(self, trials: set[int] | None) -> None:
        """Select the rows of ``trials`` (None: none)."""
        self._showing = True  # our own change, not a reader's pick
        try:
            select_rows(self.source, self._row, trials)
        finally:
            self._showing = False

    @property
    def rows(self) -> int:
        """Rows in the table."""
        return len(self._sent)

    @property
    def fields(self) -> list[str]:
        return [f for f, _, _ in COLUMNS] + [f"p{i}" for i in range(len(self.params))]

    def paint(self, params: list[str], trials, best: int | None) -> None:
        """Every trial anew (a new sweep picked, or its parameters changed)."""
        self.params = list(params)
        self._best = best
        rows = [self._values(t) for t in trials]
        self._row = {t.id: i for i, t in enumerate(trials)}
        self._sent = rows
        if self.params != self._columned:
            # new column models make Bokeh walk the whole document again (80 ms at 100
            # trials on a dashboard): only when the parameters changed
            self.table.columns = self._columns()
            self._columned = list(self.params)
        self.source.data = {f: [r[k] for r in rows] for k, f in enumerate(self.fields)}

    def update(self, trials, best: int | None) -> None:
        """Stream the new trials, patch the changed cells (the star moves with the best)."""
        fields = self.fields
        new: list[tuple] = []
        patches: dict[int, list] = {}
        for t in trials:
            row = self._values(t, best)
            at = self._row.get(t.id)
            if at is None:
                self._row[t.id] = len(self._sent) + len(new)
                new.append(row)
                continue
            self._patch(patches, at, row)
        if best != self._best:
            for trial, star in ((self._best, ""), (best, "★")):
                at = self._row.get(trial) if trial is not None else None
                if at is not None and self._sent[at][0] != star:
                    self._patch(patches, at, (star, *self._sent[at][1:]))
            self._best = best
        if patches:
            self.source.patch({fields[k]: cells for k, cells in patches.items()})
        if new:
            self._sent.extend(new)
            self.source.stream({f: [r[k] for r in new] for k, f in enumerate(fields)})

    def _patch(self, patches: dict, at: int, row: tuple) -> None:
        sent = self._sent[at]
        for k, (old, value) in enumerate(zip(sent, row, strict=True)):
            if not _same(old, value):
                patches.setdefault(k, []).append((at, value))
        self._sent[at] = row

    def _values(self, t, best: int | None = None) -> tuple:
        best = self._best if best is None else best
        return (
            "★" if t.id == best else "",
            t.id,
            str(t.status),
            _number(t.step),
            _number(t.value),
            _number(t.best),
            self.names(worker_of(t.worker)) if t.worker else "",
            t.attempts,
            f"moved ×{t.moves}" if t.moves else "",
            *(_cell(t.config.get(p)) for p in self.params),
        )

    def _columns(self) -> list[TableColumn]:
        numbers = HTMLTemplateFormatter(template=_VALUE)
        columns = []
        for field, title, width in COLUMNS:
            formatter = (
                HTMLTemplateFormatter(template=_STATUS)
                if field == "status"
                else StringFormatter()
                if field in ("star", "worker", "moves")
                else numbers
            )
            columns.append(TableColumn(field=field, title=title, width=width, formatter=formatter))
        for i, name in enumerate(self.params):
            # SlickGrid writes a header's title as HTML: a parameter's name is the user's text
            title = html.escape(str(name))
            columns.append(TableColumn(field=f"p{i}", title=title, width=80, formatter=numbers))
        return columns


def _number(value) -> float:
    """A cell's number, 6 significant digits (NaN where there is none)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    value = float(value)
    return float(f"{value:.6g}") if math.isfinite(value) else math.nan


def _cell(value):
    """A parameter's cell: a number (6 significant digits), else its words."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _number(value)
    return "" if value is None else str(value)


def _same(a, b) -> bool:
    """Equal cells (NaN equals NaN: nothing to send)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b
