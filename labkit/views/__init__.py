"""Views: what a scheduler, a run, a trainer, a sweep or a program is doing, shown as it happens.

The room is built of kinds of parts, a folder each, so you can tell which is which:

* :mod:`.trackers` turn events (or a store's rows) into frozen snapshots and
  what changed, and import no UI library and no renderer: a scheduler's, run's
  or trainer's load, nodes and task spans (``tracker``), its runs, phases and
  fits (``progress``), a step-wise program's state, a sweep's trials (folded
  by ``sweep_fold``; its lines, quantile band and parallel-coordinates axes),
  the sweeps a dashboard lists (a scheduler's, a store's), trials as the tasks
  a scheduler's views count, what workers and devices are called, and the
  cluster's own numbers.
* :mod:`.notebook`: the notebook's widgets and HTML: the live board of a
  scheduler, a run or a trainer and its parts, HTML cards and rich display,
  the program runner, widgets that answer while a cell runs.
* :mod:`.sweep`: the sweep board in the notebook: one anywidget whose frames
  carry only what changed, the front-end's ES modules joined for it, and the
  words and HTML its frames hold.
* :mod:`.bokeh`: the dashboard's Bokeh server in a thread, its components
  (tasks, devices, nodes, runs, sweeps, stores) and Bokeh layouts as notebook
  widgets.
* :mod:`.console`: progress bars for terminals and logs.
* Shared plumbing, in this folder: :mod:`.live` (the one live loop:
  subscribe, pace, draw, stop) over :mod:`.writer` (the one drawing thread and
  its pace) and :mod:`.priority`; :mod:`.task_colours`.  The front-end of the
  custom widgets (plain ESM and CSS) is in ``assets/``.

Folders import downwards only: ``trackers`` imports nothing of the other
folders; renderers import ``trackers`` and the shared plumbing; ``bokeh`` may
import ``sweep``'s data, never the reverse.

What it may import: the engine's public API (``labkit.events``,
``labkit.runs``, ``labkit.errors``, ``labkit.constraints``,
``labkit.scheduling.dask.connect``, ``labkit.experiments``' results and sweeps)
and UI libraries (ipywidgets, anywidget, Bokeh, tqdm), the latter only in
renderers.  The engine never imports views (``tests/test_layering.py``
checks it): views subscribe to its events.  The names here import no UI
library; the renderers that do are imported on use (``lk.board``,
``lk.dashboard``, ``lk.runner``).
"""

from .console.bars import ConsoleProgress, format_phase
from .trackers.progress import PhaseProgress, ProgressTracker
from .trackers.tracker import DeviceLoad, NodeView, Snapshot, TaskSpan, Tracker

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
