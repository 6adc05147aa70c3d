"""The dashboard's run header: pick a run, see its progress per phase.

A dashboard follows a scheduler, and a scheduler serves many runs (two
notebooks' worth, one run after another).  :class:`RunPanel` puts a run
selector on top (``latest``, the default, follows the newest run) and, under
it, the chosen run's kind, status and one progress bar per phase with the
board's words (:func:`~labkit.views.words.phase_label`).  The node panels
below show only that run (:meth:`RunPanel.run_filter`).

Names for browsers and tests: ``labkit-run-select`` (the Select),
``labkit-run-progress`` (the Div of bars).

Examples
--------
>>> from labkit.events import PhaseStarted, RunStarted
>>> from labkit.views.trackers.tracker import Tracker
>>> tracker = Tracker()
>>> tracker(RunStarted("train-1", "train", 1)); tracker(PhaseStarted("train-1", 0, "PCA", 0, False, 4))
>>> panel = RunPanel()
>>> panel.update(tracker.snapshot())
>>> panel.select.options, "node 0 PCA phase 0" in panel.progress.text
(['latest', 'train-1'], True)
"""

from __future__ import annotations

import html

from bokeh.layouts import column
from bokeh.models.widgets import Div, Select

from ..trackers.progress import PhaseProgress
from ..trackers.tracker import Snapshot
from ..words import phase_label, run_line, seconds

__all__ = ["RunPanel", "LATEST"]

LATEST = "latest"

_BAR = (
    "<div class='labkit-phase-row' style='margin:2px 0'>"
    "<progress value='{done}' max='{total}' style='width:220px;vertical-align:middle;"
    "accent-color:{color}'></progress> <span style='color:{text_color}'>{label}</span>"
    "</div>"
)


class RunPanel:
    """A run selector and the selected run's progress bars, as Bokeh models."""

    def __init__(self, max_phases: int = 12):
        self.max_phases = max_phases
        self._options: list[str | None] = [LATEST]  # what the selector offers
        self.select = Select(
            title="run",
            value=LATEST,
            options=self._options,
            width=260,
            name="labkit-run-select",
            css_classes=["labkit-run-select"],
        )
        self.progress = Div(
            text="<i>no run yet</i>",
            name="labkit-run-progress",
            css_classes=["labkit-run-progress"],
            sizing_mode="stretch_width",
        )
        self.layout = column(
            self.select,
            self.progress,
            sizing_mode="stretch_width",
            name="labkit-run-panel",
            css_classes=["labkit-run-panel"],
        )
        self._runs: list[str] = []
        self._started: dict[str, float] = {}

    @property
    def run(self) -> str | None:
        """The run shown: the one selected, or the newest one."""
        if self.select.value != LATEST and self.select.value in self._runs:
            return self.select.value
        return self._runs[-1] if self._runs else None

    def run_filter(self, run: str) -> bool:
        """Whether something of ``run`` belongs on the page now."""
        return self.run is None or run == self.run

    def update(self, snap: Snapshot) -> None:
        """New runs into the selector; the shown run's bars (sent only when changed)."""
        # every run, those without phases too (a sweep, a fit between epochs), in the order
        # they started (a view told late of a run hears of it after newer ones)
        started = {r.run: r.started for r in getattr(snap, "runs", ())}
        for run in [*started, *(p.run for p in snap.phases)]:
            if run not in self._runs:
                self._runs.append(run)
                self._started[run] = started.get(run, snap.time)
                self._runs.sort(key=lambda r: self._started[r])
        options: list[str | None] = [LATEST, *reversed(self._runs)]
        if options != self._options:
            self._options = options
            self.select.options = options
        phases = [p for p in snap.phases if p.run == self.run]
        run = next((r for r in getattr(snap, "runs", ()) if r.run == self.run), None)
        if run is not None and run.kind == "sweep":
            text = self._sweep_text(run, phases, snap.time)
        elif phases or run is None:
            text = self._text(phases, snap.time)
        else:
            text = self._run_text(run, snap.time)
        if text != self.progress.text:
            self.progress.text = text

    def _text(self, phases: list[PhaseProgress], now: float) -> str:
        """The run's header and a bar per phase (the newest ``max_phases``)."""
        if not phases:
            return "<i>no run yet</i>"
        first = phases[0]
        ended = all(p.finished is not None for p in phases)
        state = (
            "cancelled"
            if any(p.cancelled for p in phases)
            else "failed"
            if any(not p.ok for p in phases)
            else "finished"
            if ended
            else "running"
        )
        head = (
            f"<b>{html.escape(first.kind)} {html.escape(first.run)}</b> · {state} · "
            f"{len(phases)} phase{'s' * (len(phases) != 1)}"
        )
        hidden = len(phases) - self.max_phases
        rows = [self._bar(p, now) for p in phases[-self.max_phases :]]
        if hidden > 0:
            rows.insert(
                0, f"<div><i>{hidden} earlier phase{'s' * (hidden != 1)} not shown</i></div>"
            )
        return f"<div>{head}</div>" + "".join(rows)

    @staticmethod
    def _run_text(run, now: float) -> str:
        """A run without phases (a sweep): its line in its own words."""
        return (
            f"<div><b>{html.escape(run.kind)} {html.escape(run.run)}</b> · "
            f"{html.escape(run.status)}</div><div>{html.escape(run_line(run, [], now))}</div>"
        )

    @staticmethod
    def _sweep_text(run, phases: list[PhaseProgress], now: float) -> str:
        """A sweep: its trials (counted as its workers' tasks) done and running, and their pace."""
        done = sum(p.done + p.failed for p in phases)
        running = sum(p.running for p in phases)
        elapsed = (run.finished or now) - run.started
        rate = done / elapsed if elapsed > 0 else 0.0
        words = [f"{done} trial{'s' * (done != 1)} done", f"{running} running"]
        if run.finished is None:
            words.append(f"{rate:.1f} trials/s")
        words.append(seconds(elapsed))
        name = f"{run.name} — " if run.name != run.kind else ""
        return (
            f"<div><b>sweep {html.escape(run.run)}</b> · {html.escape(run.status)}</div>"
            f"<div class='labkit-run-sweep'>{html.escape(name + ' · '.join(words))}</div>"
        )

    @staticmethod
    def _bar(p: PhaseProgress, now: float) -> str:
        """One phase: a progress bar and its label, red when failed, amber when cancelled."""
        total = p.total if p.total else max(p.done + p.failed, 1)
        done = total if p.local and p.finished is not None and p.ok else min(p.done, total)
        color = (
            "#8c6d1f"
            if p.cancelled
            else "#d62728"
            if (p.failed or not p.ok)
            else "#2ca02c"
            if p.finished is not None
            else "#1f77b4"
        )
        return _BAR.format(
            done=done,
            total=total,
            color=color,
            text_color="#333" if color in ("#2ca02c", "#1f77b4") else color,
            label=html.escape(phase_label(p, now)),
        )
