"""The dashboard's count of workers over time: workers leaving and joining, as a step line.

:class:`WorkerCount` draws what a
:class:`~labkit.views.trackers.cluster_sampler.ClusterSampler` kept: the
cluster's count of workers at each change (a retirement, a lifetime's end, a
``scale`` or ``adapt``), held flat until now.  Its figure is named
``labkit-worker-count`` and its source ``labkit-worker-count-source``.
"""

from __future__ import annotations

import time

from bokeh.models import ColumnDataSource
from bokeh.plotting import figure

from .node_panel import named

__all__ = ["WorkerCount"]


class WorkerCount:
    """The count of a cluster's workers over time (``sampler``: a ClusterSampler, or None)."""

    def __init__(self, sampler, height: int = 110):
        self.sampler = sampler
        self.source = named(
            ColumnDataSource({"time": [], "workers": []}), "labkit-worker-count-source"
        )
        fig = figure(
            title="Workers (leaving and joining)",
            height=height,
            x_axis_type="datetime",
            tools="",
            toolbar_location=None,
            sizing_mode="stretch_width",
        )
        fig.step("time", "workers", source=self.source, mode="after", line_width=2)
        fig.yaxis.minor_tick_line_color = None
        self.layout = named(fig, "labkit-worker-count")
        self.layout.visible = sampler is not None
        self._drawn: list = []

    def update(self) -> None:
        """Draw the changes kept since the last update (the line held flat until now)."""
        if self.sampler is None:
            return
        counts = self.sampler.workers_over_time()
        if not counts:
            return
        if counts != self._drawn:
            self._drawn = counts
            now = max(time.time(), counts[-1][0])
            times = [1000 * t for t, _ in counts] + [1000 * now]  # bokeh's datetimes: ms
            self.source.data = {"time": times, "workers": [n for _, n in counts] + [counts[-1][1]]}
