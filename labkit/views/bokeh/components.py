"""Bokeh models of a tracker, shared by the notebook board and the dashboard.

:class:`Components` builds three panels over one :class:`~labkit.views.trackers.tracker.Tracker`
and keeps them current with :meth:`Components.update`, which sends only what
changed: finished-task spans are *streamed* (with a rollover bound), small
tables are *patched* cell by cell, and replaced only when their set of rows
changed.  One ``Components`` belongs to one Bokeh document; make one per
notebook output or per browser session, all over the same tracker.

Names a browser (or ``Bokeh.documents[0].get_model_by_name``) can look for;
each panel also carries its name as a CSS class on its host element:

``labkit-components``
    the column holding all three panels (:attr:`Components.layout`)
``labkit-device-load``
    figure: one horizontal bar per Dask worker / torch device (busy fraction)
``labkit-device-load-source``
    its ColumnDataSource (one row per device)
``labkit-task-stream``
    figure: one lane per worker, one rect per finished task
``labkit-task-stream-spans``
    the glyph renderer of the spans; ``.data_source`` holds one row per span
``labkit-node-state``
    column: the node table and the per-node plots (:mod:`.node_panel`)
``labkit-node-table``
    a Div whose ``text`` is an HTML table of the nodes, one row (class
    ``labkit-node-row``) per node
``labkit-node-plots``
    column of small figures, ``labkit-node-plot-<run>-<node>``, one per node; a
    figure whose node is no longer shown is kept and used for the next one

Examples
--------
>>> from labkit.events import TaskFinished, TaskInfo
>>> from labkit.views.trackers.tracker import Tracker
>>> tracker = Tracker()
>>> tracker(TaskFinished(TaskInfo("r", 0, 0, "train", 0, "PCA", 0), "tcp://w1", 1.0, 2.0, 10))
>>> c = Components(tracker)
>>> c.update()  # no node plot left for later
False
>>> len(c.task_stream.select_one({"name": "labkit-task-stream-spans"}).data_source.data["start"])
1
"""

from __future__ import annotations

import threading

from bokeh.layouts import column
from bokeh.models import (
    BasicTickFormatter,
    ColumnDataSource,
    DataRange1d,
    FactorRange,
    HoverTool,
    Range1d,
)
from bokeh.models.annotations import LabelSet
from bokeh.plotting import figure

from ..task_colours import FAILED_COLOR, node_color
from ..trackers.tracker import DeviceLoad, Snapshot, TaskSpan, Tracker
from .node_panel import AXES, MAX_SERIES, NodePanel
from .node_panel import named as _named

__all__ = ["Components", "node_color", "FAILED_COLOR", "AXES", "MAX_SERIES"]

WORKER_COLOR, DEVICE_COLOR = "#1f77b4", "#2ca02c"

_DEVICE_COLUMNS = (
    "name",
    "lane",
    "kind",
    "busy",
    "tasks_per_s",
    "samples_per_s",
    "running",
    "done",
    "failed",
    "memory",
    "executing",
    "label",
    "color",
)
_SPAN_COLUMNS = (
    "lane",
    "worker",
    "start",
    "end",
    "what",
    "chunk",
    "seconds",
    "ok",
    "color",
    "alpha",
)


def _lane(worker: str) -> str:
    """A short lane label: the address without its protocol."""
    return worker.split("://", 1)[-1]


def _bytes(n: int | None) -> str:
    """Bytes as a short human string."""
    if n is None:
        return ""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


