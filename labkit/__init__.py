"""labkit: parallel machine-learning experiments on Dask, watched live from Jupyter.

Examples
--------
>>> import labkit as lk
>>> with lk.LocalScheduler() as s:
...     _ = s.add_task(2, lambda x: x * 21)
...     s.get_results()
[42]
"""

from . import ensemble, events, experiments, nodes
from .data_parallel import split_batch
from .pipeline import STOP, Queue, pipe, pipe_and_output
from .errors import (
    CancelledError,
    InputError,
    LabkitError,
    NotFittedError,
    NotForkableError,
    SchedulerError,
    StorageError,
    TaskError,
    TrainingError,
    WorkerLostError,
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
from .experiments import (
    ASHA,
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


def board(source, **options):
    """The live ipywidgets board of a scheduler or run (see :mod:`labkit.views.board`)."""
    from .views.board import board as make_board

    return make_board(source, **options)


def _register_display() -> None:
    """In IPython/Jupyter, show a Run that is a cell's result as its live board."""
    import sys

    if "IPython" in sys.modules:  # a kernel has imported it already; elsewhere skip the cost
        from .views.display import register

        register()


_register_display()


def __getattr__(name):
    """``lk.DataParallelTrainer``, its errors and bucketing import torch only when first used."""
    if name == "DataParallelTrainer":
        from .data_parallel.trainer import DataParallelTrainer

        return DataParallelTrainer
    if name in ("NonFiniteLossError", "NonFiniteLossWarning"):
        from .data_parallel import guards

        return getattr(guards, name)
    if name in ("bucket_batches", "BucketBatch", "BucketBatches"):
        from .data_parallel import bucketing

        return getattr(bucketing, name)
    if name == "on_workers":
        from .data_parallel.fit_data import on_workers

        return on_workers
    raise AttributeError(f"module 'labkit' has no attribute {name!r}")


def runner(program, **options):
    """Step ``program`` on the kernel's loop with a live panel (see :mod:`labkit.views.runner`)."""
    from .views.runner import runner as make_runner

    return make_runner(program, **options)


def dashboard(scheduler, **options) -> str:
    """Serve the Bokeh dashboard of ``scheduler``; returns its URL (see :mod:`labkit.views.dashboard`)."""
    from .views.dashboard import dashboard as serve

    return serve(scheduler, **options)


__all__ = [
    "ensemble",
    "events",
    "experiments",
    "nodes",
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
    "loguniform",
    "uniform",
    "randint",
    "choice",
    "grid",
    "ASHA",
    "Median",
    "TrialStopped",
    "Trial",
]
