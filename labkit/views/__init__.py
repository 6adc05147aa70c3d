"""Views: trackers turn events into snapshots; renderers draw them.

The engine never imports this package; views subscribe to its events.  The
names here import no UI library; the renderers that do live in their own
modules, imported on use: ``board`` (ipywidgets), ``lanes`` (anywidget),
``components`` and ``dashboard`` (Bokeh).
"""

from .console import ConsoleProgress, format_phase
from .progress import PhaseProgress, ProgressTracker
from .tracker import DeviceLoad, NodeView, Snapshot, TaskSpan, Tracker

__all__ = [
    "Tracker",
    "Snapshot",
    "DeviceLoad",
    "NodeView",
    "TaskSpan",
    "ProgressTracker",
    "PhaseProgress",
    "ConsoleProgress",
    "format_phase",
]
