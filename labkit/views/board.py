"""The live notebook board of a scheduler or a run: ipywidgets, Bokeh and task lanes.

``board(source)`` subscribes a :class:`~labkit.views.tracker.Tracker` to the
source's events and builds one ipywidgets ``VBox`` (class ``labkit-board``):
a status line with a Cancel button (runs only), a dashboard link, one row per
phase (class ``labkit-phase``) with a done bar, a failed bar and a text label,
the errors of failed tasks (class ``labkit-errors``), the Bokeh components
and the task lanes.  One :class:`~labkit.views.writer.Writer` thread redraws
all of it at most :data:`~labkit.views.writer.MAX_RATE` times a second; widgets send only the traits that
changed, Bokeh sources stream and patch, the lanes send only new spans.
The board stops when its run ends, when a scheduler shuts down, or at
:meth:`Board.close`.

UI libraries are imported here, lazily by whoever imports this module; the
engine never imports it.
"""

from __future__ import annotations

import contextlib
import html
import logging
import weakref

from ..errors import CancelledError
from ..events import RunFinished
from ..runs import Run
from .busy_kernel import serve_while_busy
from .labels import bucket_lines, phase_label, stage_table
from .progress import PhaseProgress
from .sources import check_source
from .tracker import Tracker
from .writer import Writer, check_rate, state_every

__all__ = ["Board", "board", "phase_label"]

logger = logging.getLogger("labkit.views")

def board(source, dashboard_url: str | None = None, bokeh: bool = True,
          lanes: bool = True) -> "Board":
    """The live board of a Scheduler or a Run.

    Parameters
    ----------
    source : Scheduler or Run
        What to follow; a Run's board shows that run only and stops when it ends.
    dashboard_url : str, optional
        A link to show; by default the URL of a dashboard already serving the scheduler.
    bokeh : bool
        Embed the Bokeh components (when :mod:`labkit.views.components` is there).
    lanes : bool
        Show the per-worker task lanes.
    """
    check_source(source, "lk.board")
    return Board(source, dashboard_url=dashboard_url, bokeh=bokeh, lanes=lanes)


class _PhaseRow:
    """One phase: a done bar, a failed bar (shown once a task failed) and a label."""

    def __init__(self, W):
        self.done = W.IntProgress(value=0, min=0, max=1, layout=W.Layout(width="40%"))
        self.failed = W.IntProgress(value=0, min=0, max=1, bar_style="danger",
                                    layout=W.Layout(width="10%", visibility="hidden"))
        # hidden but holding its place, so the label does not jump when a task fails
        # Classes given at creation go with the widget's opening message (no update each).
        # one line, cut with an ellipsis where the cell is narrow (no label over two lines)
        self.label = W.HTML("", _dom_classes=["labkit-phase-label"],
                            layout=W.Layout(flex="1 1 0%", overflow="hidden"))
        self.box = W.HBox([self.done, self.failed, self.label], _dom_classes=["labkit-phase"])

    def widgets(self) -> list:
        """Every widget of the row, for closing."""
        return [self.box, self.done, self.failed, self.label]

    def draw(self, p: PhaseProgress, now: float) -> None:
        """Set the bars and the label; unchanged traits send nothing."""
        total = p.total if p.total is not None else max(p.submitted, p.done + p.failed)
        if p.local:
            total, done = 1, int(p.finished is not None and p.ok)
        else:
            done = p.done
        total = max(total, 1)
        with self.done.hold_sync():  # max, value and style in one message
            self.done.max = total
            self.done.value = min(done, total)
            self.done.bar_style = ("" if p.finished is None else "warning" if p.cancelled
                                   else "success" if p.ok and not p.failed else "danger")
        if p.failed:
            with self.failed.hold_sync():
                self.failed.max = total
                self.failed.value = min(p.failed, total)
            self.failed.layout.visibility = "visible"
        text = html.escape(phase_label(p, now))
        if p.cancelled:
            text = f'<span class="labkit-phase-cancelled" style="color:#8c6d1f">{text}</span>'
        elif p.failed or not p.ok:
            text = f'<span class="labkit-phase-failed" style="color:#d62728">{text}</span>'
        plain = html.escape(phase_label(p, now), quote=True)
        self.label.value = (f'<div style="white-space:nowrap;overflow:hidden;'
                            f'text-overflow:ellipsis" title="{plain}">{text}</div>')


