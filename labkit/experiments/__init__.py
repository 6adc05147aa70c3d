"""Experiments: many trials of one function on the cluster, stopped early, kept across restarts.

``lk.sweep(fn, space, trials=, metric=, mode=, scheduler=, early_stop=, store=)``
runs ``fn(config, trial)`` for configurations drawn from ``space``, each trial
one long task on the cluster; the client decides from the reports which trials
go on, keeps everything in a SQLite store, and hands back a result (or a live
``Run``).  ``lk.load_sweep`` reads a sweep back in any kernel.

The parts, one folder a concern, bottom up:

* :mod:`.trials`: one trial as everyone sees it: ``Status`` (one spelling),
  ``TrialRecord`` (one frozen record shared by the engine, the store, the
  events, the result and the views), the handle ``fn`` gets (``trial``), the
  engine's bookkeeping around a record and how an outcome ends it;
* :mod:`.search`: what is searched and decided: the spaces and their
  distributions, random search and Optuna's samplers, population-based
  training and its exploits, the early-stopping rules (``ASHA``, ``Median``,
  ``Rule``) and the judge that applies them; one decision protocol at report
  time (``search.decision.Decider``: continue, stop, pause, exploit) that the
  rules (through the judge) and PBT implement, consulted as one chain;
* :mod:`.store`: the SQLite store (its schema and version, the writer thread,
  claims on names, report packs, checkpoints' references and their retention
  (the bytes are written where trials run, never through the client), reads in bulk, a store
  followed while another process writes it, ``labkit sweeps``' catalogue);
* :mod:`.objectives`: several objectives at once: dominance, the Pareto front,
  non-dominated ranks, crowding, hypervolume, their declaration and what Optuna's
  samplers are told (constraints), and MOASHA's rung order;
* :mod:`.launch`: where trials run and how their reports come back (in this
  thread, on threads, in slots on worker processes, a task a trial, a group of
  workers a trial), the sinks, sockets and the sweep's loop;
* on top, in this folder: :mod:`.spec` (what a sweep is) and its declared
  :mod:`.arguments`; :mod:`.engine` (every trial's state, under one lock);
  :mod:`.opening` (a new or resumed sweep), :mod:`.checkpointing` (where a
  sweep's checkpoints go, checked from each worker, and loaded back), :mod:`.job` (the sweep's run),
  :mod:`.sweep` (``lk.sweep``), :mod:`.live` (``run.sweep``),
  :mod:`.sweep_result`, :mod:`.loading` (``lk.load_sweep``) and their public
  face :mod:`.result`.

Inside the room, folders import downwards only: ``trials`` imports none of the
others, ``store`` and ``search`` import ``trials``, ``launch`` imports
``trials`` and ``store``; the modules of this folder import any of them.

What it may import: ``labkit.errors``, ``labkit.constraints``, ``labkit.events``, ``labkit.runs``,
``labkit.scheduling`` (schedulers, task callables, the Dask adapter) and
labkit's checkpoint format; never ``labkit.views`` (views import this room,
and find a run's sweep through ``run.sweep``), ``labkit.data_parallel`` or
``labkit.flows``' graphs.
"""

from .loading import load_sweep
from .objectives.samplers import stored_constraints
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
    "stored_constraints",
]
