"""The live comparison board of a sweep: table, curves, parallel coordinates and controls.

``SweepBoard(run)`` follows a sweep's run (``lk.sweep(..., wait=False)``) as
a :class:`~labkit.views.live.LiveView`: a :class:`~.sweep_tracker.SweepTracker`
folds the sweep's events, and each draw sets a few ipywidgets from its
snapshot (HTML drawn by :mod:`.sweep_draw`): the status line (counts by
status, the best trial so far), the table (sorted by the "sort by"
dropdown), the curves of the metric against the step, the parallel
coordinates, the workers' load.  The controls act on the live sweep: stop
the selected trial, show its history and error, add N trials, cancel the
sweep.  Once the sweep ends the board keeps its last frame and disables
them.  Its ``widget`` is a ``VBox`` of class ``labkit-sweep-board``.
"""

from __future__ import annotations

import logging
import threading

from ..experiments.live import live_sweep
from . import sweep_draw as draw_html
from .busy_kernel import serve_while_busy
from .live import LiveView, State
from .sweep_tracker import SweepTracker

__all__ = ["SweepBoard", "sweep_board"]

logger = logging.getLogger("labkit.views")


def sweep_board(run) -> SweepBoard:
    """The live comparison board of a sweep's run."""
    return SweepBoard(run)