class Board:
    """The live board; display it (or ``board.widget``) in a notebook.

    Parameters
    ----------
    source : Scheduler or Run
        What to follow.
    dashboard_url : str, optional
        A link to a dashboard.
    bokeh, lanes : bool
        Show the Bokeh components / the task lanes.
    max_rate : float, optional
        Most redraws per second (:data:`~labkit.views.writer.MAX_RATE`).
    max_phase_rows : int
        Phase rows shown; older finished phases fold into one line that counts them.
    """

    def __init__(self, source, dashboard_url: str | None = None, bokeh: bool = True,
                 lanes: bool = True, max_rate: float | None = None, max_phase_rows: int = 8):
        check_source(source, "lk.board")
        max_rate = check_rate(max_rate)   # before subscribing: a refused board leaves nothing
        self.source = source
        self.run: Run | None = source if isinstance(source, Run) else None
        self.sources = list(self.run.sources) if self.run else [source]
        self.max_phase_rows = max_phase_rows
        self.tracker = Tracker()
        self._rows: dict[tuple, _PhaseRow] = {}
        self._folded: dict[tuple, str] = {}     # phases folded into one line -> how they ended
        self._ending = False     # the run's RunFinished was seen
        self._finished = False   # the final state was drawn
        self._closed = False
        self.writer: Writer | None = None
        # Listen first: a run is already going, each moment spent building loses events.
        self._unsubscribe = source.subscribe(self._on_event, state_every=state_every())
        try:
            import ipywidgets as W  # after subscribing: a first import takes a while
            self._W = W
            self._with_lanes = lanes   # the lanes draw the tasks: no Bokeh task stream too
            self.components = self._components() if bokeh else None
            self.lanes = self._lanes() if lanes else None
            self.widget = self._build(dashboard_url or self._dashboard_url())
        except BaseException:
            self._stop_listening()
            raise
        ref = weakref.ref(self)  # a scheduler outlives boards; don't keep them alive
        for s in self.sources:  # schedulers and trainers stop their boards when they end
            if hasattr(s, "on_shutdown"):
                s.on_shutdown(lambda: (b := ref()) is not None and b._on_shutdown())
        # The heartbeat keeps rates and ETAs current and notices the end of a run.
        self.writer = Writer(self.tracker, self._draw, max_rate,
                             heartbeat=1.0 if self.run else None)
        self.writer.poke(force=True)

    # -- building ------------------------------------------------------------------------

    def _build(self, url: str | None):
        """The widget tree; CSS classes go with each widget's opening message."""
        W = self._W
        self.status = W.HTML("", _dom_classes=["labkit-status"])
        top = [self.status]
        self.cancel_button = None
        if self.run is not None:
            self.cancel_button = W.Button(
                description="Cancel", icon="stop", button_style="warning",
                disabled=self.run.done(), _dom_classes=["labkit-cancel"],
                tooltip="Cancel the run; the node in training is restored")
            self.cancel_button.on_click(self._on_cancel)
            # its click is handled even while another cell blocks in run.result()
            self.serves_while_busy = serve_while_busy(self.cancel_button)
            top.append(self.cancel_button)
        self.link = W.HTML(_link(url) if url else "", _dom_classes=["labkit-dashboard-link"])
        self.phases = W.VBox([], _dom_classes=["labkit-phases"])
        self.folded = W.HTML("", _dom_classes=["labkit-phases-folded"])
        self.errors = W.HTML("", _dom_classes=["labkit-errors"])
        self.stages = W.HTML("", _dom_classes=["labkit-stages"])
        self.buckets = W.HTML("", _dom_classes=["labkit-buckets"])
        self.header = W.HBox(top)
        parts = [self.header] + ([self.link] if url else []) + [self.phases, self.buckets,
                                                                 self.errors, self.stages]
        self.bokeh_model = self._bokeh_model()
        parts += [w for w in (self.bokeh_model, self.lanes) if w is not None]
        box = W.VBox(parts)
        box.add_class("labkit-board")
        return box

    def _components(self):
        """The Bokeh components on the tracker, or None when they are not available."""
        try:
            from .components import Components
        except ImportError:
            return None
        # no spare plot: a board is mostly made after its run started, so a spare would
        # cost as much as the first plot made when it is needed
        return Components(self.tracker, task_stream=not self._with_lanes, spare_plot=False)

    def _bokeh_model(self):
        """The Bokeh layout as a widget (jupyter_bokeh), or None."""
        if self.components is None:
            return None
        from .bokeh_widget import bokeh_widget
        model = bokeh_widget(self.components.layout)
        if model is not None:
            model.add_class("labkit-bokeh")
            model.on_new_view = self._on_new_bokeh_view
        return model

    def _on_new_bokeh_view(self) -> None:
        """A Bokeh view appeared: the writer sends it the whole state (we do, once stopped)."""
        if self.writer is not None and self.writer.running and not self._finished:
            self.writer.poke(force=True)
        elif self.bokeh_model is not None:   # the final draw is done or under way
            self.bokeh_model.resync()

    def _lanes(self):
        """The task lanes widget."""
        from .lanes import TaskLanes
        return TaskLanes(self.tracker, _dom_classes=["labkit-lanes-widget"])

    def _dashboard_url(self) -> str | None:
        """The URL of a dashboard serving the first scheduler, if one runs."""
        try:
            from .dashboard import running_url
            schedulers = [s for s in self.sources if hasattr(s, "add_task")]
            return running_url(schedulers[0]) if schedulers else None
        except (ImportError, AttributeError):
            return None

    # -- events (engine threads) ------------------------------------------------------------

    def _on_event(self, event) -> None:
        """Feed the tracker (this run's events only) and wake the writer."""
        if self.run is not None:
            run_id = getattr(event, "run", None) or getattr(getattr(event, "info", None),
                                                            "run", None)
            if run_id is not None and run_id != self.run.id:
                return
        self.tracker(event)
        ending = isinstance(event, RunFinished) and self.run is not None
        if ending:
            self._ending = True
        writer = self.writer
        if writer is not None:  # events before it exists are drawn by its first draw
            writer.poke(force=ending)

    def _on_shutdown(self) -> None:
        """A scheduler shuts down: a run's board waits for the run's end, others stop."""
        if self.run is not None:
            # The run's own thread may be the one shutting down (a scheduler it owns):
            # joining the writer here could wait on that very run, so only wake it.
            if self.writer is not None:
                self.writer.poke(force=True)
        else:
            self.stop()

    def _on_cancel(self, _button=None) -> None:
        """The Cancel button: cancel the run, say so, redraw."""
        with self.cancel_button.hold_sync():
            if self.run is not None and self.run.cancel():
                self.cancel_button.description = "Cancelled"
            self.cancel_button.disabled = True
        self.writer.poke(force=True)

    # -- drawing (the writer thread) -----------------------------------------------------------

    def _draw(self, snap) -> None:
        """Redraw everything from one snapshot; stops the writer once the run is over."""
        if self._ending and self.run is not None:
            self.run.wait(5.0)  # RunFinished comes just before the run's thread ends
        done = self.run is not None and self.run.done()
        self._draw_phases(snap)
        self._draw_errors(snap)
        self._draw_status(snap)
        if snap.stages:
            self.stages.value = stage_table(snap.stages)
        if any(n.buckets for n in snap.nodes):
            self.buckets.value = bucket_lines(snap.nodes)
        if self.components is not None:
            with _batched(self.bokeh_model):  # one Bokeh patch a draw
                self.components.update()
            if getattr(self.bokeh_model, "needs_resync", False):
                self.bokeh_model.resync()
        if self.lanes is not None:
            self.lanes.update(self.tracker)
        if done and not self._finished:
            self._finish()

    def _draw_phases(self, snap) -> None:
        """One row per phase, the newest :attr:`max_phase_rows`; older finished ones fold
        into one line (an epoch a row would grow without end)."""
        changed = False
        phases = [p for p in snap.phases if (p.run, p.node, p.phase) not in self._folded]
        extra = len(phases) - self.max_phase_rows
        for p in phases:
            key = (p.run, p.node, p.phase)
            if extra > 0 and p.finished is not None:
                self._fold(key, p)
                extra, changed = extra - 1, True
                continue
            if key not in self._rows:
                self._rows[key] = _PhaseRow(self._W)
                changed = True
            self._rows[key].draw(p, snap.time)
        if changed:
            self.phases.children = ([self.folded] if self._folded else []) + \
                [r.box for r in self._rows.values()]

    def _fold(self, key, p) -> None:
        """Close phase ``key``'s row and count it on the folded line."""
        row = self._rows.pop(key, None)
        if row is not None:
            for widget in row.widgets():
                widget.close()
        self._folded[key] = "cancelled" if p.cancelled else "ok" if p.ok and not p.failed \
            else "failed"
        counts = {s: list(self._folded.values()).count(s) for s in ("ok", "failed", "cancelled")}
        words = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        self.folded.value = (f"<i>{len(self._folded)} earlier phase"
                             f"{'s' * (len(self._folded) != 1)} finished ({words})</i>")

    def _draw_errors(self, snap) -> None:
        """The errors of failed tasks (and of the run), with where they happened."""
        items = []
        for p in snap.phases:
            what = p.node_name if p.node is None else f"node {p.node} {p.node_name} phase {p.phase}"
            items += [(what, e) for e in p.errors]
        error = self.run.exception(0) if self.run is not None and self.run.done() else None
        if (error is not None and not isinstance(error, CancelledError)  # a cancel is no error
                and not any(str(error) == e for _, e in items)):
            items.append(("run", f"{type(error).__name__}: {error}"))
        if not items:
            return
        lines = "".join(f"<li><b>{html.escape(w)}</b>: <code>{html.escape(e)}</code></li>"
                        for w, e in items)
        self.errors.value = (f'<div class="labkit-errors-title" style="color:#d62728">'
                             f'{len(items)} error(s)</div><ul>{lines}</ul>')

    def _draw_status(self, snap) -> None:
        """The status line."""
        if self.run is not None:
            status = self.run.status
            colour = {"finished": "#2ca02c", "failed": "#d62728",
                      "cancelled": "#ff7f0e"}.get(status, "inherit")
            text = (f"<b>{html.escape(self.run.kind)} {html.escape(self.run.id)}</b> · "
                    f'<span class="labkit-run-status" style="color:{colour}">{status}</span>')
            if self.run.done() and self.cancel_button is not None:
                with self.cancel_button.hold_sync():
                    self.cancel_button.disabled = True
                    self.cancel_button.button_style = ""   # nothing left to cancel
        else:
            s = self.source
            state = ("shut down" if getattr(s, "closed", False)
                     else "running" if any(p.finished is None for p in snap.phases) else "idle")
            text = (f"<b>{html.escape(type(s).__name__)}</b> · {len(snap.phases)} phase(s) · "
                    f'<span class="labkit-run-status">{state}</span>')
        self.status.value = text

    def _finish(self) -> None:
        """The run is over: stop listening and stop the writer (after this final draw)."""
        self._finished = True
        self._stop_listening()
        if self.lanes is not None:
            self.lanes.sync_recent()
        self.writer.stop()
        # a view that appeared during this last draw (its poke was too late for the
        # writer) still gets the whole, final document
        if getattr(self.bokeh_model, "needs_resync", False):
            self.bokeh_model.resync()

    # -- lifetime ---------------------------------------------------------------------------

    def _stop_listening(self) -> None:
        unsubscribe, self._unsubscribe = self._unsubscribe, None
        if unsubscribe is not None:
            unsubscribe()

    def stop(self) -> None:
        """Stop following events; the board keeps showing its last state."""
        self._stop_listening()
        if self.writer is not None:
            self.writer.stop()

    def close(self) -> None:
        """Stop, and close every widget of the board (they vanish from the page)."""
        if self._closed:
            return
        self._closed = True
        self.stop()
        for w in self._all_widgets():
            for part in (getattr(w, "layout", None), getattr(w, "style", None), w):
                if part is not None and hasattr(part, "close"):
                    part.close()

    def _all_widgets(self) -> list:
        rows = [w for r in self._rows.values() for w in r.widgets()]
        extra = [self.cancel_button, self.bokeh_model, self.lanes]
        return [self.widget, self.header, self.status, self.link, self.phases, self.folded,
                self.errors, self.stages, self.buckets,
                *rows, *(w for w in extra if w is not None)]

    # -- display ------------------------------------------------------------------------------

    def _before_display(self) -> None:
        """Bokeh needs BokehJS in the page before its widget renders."""
        if self.bokeh_model is not None:
            from .bokeh_widget import load_bokehjs_once
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
        live = self.writer is not None and self.writer.running
        return f"<labkit Board of {what}: {'live' if live else 'stopped'}>"


def _link(url: str) -> str:
    url = html.escape(url, quote=True)
    return f'<a href="{url}" target="_blank" rel="noopener">Dashboard: {url}</a>'


def _batched(model):
    """``model.batch()`` when the Bokeh widget batches its patches, else nothing."""
    batch = getattr(model, "batch", None)
    return batch() if batch is not None else contextlib.nullcontext()
