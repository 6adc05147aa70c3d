"""labkit: parallel machine-learning experiments on Dask, watched live from Jupyter.

Examples
--------
>>> import labkit as lk
>>> with lk.LocalScheduler() as s:
...     _ = s.add_task(2, lambda x: x * 21)
...     s.get_results()
[42]

Notes
-----
The rooms.  Each subpackage is a room with one job; a room imports only the rooms
below it, never one above, and none imports :mod:`labkit.views`.

The ground floor imports none of the rooms:

- :mod:`labkit.errors`: the error classes, located where they happened;
- :mod:`labkit.constraints`: argument rules, declared once (imports errors);
- :mod:`labkit.events`: event dataclasses; :mod:`labkit.event_bus`: the bus and the
  ``Observable`` mixin;
- :mod:`labkit.runs`: ``Run``, ``RunControl``, ``run_scope`` (work that takes time);
- :mod:`labkit.checkpoints`: labkit's safe file format and atomic writes.

The rooms, each importing the ground floor and what it names here:

- :mod:`labkit.scheduling`: the schedulers' verbs, in-process or on Dask;
- :mod:`labkit.flows`: the node contract and serial, parallel and
  checkpointed flows (imports scheduling);
- :mod:`labkit.nodes`: the built-in nodes (imports flows);
- :mod:`labkit.pipeline`: stages of threads joined by bounded queues;
- :mod:`labkit.program`: step-wise control-flow programs (imports runs);
- :mod:`labkit.ensemble`: layers of estimators fitted in parallel (imports
  scheduling);
- :mod:`labkit.data_parallel`: the torch data-parallel trainer, replicas
  on threads or on Dask workers (imports scheduling);
- :mod:`labkit.experiments`: sweeps of trials, early stopping, the store
  (imports scheduling);
- :mod:`labkit.views`: trackers and renderers of the events, the only room
  that imports a UI library (imports any room but flows; none imports it).

On top: this module (the names of ``lk.X``), :mod:`labkit.cli` (the
``labkit`` command), :mod:`labkit.serving` and :mod:`labkit.demo`.
"""

import importlib
import sys
from typing import TYPE_CHECKING, Any

from . import (
    constraints,
    data_parallel,
    errors,
    events,
    experiments,
    flows,
    nodes,
    pipeline,
    runs,
    scheduling,
)
from .checkpoints import CheckpointLocation, CheckpointRef
from .data_parallel import split_batch
from .errors import (
    CancelledError,
    InputError,
    LabkitError,
    NotForkableError,
    SchedulerError,
    StorageError,
    TaskError,
    TrainingError,
    WorkerLostError,
)
from .experiments import (
    ASHA,
    PBT,
    Median,
    Trial,
    TrialStopped,
    choice,
    grid,
    load_sweep,
    loguniform,
    randint,
    sweep,
    uniform,
)
from .flows import (
    CheckpointFlow,
    CheckpointSaver,
    Flow,
    FlowExecuteCallable,
    FlowTrainCallable,
    Node,
    ParallelFlow,
    allow_in_checkpoints,
)
from .pipeline import STOP, Queue, pipe, pipe_and_output
from .runs import Run, RunControl, run_scope
from .scheduling import (
    Batch,
    DaskScheduler,
    FunctionCallable,
    ListResultContainer,
    LocalScheduler,
    OrderedResultContainer,
    ResultContainer,
    Scheduler,
    TaskCallable,
)

__version__ = "0.1.0"


def board(source: Any, **options: Any) -> Any:
    """The live ipywidgets board of a scheduler or run (see :mod:`labkit.views.notebook.board`)."""
    from .views.notebook.board import board as make_board

    return make_board(source, **options)


def _register_display() -> None:
    """In IPython/Jupyter, show a Run that is a cell's result as its live board."""
    if "IPython" in sys.modules:  # a kernel has imported it already; elsewhere skip the cost
        from .views.notebook.display import register

        register()


_register_display()


#: ``lk.X`` for these imports torch: so only when first used (the room's own lazy names).
_FROM_DATA_PARALLEL = (
    "DataParallelTrainer",
    "NonFiniteLossError",
    "NonFiniteLossWarning",
    "bucket_batches",
    "BucketBatch",
    "BucketBatches",
    "on_workers",
)


if TYPE_CHECKING:  # lk.ensemble and lk.NotFittedError as mypy reads them (made lazily below)
    from . import ensemble
    from .errors import NotFittedError


def __getattr__(name: str) -> Any:
    """``lk.DataParallelTrainer``, its errors and bucketing import torch only when first used;
    ``lk.ensemble`` and ``lk.NotFittedError`` import scikit-learn only when first used."""
    if name in _FROM_DATA_PARALLEL:
        return getattr(data_parallel, name)
    # these import scikit-learn and scipy: a second that every new Dask worker would pay
    # before its first trial, were they imported with labkit
    if name == "ensemble":
        return importlib.import_module(".ensemble", __name__)
    if name == "NotFittedError":
        return errors.not_fitted_kind()
    raise AttributeError(f"module 'labkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def runner(program: Any, **options: Any) -> Any:
    """Step ``program`` on the kernel's loop with a live panel (see :mod:`labkit.views.notebook.runner`)."""
    from .views.notebook.runner import runner as make_runner

    return make_runner(program, **options)


def dashboard(scheduler: Any, **options: Any) -> str:
    """Serve the Bokeh dashboard of ``scheduler``; returns its URL (see :mod:`labkit.views.bokeh.dashboard`)."""
    from .views.bokeh.dashboard import dashboard as serve

    return serve(scheduler, **options)


__all__ = [
    "constraints",
    "data_parallel",
    "ensemble",
    "errors",
    "events",
    "experiments",
    "flows",
    "nodes",
    "pipeline",
    "runs",
    "scheduling",
    "LabkitError",
    "TaskError",
    "NotForkableError",
    "InputError",
    "TrainingError",
    "NotFittedError",
    "CancelledError",
    "SchedulerError",
    "WorkerLostError",
    "StorageError",
    "Node",
    "Flow",
    "ParallelFlow",
    "CheckpointFlow",
    "CheckpointSaver",
    "allow_in_checkpoints",
    "Run",
    "RunControl",
    "run_scope",
    "Batch",
    "FlowTrainCallable",
    "FlowExecuteCallable",
    "Scheduler",
    "LocalScheduler",
    "DaskScheduler",
    "TaskCallable",
    "FunctionCallable",
    "ResultContainer",
    "ListResultContainer",
    "OrderedResultContainer",
    "board",
    "dashboard",
    "pipe",
    "pipe_and_output",
    "Queue",
    "STOP",
    "split_batch",
    "DataParallelTrainer",
    "runner",
    "NonFiniteLossError",
    "NonFiniteLossWarning",
    "bucket_batches",
    "BucketBatch",
    "BucketBatches",
    "on_workers",
    "sweep",
    "load_sweep",
    "CheckpointLocation",
    "CheckpointRef",
    "loguniform",
    "uniform",
    "randint",
    "choice",
    "grid",
    "ASHA",
    "Median",
    "PBT",
    "TrialStopped",
    "Trial",
]
