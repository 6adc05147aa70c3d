"""The live notebook board of a scheduler, a run or a trainer, in each run's own words.

``board(source)`` is a :class:`~labkit.views.live.LiveView` whose ``draw``
builds and updates one ipywidgets ``VBox`` (class ``labkit-board``): a status
line with a Cancel button (runs only), a dashboard link, then the run in its
own words (:mod:`.board_parts`): a fit's epochs and batches, a flow's phases, an
ensemble's layers, your own batches; a scheduler's or a trainer's board lists
its runs as rows (a search over an ensemble folded into one) above the newest
run's detail.  Below: the errors, a pipe's stages, the Bokeh components
(device load, node state) and the task lanes.  The live-view base does the
subscribing, pacing and stopping; this module only draws.

UI libraries are imported here, never by the engine: ipywidgets when a board
is made, and each optional part (the Bokeh components, the task lanes, the
dashboard's link) when it is used, so a board without Bokeh or anywidget
installed still shows the rest.
"""

from __future__ import annotations

import contextlib
import html
import logging

from ...errors import CancelledError
from ...experiments.result import SweepResult
from ...experiments.sweep import finished_run
from ..busy_kernel import serve_while_busy
from ..live import LiveView, State, clock_html
from ..sweep.board import SweepBoard
from ..trackers.device_names import DeviceNames
from ..trackers.subjects import SweepRun, check_source
from ..trackers.trial_tasks import TrialTasks
from ..words import bucket_lines, stage_table
from .board_parts import FitPart, PhaseRows, RunRows

__all__ = ["Board", "board"]

logger = logging.getLogger("labkit.views")


def board(
    source,
    dashboard_url: str | None = None,
    bokeh: bool = True,
    lanes: bool = True,
    reference=None,
) -> Board | SweepBoard:
    """The live board of a Scheduler, a Run or a trainer.

    Which board is declared by the source (:mod:`.subjects`): a sweep's run
    (:class:`~labkit.views.trackers.subjects.SweepRun`, one that carries its sweep) and
    a sweep's result get the sweep's comparison board; anything else that can
    be followed gets a :class:`Board`.

    Parameters
    ----------
    source : Scheduler, Run, DataParallelTrainer or SweepResult
        What to follow; a Run's board shows that run only and stops when it ends.
        A sweep's result (``lk.load_sweep``'s too) shows its trials as they ended.
    dashboard_url : str, optional
        A link to show; by default the URL of a dashboard already serving the scheduler.
    bokeh : bool
        Embed the Bokeh components (when :mod:`labkit.views.bokeh.components` is there).
    lanes : bool
        Show the per-worker task lanes.
    reference : sequence of float, optional
        A several-objective sweep's hypervolume reference point (its Pareto view).
    """
    if isinstance(source, SweepResult):  # a sweep's result (lk.load_sweep's too): its run
        source = finished_run(source)
    check_source(source, "lk.board")
    if isinstance(source, SweepRun):
        return SweepBoard(source, reference=reference)
    return Board(source, dashboard_url=dashboard_url, bokeh=bokeh, lanes=lanes)


