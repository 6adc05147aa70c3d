"""Experiments: many trials of one function on the cluster, stopped early, kept across restarts.

``lk.sweep(fn, space, trials=, metric=, mode=, scheduler=, early_stop=, store=)``
runs ``fn(config, trial)`` for configurations drawn from ``space``
(:mod:`.space`), each trial one long task on the cluster (:mod:`.launch`,
:mod:`.tasks`).  The trial reports as it goes (:mod:`.trial`, :mod:`.sinks`);
the client keeps every trial's state (:mod:`.engine`), lets an early-stopping
rule decide from the reports which trials go on (:mod:`.rules`), writes
everything to a SQLite store (:mod:`.store`, checkpoints in
:mod:`.checkpoints`) and emits events for views.  :mod:`.loop` drives it;
:mod:`.result` is what comes back, and what ``lk.load_sweep`` reads back.
"""

from .loading import load_sweep
from .record import TrialRecord
from .result import SweepResult
from .rules import ASHA, History, Median, Rule
from .space import Grid, Space, choice, grid, loguniform, randint, uniform
from .status import Status
from .sweep import LiveSweep, live_sweep, sweep
from .trial import Trial, TrialStopped

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