class SweepBoard(LiveView):
    """The board of one sweep run; display it (or ``board.widget``) in a notebook.

    Parameters
    ----------
    run : Run
        A sweep's run (``lk.sweep(..., wait=False)``).
    max_rate : float, optional
        Most redraws per second.
    """

    thread_name = "labkit-writer-sweep"

    def __init__(self, run, max_rate: float | None = None):
        self.sweep_tracker = SweepTracker(run.id)
        super().__init__(run, max_rate, tracker=self.sweep_tracker)
        try:
            self.live_sweep = live_sweep(run)  # the run's own sweep
            if self.live_sweep is not None:
                self.sweep_tracker.seed(self.live_sweep)  # after subscribing: nothing is lost
            import ipywidgets as W

            self._W = W
            self._draw_lock = threading.Lock()
            self._last = None
            self.widget = self._build()
        except BaseException:
            self._stop_listening()
            raise
        self.start()

    # -- building ----------------------------------------------------------------------------

    def _html(self, cls: str):
        # stretched, not 100% wide: a widget's margins would push it past the board's edge
        return self._W.HTML(
            "", _dom_classes=[cls], layout=self._W.Layout(align_self="stretch", min_width="0")
        )

    def _build(self):
        """The widget tree."""
        W = self._W
        self.status = W.HTML(
            "", _dom_classes=["labkit-sweep-status"], layout=W.Layout(flex="1 1 0%", min_width="0")
        )
        self.cancel_button = self._button(
            "Cancel",
            "labkit-cancel",
            self._on_cancel,
            "warning",
            "Cancel the sweep: every trial stops",
        )
        header = W.HBox(
            [self.status, self.cancel_button], layout=W.Layout(width="100%", align_items="center")
        )
        self.sort_by = W.Dropdown(
            options=self._sort_options(),
            value="rank",
            description="sort by",
            _dom_classes=["labkit-sweep-sort"],
            layout=W.Layout(width="220px"),
        )
        self.descending = W.Checkbox(
            value=False,
            description="reverse",
            indent=False,
            _dom_classes=["labkit-sweep-reverse"],
            layout=W.Layout(width="90px"),
        )
        for control in (self.sort_by, self.descending):
            control.observe(self._on_sort, names="value")
        self.table = self._html("labkit-sweep-table")
        self.curves = self._html("labkit-sweep-curves-widget")
        self.parallel = self._html("labkit-sweep-parallel-widget")
        self.workers = self._html("labkit-sweep-workers-widget")
        self.detail = self._html("labkit-sweep-detail")
        box = W.VBox(
            [
                header,
                self._sort_row(),
                self.table,
                self._title("curves"),
                self.curves,
                self._title("parallel coordinates"),
                self.parallel,
                self._title("workers"),
                self.workers,
                self._controls(),
                self.detail,
            ],
            layout=W.Layout(width="100%"),
        )
        box.add_class("labkit-sweep-board")
        box.add_class("labkit-board")
        return box

    def _sort_row(self):
        W = self._W
        return W.HBox(
            [self.sort_by, self.descending],
            layout=W.Layout(width="100%", flex_flow="row wrap", align_items="center"),
        )

    def _title(self, text: str):
        return self._W.HTML(f"<b>{text}</b>")

    def _button(self, text: str, cls: str, on_click, style: str = "", tooltip: str = ""):
        button = self._W.Button(
            description=text,
            button_style=style,
            tooltip=tooltip,
            disabled=self.run.done(),
            _dom_classes=[cls],
            layout=self._W.Layout(width="auto", flex="0 0 auto"),
        )
        button.on_click(on_click)
        serve_while_busy(button)  # clicked while another cell waits on the sweep
        return button

    def _controls(self):
        """Trial selector, stop, show; add N trials."""
        W = self._W
        self.trial = W.Dropdown(
            options=[],
            description="trial",
            _dom_classes=["labkit-sweep-trial"],
            layout=W.Layout(width="200px"),
        )
        self.stop_button = self._button(
            "Stop trial",
            "labkit-sweep-stop",
            self._on_stop,
            "danger",
            "Stop the selected trial (its next report ends it)",
        )
        self.show_button = self._button(
            "Show history",
            "labkit-sweep-show",
            self._on_show,
            "",
            "Show the selected trial's reports and error",
        )
        self.show_button.disabled = False  # a history is there to read after the end too
        self.add_n = W.BoundedIntText(
            value=4,
            min=1,
            max=10000,
            description="add",
            _dom_classes=["labkit-sweep-add-n"],
            layout=W.Layout(width="130px"),
        )
        self.add_button = self._button(
            "Add trials",
            "labkit-sweep-add",
            self._on_add,
            "",
            "Add this many trials to the running sweep",
        )
        self.message = W.HTML(
            "", _dom_classes=["labkit-sweep-message"], layout=W.Layout(flex="1 1 0%", min_width="0")
        )
        for widget in (self.trial, self.add_n, self.sort_by, self.descending):
            serve_while_busy(widget)  # heard while another cell waits on the sweep
        row = [
            self.trial,
            self.stop_button,
            self.show_button,
            self.add_n,
            self.add_button,
            self.message,
        ]
        return W.HBox(
            row, layout=W.Layout(width="100%", flex_flow="row wrap", align_items="center")
        )

    def _sort_options(self, snap=None) -> list:
        params = draw_html.params(snap) if snap is not None else []
        return [
            ("best first", "rank"),
            ("trial", "trial"),
            ("status", "status"),
            ("step", "step"),
            ("latest", "latest"),
            ("best", "best"),
            *((p, p) for p in params),
        ]

    # -- controls (the kernel's thread) ---------------------------------------------------------

    def _say(self, text: str) -> None:
        self.message.value = f'<span style="overflow-wrap:anywhere">{text}</span>'

    def _on_cancel(self, _button=None) -> None:
        """Cancel the whole sweep."""
        if self.run.cancel():
            self._say("cancelling the sweep")
        self.cancel_button.disabled = True
        self._poke()

    def _on_stop(self, _button=None) -> None:
        """Stop the selected trial."""
        trial = self.trial.value
        if trial is None or self.live_sweep is None:
            return
        stopped = self.live_sweep.stop(trial)
        self._say(f"trial {trial}: stop requested" if stopped else f"trial {trial} had ended")
        self._poke()

    def _on_show(self, _button=None) -> None:
        """Show the selected trial's reports, and its error or why it stopped."""
        trial = self.trial.value
        snap = self.sweep_tracker.snapshot()
        view = next((t for t in snap.trials if t.id == trial), None)
        self.detail.value = (
            draw_html.history(view, self.sweep_tracker.history(trial)) if view is not None else ""
        )

    def _on_add(self, _button=None) -> None:
        """Add ``add_n`` trials to the running sweep."""
        if self.live_sweep is None or self.run.done():
            return
        try:
            ids = self.live_sweep.add(int(self.add_n.value))
        except Exception as exc:  # a list of configurations has no more, say
            self._say(f"could not add trials: {exc}")
            return
        self._say(f"added trials {ids[0]}–{ids[-1]}" if len(ids) > 1 else f"added trial {ids[0]}")
        self._poke()

    def _on_sort(self, _change=None) -> None:
        """Sort the table again, at once."""
        with self._draw_lock:
            if self._last is not None:
                self._draw_table(self._last)

    def _poke(self) -> None:
        if self.writer is not None and self.writer.running:
            self.writer.poke(force=True)

    # -- drawing (the writer thread) ---------------------------------------------------------

    def draw(self, snap) -> None:
        """Redraw everything from one snapshot."""
        with self._draw_lock:
            self._last = snap
            title = f"sweep {snap.name or self.run.detail.get('name') or ''}".strip()
            self.status.value = draw_html.status_line(
                snap, title, self.run.status if self.run.done() else "running"
            )
            self._draw_table(snap)
            self.curves.value = draw_html.curves(snap)
            self.parallel.value = draw_html.parallel(snap)
            self.workers.value = draw_html.workers(snap)
            self._draw_controls(snap)

    def _draw_table(self, snap) -> None:
        options = self._sort_options(snap)
        if [v for _, v in options] != [v for _, v in self.sort_by.options]:
            with self.sort_by.hold_sync():
                value = self.sort_by.value
                self.sort_by.options = options
                self.sort_by.value = value if value in dict(options).values() else "rank"
        self.table.value = draw_html.table(snap, self.sort_by.value, self.descending.value)

    def _draw_controls(self, snap) -> None:
        options = [(f"trial {t.id}", t.id) for t in snap.trials]  # stable while statuses change
        if options != list(self.trial.options):
            with self.trial.hold_sync():
                value = self.trial.value
                running = [t.id for t in snap.trials if t.status == "running"]
                self.trial.options = options
                self.trial.value = (
                    value
                    if value is not None
                    else (running[0] if running else (options[0][1] if options else None))
                )
        done = self.run.done() or self.state is not State.LIVE
        for button in (self.cancel_button, self.stop_button, self.add_button):
            if button.disabled != done:
                button.disabled = done

    def on_stopped(self) -> None:
        """After the last frame: every control that acts on the sweep is disabled."""
        for button in (self.cancel_button, self.stop_button, self.add_button):
            button.disabled = True
        self.add_n.disabled = True

    # -- lifetime and display --------------------------------------------------------------------

    def close(self) -> None:
        """Stop, and close every widget of the board."""
        if self.state is State.CLOSED:
            return
        self.stop()
        self.state = State.CLOSED
        for widget in _tree(self.widget):
            for part in (getattr(widget, "layout", None), getattr(widget, "style", None), widget):
                if part is not None and hasattr(part, "close"):
                    part.close()

    def _ipython_display_(self) -> None:
        """Display the board's widget."""
        from IPython.display import display

        display(self.widget)

    def _repr_mimebundle_(self, **kwargs):
        """The widget's mimebundle."""
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self):
        return f"<labkit SweepBoard of run {self.run.id}: {'live' if self.live else 'stopped'}>"


def _tree(widget) -> list:
    """``widget`` and every widget under it."""
    out = [widget]
    for child in getattr(widget, "children", ()):
        out += _tree(child)
    return out
