"""The parts a board is made of, one per kind of thing to show: ipywidgets that only draw.

* :class:`PhaseRows` — a flow's phases (node by node), an ensemble's layers,
  an evaluation, your own batches: a bar and a label each, older finished
  rows folded into one line;
* :class:`FitPart` — a trainer's fit: an outer bar for the whole fit
  (``epoch 3/6``, elapsed, ETA), an inner bar for the epoch's batches
  (samples/s, loss) and the finished epochs' records as ``fit`` returns them;
* :class:`RunRows` — a scheduler's runs, one row each in its own words; a
  search over an ensemble is one row whose candidates fold into a small table.

Each part has a ``widget`` and ``draw(...)`` called with plain snapshots by
the board's writer thread; unchanged traits send nothing.  Labels wrap
rather than being cut: every word shows at a 700-px output width.
"""

from __future__ import annotations

import html
from typing import Any

from ..trackers.progress import PhaseProgress, RunProgress
from ..words import (
    epoch_table,
    fit_inner,
    fit_outer,
    fit_progress,
    phase_label,
    run_line,
    search_groups,
    search_line,
    search_table,
)

__all__ = ["PhaseRows", "FitPart", "RunRows", "LABEL_CSS"]

#: How a label sits beside its bar: it takes the rest of the row and wraps.
LABEL_CSS = "white-space:normal;overflow-wrap:anywhere;line-height:1.3"

_COLOURS = {
    "running": "inherit",
    "finished": "#2ca02c",
    "failed": "#d62728",
    "cancelled": "#8c6d1f",
}


def _bar(W, danger: bool = False, width: str = "30%"):
    style = "danger" if danger else ""
    return W.IntProgress(
        value=0,
        min=0,
        max=1,
        bar_style=style,
        layout=W.Layout(width=width, min_width="60px", flex="0 0 auto"),
    )


def _label(W, classes: list[str]):
    # flex 1 1 0 with min width 0: the label takes the rest of the row and wraps in it
    return W.HTML("", _dom_classes=classes, layout=W.Layout(flex="1 1 0%", min_width="0"))


def _text(text: str, status: str | None = None, cls: str = "") -> str:
    colour = _COLOURS.get(status or "running", "inherit")
    safe = html.escape(text)
    return (
        f'<div class="{cls}" style="{LABEL_CSS};color:{colour}" '
        f'title="{html.escape(text, quote=True)}">{safe}</div>'
    )


def _style(p: PhaseProgress) -> str:
    if p.finished is None:
        return ""
    return "warning" if p.cancelled else "success" if p.ok and not p.failed else "danger"


class _Row:
    """A bar (and a failed bar, once a task failed) beside a wrapping label."""

    def __init__(self, W, classes=("labkit-phase",), label_classes=("labkit-phase-label",)):
        self.done = _bar(W)
        self.failed = _bar(W, danger=True, width="8%")
        self.failed.layout.display = "none"
        self.label = _label(W, list(label_classes))
        self.box = W.HBox(
            [self.done, self.failed, self.label],
            _dom_classes=list(classes),
            layout=W.Layout(width="100%", align_items="center"),
        )

    def widgets(self) -> list:
        return [self.box, self.done, self.failed, self.label]

    def set(self, value: int, total: int, style: str, text: str, failed: int = 0) -> None:
        total = max(total, 1)
        with self.done.hold_sync():  # max, value and style in one message
            self.done.max = total
            self.done.value = min(value, total)
            self.done.bar_style = style
        if failed:
            with self.failed.hold_sync():
                self.failed.max = total
                self.failed.value = min(failed, total)
            self.failed.layout.display = ""
        self.label.value = text

    def close(self) -> None:
        for widget in self.widgets():
            widget.close()


class PhaseRows:
    """One row per phase, the newest ``max_rows``; older finished ones fold into one line."""

    def __init__(self, W, max_rows: int = 8):
        self.W, self.max_rows = W, max_rows
        self.rows: dict[tuple, _Row] = {}
        self.folded_keys: dict[tuple, str] = {}
        self.folded = W.HTML("", _dom_classes=["labkit-phases-folded"])
        self.widget = W.VBox([], _dom_classes=["labkit-phases"], layout=W.Layout(width="100%"))

    def draw(self, phases, now: float) -> None:
        """Show ``phases`` (the rows of any other phase go, folded ones stay counted)."""
        keys = {(p.run, p.node, p.phase) for p in phases}
        gone = [k for k in self.rows if k not in keys]
        for key in gone:
            self.rows.pop(key).close()
        changed = bool(gone)
        phases = [p for p in phases if (p.run, p.node, p.phase) not in self.folded_keys]
        extra = len(phases) - self.max_rows
        for p in phases:
            key = (p.run, p.node, p.phase)
            if extra > 0 and p.finished is not None:
                self._fold(key, p)
                extra, changed = extra - 1, True
                continue
            if key not in self.rows:
                self.rows[key] = _Row(self.W)
                changed = True
            self._draw_row(self.rows[key], p, now)
        if changed:
            self.widget.children = ([self.folded] if self.folded_keys else []) + [
                r.box for r in self.rows.values()
            ]

    @staticmethod
    def _draw_row(row: _Row, p: PhaseProgress, now: float) -> None:
        total = p.total if p.total is not None else max(p.submitted, p.done + p.failed)
        done = p.done
        if p.local:
            total, done = 1, int(p.finished is not None and p.ok)
        status = (
            None
            if p.finished is None
            else "cancelled"
            if p.cancelled
            else "finished"
            if p.ok and not p.failed
            else "failed"
        )
        row.set(done, total, _style(p), _text(phase_label(p, now), status), p.failed)

    def _fold(self, key, p) -> None:
        row = self.rows.pop(key, None)
        if row is not None:
            row.close()
        self.folded_keys[key] = (
            "cancelled" if p.cancelled else "finished" if p.ok and not p.failed else "failed"
        )
        counts = {
            s: list(self.folded_keys.values()).count(s) for s in ("finished", "failed", "cancelled")
        }
        words = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        n = len(self.folded_keys)
        self.folded.value = f"<i>{n} earlier row{'s' * (n != 1)} ({words})</i>"

    def clear(self) -> None:
        """Forget every row and the folded line (the board now shows another run)."""
        for row in self.rows.values():
            row.close()
        self.rows.clear()
        self.folded_keys.clear()
        self.folded.value = ""
        self.widget.children = []

    def widgets(self) -> list:
        return [self.widget, self.folded, *(w for r in self.rows.values() for w in r.widgets())]


