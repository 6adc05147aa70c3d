"""Experiments: many trials of one function on the cluster, stopped early, kept across restarts.

``lk.sweep(fn, space, trials=, metric=, mode=, scheduler=, early_stop=, store=)``
runs ``fn(config, trial)`` for configurations drawn from ``space``, each trial
one long task on the cluster; the client decides from the reports which trials
go on, keeps everything in a SQLite store, and hands back a result (or a live
``Run``).  ``lk.load_sweep`` reads a sweep back in any kernel.

The parts, bottom up:

* the trial model: :mod:`.status` (``Status``, one spelling of a trial's
  status) and :mod:`.record` (``TrialRecord``: one frozen, keyword-built record
  of a trial, shared by the engine, the store, the events, the result and the
  views);
* what is searched: :mod:`.distributions`, :mod:`.space`; what a sweep is:
  :mod:`.spec`; its arguments, declared once: :mod:`.arguments`;
* early stopping: :mod:`.rules` (``ASHA``, ``Median``, ``Rule`` with its
  lifecycle hooks) and :mod:`.judge` (the rule at work, its state kept in the store);
* the store: :mod:`.store` over :mod:`.store_schema` (the schema and its
  version), :mod:`.write_queue` (batched commits) and :mod:`.claims` (one
  sweep a name); checkpoints' bytes: :mod:`.checkpoints`;
* the trial's side: :mod:`.trial` (what ``fn`` gets), :mod:`.sinks` (where
  its reports go), :mod:`.execution` (running ``fn`` on a thread, a worker
  process or an offload process), :mod:`.slot` (a long task on a worker
  process that runs trial after trial);
* the client's side: :mod:`.engine` (every trial's state, under one lock;
  :mod:`.trial_state`, :mod:`.verdict`), the launchers (:mod:`.launcher`,
  :mod:`.launch`, :mod:`.slot_launcher`, :mod:`.remote_launcher`), :mod:`.loop` (keeps the slots
  full, winds down cleanly);
* on top: :mod:`.opening` (a new or resumed sweep), :mod:`.job` (the sweep's
  run), :mod:`.sweep` (``lk.sweep``), :mod:`.live` (``run.sweep``),
  :mod:`.sweep_result`, :mod:`.loading` (``lk.load_sweep``) and their public
  face :mod:`.result`.

What it may import: ``labkit.errors``, ``labkit.constraints``, ``labkit.events``, ``labkit.runs``,
``labkit.scheduling`` (schedulers, task callables, the Dask adapter) and
labkit's checkpoint format; never ``labkit.views`` (views import this room,
and find a run's sweep through ``run.sweep``), ``labkit.data_parallel`` or
``labkit.flows``' graphs.
"""

from .loading import load_sweep
from .search import PBT
from .search.exploits import ExploitRecord
from .search.rules import ASHA, History, Median, Rule
from .search.space import Grid, Space, choice, grid, loguniform, randint, uniform
from .sweep import LiveSweep, live_sweep, sweep
from .sweep_result import SweepResult
from .trials.record import TrialRecord
from .trials.status import Status
from .trials.trial import Trial, TrialStopped

__all__ = [
    "sweep",
    "load_sweep",
    "loguniform",
    "uniform",
    "randint",
    "choice",
    "grid",
    "Grid",
    "Space",
    "ASHA",
    "Median",
    "PBT",
    "ExploitRecord",
    "Rule",
    "History",
    "Trial",
    "TrialStopped",
    "SweepResult",
    "TrialRecord",
    "LiveSweep",
    "live_sweep",
    "Status",
]
