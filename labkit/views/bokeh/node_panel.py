"""The node-state panel of the Bokeh components: a table of nodes and a small plot per node.

:class:`NodePanel` is the third panel of
:class:`~labkit.views.bokeh.components.Components` (``labkit-node-state``): an
HTML table, one ``labkit-node-row`` a node, and a column of small figures,
``labkit-node-plot-<run>-<node>``, one per node with arrays to plot (the
latest :data:`MAX_SERIES` of its state's ``plots``).  A figure whose node is
no longer shown is kept and used for the next one; a figure costs about
10-20 ms to make and send.  :func:`named` gives a Bokeh model its name and
the same CSS class, for every Bokeh panel of the views.

Examples
--------
>>> from labkit.events import NodeJoined
>>> from labkit.views.trackers.tracker import Tracker
>>> tracker = Tracker()
>>> tracker(NodeJoined("r", 0, "PCA", 0, 1, {"samples": 5, "plots": {"eigenvalues": [3, 2]}}))
>>> panel = NodePanel(spare_plot=False)
>>> panel.update(tracker.snapshot())  # no plot left for a later update
False
>>> panel.layout.visible, panel.node_rows["name"], len(panel.node_plots.children)
(True, ['PCA'], 1)
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from bokeh.layouts import column
from bokeh.models import ColumnDataSource, HoverTool
from bokeh.models.annotations import Title
from bokeh.models.renderers import DataRenderer
from bokeh.models.widgets import Div
from bokeh.plotting import figure

from ..task_colours import node_color
from ..trackers.tracker import NodeView, Snapshot

__all__ = ["NodePanel", "named", "AXES", "MAX_SERIES"]

#: Lines a node's plot draws (its state's first plot arrays), with a legend when more than one.
MAX_SERIES = 3
SERIES_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c")

#: The axes of the arrays nodes plot, by name: ``(x label, y label)``.
AXES = {
    "eigenvalues": ("component", "eigenvalue"),
    "loss": ("step", "loss"),
    "epoch loss": ("step", "loss"),
    "inertia": ("iteration", "inertia"),
    "errors": ("sample", "error"),
    "ratios": ("component", "ratio"),
    "slowness": ("component", "slowness"),
    "eta": ("component", "eta"),
    "class_counts": ("class", "samples"),
    "coefficient_norm": ("output", "norm"),
}

_NODE_COLUMNS = ("key", "run", "node", "name", "phase", "training", "samples", "joins")


def named(model: Any, name: str) -> Any:
    """Give a model its name and the same CSS class (for DOM tests and styling)."""
    model.name = name
    if hasattr(model, "css_classes"):
        model.css_classes = [name]
    return model


class NodePanel:
    """The node table and the node plots, as one Bokeh column (:attr:`layout`).

    Parameters
    ----------
    max_node_plots : int
        Nodes that get a plot (the most recent ones).
    run_filter : callable, optional
        ``run_filter(run_id)``: whether a node of that run is shown.
    spare_plot : bool
        Make one node plot now, hidden, for the first node (see
        :class:`~labkit.views.bokeh.components.Components`).
    """

    def __init__(
        self,
        max_node_plots: int = 6,
        run_filter: Callable[[str], bool] | None = None,
        spare_plot: bool = True,
    ):
        self.max_node_plots = max_node_plots
        self.run_filter = run_filter
        self._node_plots: dict[tuple, Any] = {}
        self.layout = self._make(spare_plot)

    def _make(self, spare_plot: bool):
        """A table of nodes (HTML: one property to send a change) and small per-node plots."""
        self.node_rows: dict[str, list] = {c: [] for c in _NODE_COLUMNS}
        self.node_table = named(
            Div(text=_node_table(self.node_rows), sizing_mode="stretch_width"), "labkit-node-table"
        )
        # a placeholder child: Bokeh warns about an empty layout
        self._no_plots = Div(text="<i>node plots appear as forks are joined</i>")
        # One plot made now and sent with the document, hidden: the first node's plot
        # then costs a property change, not a new figure in the middle of a run.
        self._spare_plots = [self._make_node_plot()] if spare_plot else []
        for fig, _ in self._spare_plots:
            fig.visible = False
        self.node_plots = named(
            column(self._no_plots, *[f for f, _ in self._spare_plots], sizing_mode="stretch_width"),
            "labkit-node-plots",
        )
        return named(
            column(self.node_table, self.node_plots, sizing_mode="stretch_width", visible=False),
            "labkit-node-state",
        )

    @staticmethod
    def _make_node_plot() -> tuple[Any, list[ColumnDataSource]]:
        """One small plot of up to :data:`MAX_SERIES` lines, for any node (a legend when two)."""
        # a small title: long names (GaussianClassifier: class_counts) fit
        fig = figure(
            height=170,
            width=340,
            tools="",
            toolbar_location=None,
            title=Title(text_font_size="9pt"),
        )
        sources = [ColumnDataSource({"x": [], "y": []}) for _ in range(MAX_SERIES)]
        lines: list[DataRenderer] = []
        for i, source in enumerate(sources):
            lines.append(
                fig.line(
                    x="x",
                    y="y",
                    source=source,
                    line_width=2 if i == 0 else 1.5,
                    line_dash="solid" if i == 0 else "dashed",
                    legend_label=f"series {i}",
                )
            )
            fig.scatter(
                x="x",
                y="y",
                source=source,
                size=4 if i == 0 else 6,
                marker="circle" if i == 0 else "diamond",
            )
        fig.add_tools(HoverTool(renderers=lines, tooltips=[("", "@x"), ("value", "@y{0.0000}")]))
        fig.legend.visible = False
        fig.legend.label_text_font_size = "8pt"
        fig.legend.location = "top_right"
        fig.axis.axis_label_text_font_size = "8pt"
        return fig, sources

    @staticmethod
    def _show_node_plot(plot, view: NodeView, key: str) -> None:
        """Make ``plot`` (new, or freed by a node no longer shown) the plot of ``view``."""
        fig, sources = plot
        names = list(view.plots)[:MAX_SERIES]
        what = names[0] if names else ""
        fig.visible = True
        fig.title.text = f"node {view.node} {view.name}: {what}"
        fig.xaxis.axis_label, fig.yaxis.axis_label = AXES.get(what, ("index", what))
        color = node_color(view.node, 0)[0]
        for i, renderer in enumerate(fig.renderers):
            series = i // 2
            shade = color if series == 0 else SERIES_COLORS[series % len(SERIES_COLORS)]
            renderer.glyph.update(
                **{k: shade for k in ("line_color", "fill_color") if hasattr(renderer.glyph, k)}
            )
        for i, item in enumerate(fig.legend.items):
            item.label = {"value": names[i] if i < len(names) else ""}
            item.visible = i < len(names)
        fig.legend.visible = len(names) > 1
        for source in sources:
            source.data = {"x": [], "y": []}
        named(fig, f"labkit-node-plot-{key}")

    def update(self, snap: Snapshot, new_plots: int | None = None) -> bool:
        """Refresh the node table when a row changed; grow or redraw the node plots.

        With no node to show (an ensemble, a pipeline) the panel stays hidden.  At most
        ``new_plots`` figures are made (None: all that are needed); whether a node's plot
        was left for a later update.
        """
        nodes = [n for n in snap.nodes if self.run_filter is None or self.run_filter(n.run)]
        if self.layout.visible != bool(nodes):
            self.layout.visible = bool(nodes)
        fits = {r.run for r in snap.runs if r.kind == "fit"}
        rows = [
            {
                "key": f"{n.run}-{n.node}",
                "run": n.run,
                "node": n.node,
                "name": n.name,
                "phase": _where(n, n.run in fits),
                "training": "training" if n.training else "trained",
                "samples": int(n.samples),
                "joins": f"{int(n.joins):,} {'steps' if n.run in fits else 'joins'}",
            }
            for n in nodes
        ]
        data = {c: [r[c] for r in rows] for c in _NODE_COLUMNS}
        if data != self.node_rows:
            self.node_rows = data
            self.node_table.text = _node_table(data)
        views = [n for n in nodes if n.plots][-self.max_node_plots :]
        shown = _within(views, set(self._node_plots), len(self._spare_plots), new_plots)
        self._update_node_plots(shown)
        return len(shown) < len(views)

    def _update_node_plots(self, views: list[NodeView]) -> None:
        """One plot per shown node; stream points that extend it, else replace."""
        keys = [(v.run, v.node) for v in views]
        if keys != list(self._node_plots):
            old = self._node_plots
            free = [plot for k, plot in old.items() if k not in keys] + self._spare_plots
            self._spare_plots = []
            self._node_plots = {}
            for key, view in zip(keys, views, strict=True):
                plot = old.get(key)
                if plot is None:  # a figure costs ~10 ms to make and send: reuse one
                    plot = free.pop() if free else self._make_node_plot()
                    self._show_node_plot(plot, view, f"{key[0]}-{key[1]}")
                self._node_plots[key] = plot
            self.node_plots.children = [fig for fig, _ in self._node_plots.values()] or [
                self._no_plots
            ]
        for key, view in zip(keys, views, strict=True):
            _, sources = self._node_plots[key]
            # a node may plot fewer series than the figure has lines
            for source, values in zip(sources, list(view.plots.values()), strict=False):
                _update_series(source, *_series(values))


def _within(views: list[NodeView], plotted: set, spare: int, new_plots: int | None) -> list:
    """``views`` less those whose plot would be a new figure past ``new_plots`` (a node
    with a plot keeps it; a spare figure, or one a node no longer shown frees, is no new
    figure)."""
    if new_plots is None:
        return views
    keys = {(v.run, v.node) for v in views}
    free = spare + len(plotted - keys)
    allowed, shown = free + new_plots, []
    for view in views:
        if (view.run, view.node) not in plotted:
            if allowed == 0:
                continue
            allowed -= 1
        shown.append(view)
    return shown


def _series(values) -> tuple[list, list]:
    """``(x, y)`` of a plotted value: a list (x its index) or ``{"x": [...], "y": [...]}``."""
    if isinstance(values, dict):
        return [float(x) for x in values.get("x", [])], [float(y) for y in values.get("y", [])]
    ys = [float(y) for y in values]
    return list(range(len(ys))), ys


def _update_series(source: ColumnDataSource, xs: list, ys: list) -> None:
    """Stream the points that extend the line; replace it otherwise (x and y together)."""
    old_x, old_y = list(source.data["x"]), list(source.data["y"])
    if xs == old_x and ys == old_y:
        return
    n = len(old_y)
    if len(ys) > n and ys[:n] == old_y and xs[:n] == old_x:
        source.stream({"x": xs[n:], "y": ys[n:]})
    else:
        source.data = {"x": xs, "y": ys}


_TABLE_HEAD = ("#", "node", "at", "state", "samples", "merged", "run")


def _where(n, fit: bool) -> str:
    """Where a node is, in its run's words: ``epoch 6`` of a fit, ``phase 1/2`` of a flow."""
    if fit:  # a trainer counts its epochs from 1, as fit's records do
        return f"epoch {n.phase + 1}"
    if n.phases is not None:  # a trained node has passed its last phase
        return f"phase {min(n.phase + 1, n.phases)}/{n.phases}"
    return f"phase {n.phase + 1}"


_TABLE_STYLE = "border-collapse:collapse;font-size:9pt;width:100%;font-variant-numeric:tabular-nums"


def _node_table(data: dict) -> str:
    """The nodes as an HTML table: one ``labkit-node-row`` a node."""
    cell = "<td style='padding:1px 8px 1px 0'>{}</td>"
    head = "".join(
        f"<th style='text-align:left;padding:1px 8px 1px 0'>{h}</th>" for h in _TABLE_HEAD
    )
    rows = []
    for i in range(len(data["key"])):
        values = (
            data["node"][i],
            data["name"][i],
            data["phase"][i],
            data["training"][i],
            f"{data['samples'][i]:,}",
            data["joins"][i],
            data["run"][i],
        )
        rows.append(
            "<tr class='labkit-node-row'>"
            + "".join(cell.format(html.escape(str(v))) for v in values)
            + "</tr>"
        )
    return (
        f"<table style='{_TABLE_STYLE}'><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
