"""Views: what a scheduler, a run, a trainer, a sweep or a program is doing, shown as it happens.

The room is built of three kinds of parts, named so you can tell which is which:

* **Trackers** turn events into frozen snapshots and import no UI library and
  no renderer: :mod:`.tracker` (a scheduler's, run's or trainer's load,
  nodes and task spans), :mod:`.progress` (its runs, phases and fits),
  :mod:`.program_tracker` (a step-wise program), :mod:`.sweep_tracker` (a
  sweep's trials, folded by :mod:`.sweep_fold`, so each reader asks what changed
  since its mark; the lines and the quantile band of :mod:`.sweep_lines` over
  :mod:`.sweep_grid`, and the :mod:`.sweep_axes` of its parallel coordinates;
  the notebook board and the dashboard read the same tracker), :mod:`.sweep_shelf` and
  :mod:`.store_shelf` (the sweeps a dashboard lists: a scheduler's, a store's)
  and :mod:`.trial_tasks` (trials as the tasks a scheduler's views count).
* **Renderers** draw snapshots, one medium each: the notebook widgets
  (:mod:`.board`, its :mod:`.board_parts`, the task :mod:`.lanes`, the program
  :mod:`.runner`, the sweep's :mod:`.sweep_board`); Bokeh (:mod:`.components`,
  :mod:`.node_panel`, :mod:`.run_panel`, the served :mod:`.dashboard` and
  :mod:`.store_dashboard` over :mod:`.bokeh_server`, the sweeps'
  :mod:`.sweep_plots` (:mod:`.sweep_table`, :mod:`.sweep_curves`,
  :mod:`.sweep_parallel`), and :mod:`.bokeh_widget` that puts Bokeh in a
  notebook); the console (:mod:`.console`); HTML (:mod:`.cards` and the
  notebook formatters of :mod:`.display`).
* **Shared plumbing**: :mod:`.live` (the one live loop: subscribe, pace,
  draw, stop) over :mod:`.writer` (the one drawing thread and its pace) and
  :mod:`.priority`; :mod:`.subjects` (what a view follows and which board it
  gets, as protocols); :mod:`.words` (the one module of words: every label,
  line and table a view shows); :mod:`.task_colours`, :mod:`.device_names` (what
  workers are called), :mod:`.cluster_sampler` (the cluster's own numbers) and
  :mod:`.busy_kernel` (widgets that answer while a cell runs).  The front-end
  of the custom widgets (plain ESM and CSS) is in ``assets/``.

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