class FitPart:
    """A fit: the whole fit's bar, the epoch's bar, and the finished epochs' records."""

    def __init__(self, W):
        self.outer = _Row(
            W,
            ("labkit-fit-outer", "labkit-phase"),
            ("labkit-phase-label", "labkit-fit-outer-label"),
        )
        self.inner = _Row(
            W,
            ("labkit-fit-inner", "labkit-phase"),
            ("labkit-phase-label", "labkit-fit-inner-label"),
        )
        self.epochs = W.HTML("", _dom_classes=["labkit-epochs"])
        self.widget = W.VBox(
            [self.outer.box, self.inner.box, self.epochs],
            _dom_classes=["labkit-fit"],
            layout=W.Layout(width="100%"),
        )

    def draw(self, run: RunProgress, phases, now: float) -> None:
        f = fit_progress(run, phases, now)
        # the records first: a page that reads "finished" on the bar holds every epoch's row
        # (each widget's change is its own message, applied in the order sent)
        self.epochs.value = epoch_table(f.records)
        status = run.status
        outer_style = (
            ""
            if status == "running"
            else "success"
            if status == "finished"
            else "warning"
            if status == "cancelled"
            else "danger"
        )
        self.outer.set(
            f.done,
            f.epochs or max(f.done, 1),
            outer_style,
            _text(fit_outer(f), status, "labkit-fit-outer-label"),
        )
        current_done = f.batch if f.batches else 0
        inner_style = "success" if f.batches and f.batch >= f.batches else ""
        self.inner.set(
            current_done,
            f.batches or 1,
            inner_style,
            _text(fit_inner(f), None, "labkit-fit-inner-label"),
        )

    def widgets(self) -> list:
        return [self.widget, self.epochs, *self.outer.widgets(), *self.inner.widgets()]


class RunRows:
    """A scheduler's runs as rows, newest last; a search's fits fold into one row and a table."""

    def __init__(self, W, max_rows: int = 8):
        self.W, self.max_rows = W, max_rows
        self.rows: dict[str, tuple[_Row, Any]] = {}
        self.folded = W.HTML("", _dom_classes=["labkit-runs-folded"])
        self.widget = W.VBox([], _dom_classes=["labkit-runs"], layout=W.Layout(width="100%"))

    def draw(self, snapshot) -> None:
        now, phases = snapshot.time, list(snapshot.phases)
        groups = search_groups(list(snapshot.runs))
        if len(groups) < 2 and not self.rows:
            return  # one run: the detail under these rows says it all
        shown = groups[-self.max_rows :]
        hidden = len(groups) - len(shown)
        keys, before = [], list(self.rows)
        for group in shown:
            key = group[0].run
            keys.append(key)
            row, table = self.rows.get(key) or self._new(key)
            self._draw(row, table, group, phases, now)
        if keys != before:  # rows came or went: lay them out again
            for key in [k for k in self.rows if k not in keys]:
                row, table = self.rows.pop(key)
                row.close()
                table.close()
            self.rows = {k: self.rows[k] for k in keys}
            self.folded.value = (
                f"<i>{hidden} earlier run{'s' * (hidden != 1)}</i>" if hidden else ""
            )
            self.widget.children = ([self.folded] if hidden else []) + [
                w for row, table in self.rows.values() for w in (row.box, table)
            ]

    def _new(self, key: str):
        row = _Row(
            self.W, ("labkit-run-row", "labkit-phase"), ("labkit-phase-label", "labkit-run-label")
        )
        table = self.W.HTML("", _dom_classes=["labkit-search-table"])
        self.rows[key] = (row, table)
        return row, table

    @staticmethod
    def _draw(row, table, group: list[RunProgress], phases, now: float) -> None:
        if len(group) > 1:  # a search: one row, its candidates in a table under it
            done = sum(1 for r in group if r.finished is not None)
            status = (
                "running"
                if any(r.finished is None for r in group)
                else "failed"
                if any(r.status == "failed" for r in group)
                else "finished"
            )
            row.set(
                done,
                len(group),
                "" if status == "running" else "success" if status == "finished" else "danger",
                _text(search_line(group, now), status, "labkit-run-label"),
            )
            table.value = search_table(group, now)
            return
        run = group[0]
        mine = [p for p in phases if p.run == run.run]
        total = sum(p.total or p.submitted for p in mine) or 1
        done = sum(p.done for p in mine)
        if run.kind == "fit":
            f = fit_progress(run, phases, now)
            done, total = round(1000 * (f.fraction or 0)), 1000
        style = (
            ""
            if run.finished is None
            else {"finished": "success", "cancelled": "warning"}.get(run.status, "danger")
        )
        if run.finished is not None and run.ok:
            done = total
        row.set(
            done, total, style, _text(run_line(run, phases, now), run.status, "labkit-run-label")
        )

    def widgets(self) -> list:
        return [
            self.widget,
            self.folded,
            *(w for row, table in self.rows.values() for w in (*row.widgets(), table)),
        ]