class Components:
    """The device-load bars, task stream and node state of one tracker.

    Parameters
    ----------
    tracker : Tracker
        What to draw; subscribe it to a scheduler or run yourself.
    sampler : ClusterSampler, optional
        Adds the cluster's own count of executing tasks per worker (see
        :mod:`labkit.views.trackers.cluster_sampler`); without labkit task events for a worker,
        its busy bar shows executing / threads instead.
    max_spans : int
        Rollover bound of the task-stream source (rows kept in the browser).
    max_node_plots : int
        Nodes that get a plot (the most recent ones).
    follow_seconds : float
        Seconds of time the task stream shows, following the newest span.
    task_stream : bool
        Draw the task-stream figure (the notebook board shows its own task lanes
        instead, so that the same tasks are not drawn twice).
    run_filter : callable, optional
        ``run_filter(run_id)``: whether a node of that run is shown (the
        dashboard shows the run picked in its :class:`~labkit.views.bokeh.run_panel.RunPanel`).
    spare_plot : bool
        Make one node plot with the layout, hidden, for the first node: a
        figure costs about 20 ms to make and send, better paid before a run
        than in the middle of one (a dashboard's session, opened beforehand).
    names : callable, optional
        ``names(address)``: what a worker or device is called (see
        :class:`~labkit.views.trackers.device_names.DeviceNames`); its address by default.
    """

    def __init__(
        self,
        tracker: Tracker,
        sampler=None,
        max_spans: int = 5000,
        max_node_plots: int = 6,
        follow_seconds: float = 60.0,
        run_filter=None,
        task_stream: bool = True,
        spare_plot: bool = True,
        names=None,
    ):
        self.tracker = tracker
        self.names = names or _lane  # address -> what a lane and a bar are called
        self.sampler = sampler
        self.run_filter = run_filter
        self.max_spans = max_spans
        self.max_node_plots = max_node_plots
        self._lock = threading.Lock()  # update() may be called from several threads
        self._last_seq = -1
        self._lanes: list[str] = []
        self.device_load = self._make_device_load()
        self.task_stream = self._make_task_stream(follow_seconds) if task_stream else None
        self.nodes = NodePanel(max_node_plots, run_filter, spare_plot)
        self.node_state = self.nodes.layout
        self.node_table, self.node_plots = self.nodes.node_table, self.nodes.node_plots
        panels = [p for p in (self.device_load, self.task_stream, self.node_state) if p]
        self.layout = _named(column(*panels, sizing_mode="stretch_width"), "labkit-components")

    # -- building ----------------------------------------------------------------

    def _make_device_load(self):
        """Horizontal bars, one per device, labelled with rates and memory."""
        self.device_source = ColumnDataSource(
            {c: [] for c in _DEVICE_COLUMNS}, name="labkit-device-load-source"
        )
        fig = figure(
            title="Device load (busy fraction)",
            height=120,
            x_range=Range1d(start=0, end=1),
            y_range=FactorRange(factors=[]),
            tools="",
            toolbar_location=None,
            sizing_mode="stretch_width",
        )
        fig.hbar(
            y="lane", right="busy", height=0.7, source=self.device_source, color="color", alpha=0.8
        )
        fig.add_layout(
            LabelSet(
                x=0,
                y="lane",
                text="label",
                source=self.device_source,
                x_offset=8,
                y_offset=-6,
                text_font_size="9pt",
            )
        )
        fig.add_tools(
            HoverTool(
                tooltips=[
                    ("device", "@name (@kind)"),
                    ("busy", "@busy{0%}"),
                    ("tasks/s", "@tasks_per_s{0.0}"),
                    ("samples/s", "@samples_per_s{0,0}"),
                    ("running", "@running"),
                    ("done", "@done"),
                    ("failed", "@failed"),
                    ("memory", "@memory"),
                    ("executing (cluster)", "@executing"),
                ]
            )
        )
        for axis in fig.xaxis:  # fractions, never 1e-1
            if isinstance(axis.formatter, BasicTickFormatter):
                axis.formatter.use_scientific = False
        return _named(fig, "labkit-device-load")

    def _make_task_stream(self, follow_seconds: float):
        """Lanes per worker; each finished task a bar from start to end."""
        self.span_source = ColumnDataSource({c: [] for c in _SPAN_COLUMNS})
        x_range = DataRange1d(
            follow="end", follow_interval=follow_seconds * 1000, range_padding=0.02
        )
        fig = figure(
            title="Task stream",
            height=160,
            x_axis_type="datetime",
            x_range=x_range,
            y_range=FactorRange(factors=[]),
            tools="xpan,xwheel_zoom,reset",
            sizing_mode="stretch_width",
        )
        spans = fig.hbar(
            y="lane",
            left="start",
            right="end",
            height=0.8,
            source=self.span_source,
            color="color",
            alpha="alpha",
            name="labkit-task-stream-spans",
        )
        fig.add_tools(
            HoverTool(
                renderers=[spans],
                tooltips=[
                    ("task", "@what, chunk @chunk"),
                    ("worker", "@worker"),
                    ("seconds", "@seconds{0.000}"),
                    ("ok", "@ok"),
                ],
            )
        )
        return _named(fig, "labkit-task-stream")

    @property
    def node_rows(self) -> dict[str, list]:
        """The node table's rows, column by column (as last sent)."""
        return self.nodes.node_rows

    # -- updating ----------------------------------------------------------------

    def update(self, snap: Snapshot | None = None, new_plots: int | None = None) -> bool:
        """Pull a snapshot and the new spans; send only what changed.  At most ``new_plots``
        node plots are made (None: all); whether one was left for a later update.

        Thread-safe; in a Bokeh server call it from a document callback.
        """
        with self._lock:
            snap = self.tracker.snapshot() if snap is None else snap
            self._update_devices(snap)
            self._update_spans()
            return self.nodes.update(snap, new_plots)

    def _update_devices(self, snap: Snapshot) -> None:
        """Patch the bars; replace the rows when the set of devices changed."""
        executing = self.sampler.executing() if self.sampler is not None else {}
        rows = [self._device_row(d, executing.get(d.name)) for d in snap.devices]
        names = [r["name"] for r in rows]
        if names != list(self.device_source.data["name"]):
            self.device_load.y_range.factors = [r["lane"] for r in rows]
            self.device_load.height = 60 + 26 * max(len(rows), 1)
            self.device_source.data = {c: [r[c] for r in rows] for c in _DEVICE_COLUMNS}
        else:
            _patch(self.device_source, rows, _DEVICE_COLUMNS)

    def _device_row(self, d: DeviceLoad, cluster: tuple[int, int] | None) -> dict:
        """One bar's values; busy falls back on the cluster's count without labkit tasks."""
        busy = d.busy
        executing = ""
        if cluster is not None:
            # a task the cluster does not count as executing (a sweep's slot, long
            # seceded) still holds its thread while labkit knows it runs
            executing = f"{min(max(cluster[0], d.running), cluster[1] or d.running)}/{cluster[1]}"
            if not (d.done or d.running or d.failed) and cluster[1]:
                busy = min(cluster[0] / cluster[1], 1.0)
        memory = _bytes(d.memory) + (f" / {_bytes(d.memory_limit)}" if d.memory_limit else "")
        rate = (
            f"{d.samples_per_s:,.0f} samples/s"
            if d.kind == "device"
            else f"{d.tasks_per_s:.1f} tasks/s"
        )
        share = f"share {d.share:.0%}" if getattr(d, "share", None) is not None else ""
        label = "  ".join(
            p
            for p in (
                f"{busy:.0%}",
                rate,
                share,
                memory,
                f"{executing} threads busy" if executing else "",
            )
            if p
        )
        return {
            "name": d.name,
            "lane": self.names(d.name),
            "kind": d.kind,
            "busy": round(busy, 3),
            "tasks_per_s": round(d.tasks_per_s, 2),
            "samples_per_s": round(d.samples_per_s, 1),
            "running": d.running,
            "done": d.done,
            "failed": d.failed,
            "memory": memory,
            "executing": executing,
            "label": label,
            "color": DEVICE_COLOR if d.kind == "device" else WORKER_COLOR,
        }

    def _update_spans(self) -> None:
        """Stream the spans finished since the last update (and add new lanes first)."""
        if self.task_stream is None:
            return
        spans = self.tracker.spans_since(self._last_seq)
        if not spans:
            return
        self._last_seq = spans[-1].seq
        spans = spans[-self.max_spans :]
        new_lanes = sorted({self.names(s.worker) for s in spans} - set(self._lanes))
        if new_lanes:
            self._lanes = sorted(self._lanes + new_lanes)
            self.task_stream.y_range.factors = list(self._lanes)
            self.task_stream.height = 80 + 28 * len(self._lanes)
        rows = [self._span_row(s, self.names(s.worker)) for s in spans]
        self.span_source.stream(
            {c: [r[c] for r in rows] for c in _SPAN_COLUMNS}, rollover=self.max_spans
        )

    @staticmethod
    def _span_row(s: TaskSpan, lane: str) -> dict:
        """One bar of the task stream (times in ms, as a datetime axis wants)."""
        color, alpha = node_color(s.node, s.phase, s.ok)
        what = f"{s.node_name} (node {s.node}) phase {s.phase}" if s.node is not None else "task"
        return {
            "lane": lane,
            "worker": s.worker,
            "start": s.start * 1000,
            "end": s.end * 1000,
            "what": what,
            "chunk": s.chunk,
            "seconds": s.end - s.start,
            "ok": s.ok,
            "color": color,
            "alpha": alpha,
        }


def _patch(source: ColumnDataSource, rows: list[dict], columns) -> None:
    """Patch only the cells that changed (same rows, same order)."""
    data = source.data
    patches: dict[str, list] = {}
    for c in columns:
        changed = [(i, r[c]) for i, r in enumerate(rows) if data[c][i] != r[c]]
        if changed:
            patches[c] = changed
    if patches:
        source.patch(patches)