class Board(LiveView):
    """The live board; display it (or ``board.widget``) in a notebook.

    Parameters
    ----------
    source : Scheduler, Run or trainer
        What to follow.
    dashboard_url : str, optional
        A link to a dashboard.
    bokeh, lanes : bool
        Show the Bokeh components / the task lanes.
    max_rate : float, optional
        Most redraws per second (:data:`~labkit.views.writer.MAX_RATE`).
    max_phase_rows : int
        Rows shown per list (phases, runs); older finished ones fold into one line.
    """

    thread_name = "labkit-writer-board"

    def __init__(
        self,
        source,
        dashboard_url: str | None = None,
        bokeh: bool = True,
        lanes: bool = True,
        max_rate: float | None = None,
        max_phase_rows: int = 8,
    ):
        check_source(source, "lk.board")
        self._trial_tasks = TrialTasks()  # before subscribing: events may come at once
        self._painted = False  # a first draw made (its node plots may come in the next)
        super().__init__(source, max_rate)
        try:
            import ipywidgets as W  # after subscribing: a first import takes a while

            self._W = W
            self.max_phase_rows = max_phase_rows
            self._with_lanes = lanes  # the lanes draw the tasks: no Bokeh task stream too
            self.components = self._components() if bokeh else None
            self.lanes = self._lanes() if lanes else None
            self.widget = self._build(dashboard_url or self._dashboard_url())
        except BaseException:
            self._stop_listening()
            raise
        self.start()

    def fold(self, event) -> None:
        """Fold ``event``; a sweep's trials also as tasks of their workers (their true load)."""
        self.tracker(event)
        for task_event in self._trial_tasks(event):
            self.tracker(task_event)

    # -- building ------------------------------------------------------------------------

    def _build(self, url: str | None):
        """The widget tree; CSS classes go with each widget's opening message."""
        W = self._W
        self.status = W.HTML(
            "", _dom_classes=["labkit-status"], layout=W.Layout(flex="1 1 0%", min_width="0")
        )
        top = [self.status]
        self.cancel_button = None
        if self.run is not None:
            self.cancel_button = W.Button(
                description="Cancel",
                icon="stop",
                button_style="warning",
                disabled=self.run.done(),
                _dom_classes=["labkit-cancel"],
                tooltip="Cancel the run; the node in training is restored",
                layout=W.Layout(flex="0 0 auto"),
            )
            self.cancel_button.on_click(self._on_cancel)
            # its click is handled even while another cell blocks in run.result()
            self.serves_while_busy = serve_while_busy(self.cancel_button)
            top.append(self.cancel_button)
        self.link = W.HTML(_link(url) if url else "", _dom_classes=["labkit-dashboard-link"])
        self.runs = RunRows(W, self.max_phase_rows) if self.run is None else None
        self.fit: FitPart | None = None
        self._focused: str | None = None  # the run whose phases the detail shows
        self.phases = PhaseRows(W, self.max_phase_rows)
        self.detail = W.VBox([], _dom_classes=["labkit-detail"], layout=W.Layout(width="100%"))
        self.errors = W.HTML("", _dom_classes=["labkit-errors"])
        self.stages = W.HTML("", _dom_classes=["labkit-stages"])
        self.buckets = W.HTML("", _dom_classes=["labkit-buckets"])
        self.header = W.HBox(top, layout=W.Layout(width="100%", align_items="center"))
        parts = (
            [self.header]
            + ([self.link] if url else [])
            + ([self.runs.widget] if self.runs else [])
            + [self.detail, self.buckets, self.errors, self.stages]
        )
        self.bokeh_model = self._bokeh_model()
        parts += [w for w in (self.bokeh_model, self.lanes) if w is not None]
        box = W.VBox(parts, layout=W.Layout(width="100%"))
        box.add_class("labkit-board")
        return box

    def _components(self):
        """The Bokeh components on the tracker, or None when they are not available."""
        try:
            from ..bokeh.components import Components
        except ImportError:
            return None
        # no spare plot: a board is mostly made after its run started, so a spare would
        # cost as much as the first plot made when it is needed
        return Components(
            self.tracker, task_stream=not self._with_lanes, spare_plot=False, names=self._names()
        )

    def _names(self) -> DeviceNames:
        return DeviceNames(self.sources)

    def _bokeh_model(self):
        """The Bokeh layout as a widget (jupyter_bokeh), or None."""
        if self.components is None:
            return None
        from ..bokeh.widget import bokeh_widget

        model = bokeh_widget(self.components.layout)
        if model is not None:
            model.add_class("labkit-bokeh")
            model.on_new_view = self._on_new_bokeh_view
            # its views are counted back while a cell waits on the run; then it sends
            # nothing before its first view is counted (see BatchedBokehModel.hears_views)
            model.hears_views = serve_while_busy(model)
        return model

    def _on_new_bokeh_view(self) -> None:
        """A Bokeh view appeared: the writer sends it the whole state (we do, once stopped)."""
        if self.writer is not None and self.writer.running and self.live:
            self.writer.poke(force=True)
        elif self.bokeh_model is not None:  # the final draw is done or under way
            self.bokeh_model.resync()

    def _lanes(self):
        """The task lanes widget."""
        from .lanes import TaskLanes

        return TaskLanes(self.tracker, names=self._names(), _dom_classes=["labkit-lanes-widget"])

    def _dashboard_url(self) -> str | None:
        """The URL of a dashboard serving the first scheduler, if one runs."""
        try:
            from ..bokeh.dashboard import running_url

            schedulers = [s for s in self.sources if hasattr(s, "add_task")]
            return running_url(schedulers[0]) if schedulers else None
        except (ImportError, AttributeError):
            return None

    def _on_cancel(self, _button=None) -> None:
        """The Cancel button: cancel the run, say so, redraw."""
        button = self.cancel_button
        if button is None:  # a scheduler's board has no Cancel button
            return
        with button.hold_sync():
            if self.run is not None and self.run.cancel():
                button.description = "Cancelled"
            button.disabled = True
        if self.writer is not None:
            self.writer.poke(force=True)

    # -- drawing (the writer thread) -----------------------------------------------------------

    def draw(self, snap) -> None:
        """Redraw everything from one snapshot (the status line last: it carries the clock)."""
        if self.runs is not None:
            self.runs.draw(snap)
        self._draw_detail(snap)
        self._draw_errors(snap)
        if snap.stages:
            self.stages.value = stage_table(snap.stages)
        if any(n.buckets for n in snap.nodes):
            self.buckets.value = bucket_lines(snap.nodes)
        if self.components is not None:
            with _batched(self.bokeh_model):  # one Bokeh patch a draw
                later = self.components.update(snap, new_plots=self._new_plots())
            if getattr(self.bokeh_model, "needs_resync", False):
                self.bokeh_model.resync()
            if later and self.writer is not None:
                self.writer.poke(force=True)  # the plots left out: the next draw, at once
        self._painted = True
        if self.lanes is not None:
            self.lanes.update(self.tracker)
        self._draw_status(snap)

    def _new_plots(self) -> int | None:
        """How many node plots this draw may make: none in the board's first draw, unless
        it is the last.

        A board is mostly shown after its run started, and its page is then making every
        widget's view: a new figure is 0.15 s of the kernel's draw and more of the page's
        (notebook 01's first frame reached the page 2.5 s after its first event).  Its
        words and bars go first; its node plots in the draw right after.
        """
        last = self.writer is None or self.writer.stopping
        return None if self._painted or last else 0

    def _focus(self, snap):
        """The run the detail shows: the board's own, else the newest one."""
        if self.run is not None:
            return next((r for r in snap.runs if r.run == self.run.id), None)
        return snap.runs[-1] if snap.runs else None

    def _draw_detail(self, snap) -> None:
        """The focused run in its words: a fit's bars and epochs, or its phases."""
        run = self._focus(snap)
        if run is not None and run.kind == "fit":
            if self.fit is None:
                self.fit = FitPart(self._W)
            self.fit.draw(run, snap.phases, snap.time)
            children = [self.fit.widget]
        else:
            focus = run.run if run is not None else None
            if focus != self._focused:  # another run: its own rows, its own folded line
                self.phases.clear()
                self._focused = focus
            phases = [p for p in snap.phases if run is None or p.run == run.run]
            self.phases.draw(phases, snap.time)
            children = [self.phases.widget]
        if list(self.detail.children) != children:
            self.detail.children = children

    def _draw_errors(self, snap) -> None:
        """The errors of failed tasks (and of the run), with where they happened."""
        items = []
        for p in snap.phases:
            what = (
                p.node_name
                if p.node is None or p.node < 0
                else f"node {p.node} {p.node_name} phase {p.phase}"
            )
            items += [(what, e) for e in p.errors]
        error = self.run.exception(0) if self.run is not None and self.run.done() else None
        if (
            error is not None
            and not isinstance(error, CancelledError)  # a cancel is no error
            and not any(str(error) == e for _, e in items)
        ):
            items.append(("run", f"{type(error).__name__}: {error}"))
        if not items:
            return
        lines = "".join(
            f"<li><b>{html.escape(w)}</b>: <code style='white-space:normal;"
            f"overflow-wrap:anywhere'>{html.escape(e)}</code></li>"
            for w, e in items
        )
        self.errors.value = (
            f'<div class="labkit-errors-title" style="color:#d62728">'
            f"{len(items)} error(s)</div><ul>{lines}</ul>"
        )

    def _draw_status(self, snap) -> None:
        """The status line: the run and its state, or the source and its runs."""
        if self.run is not None:
            status = self.run.status
            colour = {"finished": "#2ca02c", "failed": "#d62728", "cancelled": "#ff7f0e"}.get(
                status, "inherit"
            )
            name = self.run.detail.get("name") or self.run.kind
            text = (
                f"<b>{html.escape(self.run.kind)} {html.escape(str(name))}</b> "
                f"<span style='color:#888'>{html.escape(self.run.id)}</span> · "
                f'<span class="labkit-run-status" style="color:{colour}">{status}</span>'
            )
            if self.run.done() and self.cancel_button is not None:
                with self.cancel_button.hold_sync():
                    self.cancel_button.disabled = True
                    self.cancel_button.button_style = ""  # nothing left to cancel
        else:
            s = self.source
            running = any(r.finished is None for r in snap.runs)
            state = (
                "shut down"
                if getattr(s, "closed", False)
                or self.state is State.STOPPED
                and getattr(s, "closed", False)
                else "running"
                if running
                else "idle"
            )
            n = len(snap.runs)
            text = (
                f"<b>{html.escape(type(s).__name__)}</b> · {n} run{'s' * (n != 1)} · "
                f'<span class="labkit-run-status">{state}</span>'
            )
        self.status.value = text + clock_html(self.frame)

    def on_stopped(self) -> None:
        """After the last frame: the lanes' recent spans, and a Bokeh view that came late."""
        if self.lanes is not None:
            self.lanes.sync_recent()
        # a view that appeared during this last draw (its poke was too late for the
        # writer) still gets the whole, final document
        if getattr(self.bokeh_model, "needs_resync", False):
            self.bokeh_model.resync()

    # -- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Stop, and close every widget of the board (they vanish from the page)."""
        if self.state is State.CLOSED:
            return
        self.stop()
        self.state = State.CLOSED
        for w in self._all_widgets():
            for part in (getattr(w, "layout", None), getattr(w, "style", None), w):
                if part is not None and hasattr(part, "close"):
                    part.close()

    def _all_widgets(self) -> list:
        extra = [self.cancel_button, self.bokeh_model, self.lanes]
        parts = [
            *(self.runs.widgets() if self.runs else []),
            *self.phases.widgets(),
            *(self.fit.widgets() if self.fit else []),
        ]
        return [
            self.widget,
            self.header,
            self.status,
            self.link,
            self.detail,
            self.errors,
            self.stages,
            self.buckets,
            *parts,
            *(w for w in extra if w is not None),
        ]

    # -- display ------------------------------------------------------------------------------

    def _before_display(self) -> None:
        """Bokeh needs BokehJS in the page before its widget renders."""
        if self.bokeh_model is not None:
            from ..bokeh.widget import load_bokehjs_once

            load_bokehjs_once()

    def _ipython_display_(self) -> None:
        """Display the board's widget."""
        from IPython.display import display

        self._before_display()
        display(self.widget)

    def _repr_mimebundle_(self, **kwargs):
        """The widget's mimebundle (for front-ends that ask for one)."""
        self._before_display()
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self):
        what = f"run {self.run.id}" if self.run else type(self.source).__name__
        return f"<labkit Board of {what}: {'live' if self.live else 'stopped'}>"


def _link(url: str) -> str:
    url = html.escape(url, quote=True)
    return (
        f'<a href="{url}" target="_blank" rel="noopener" style="overflow-wrap:anywhere">'
        f"Dashboard: {url}</a>"
    )


def _batched(model):
    """``model.batch()`` when the Bokeh widget batches its patches, else nothing."""
    batch = getattr(model, "batch", None)
    return batch() if batch is not None else contextlib.nullcontext()
