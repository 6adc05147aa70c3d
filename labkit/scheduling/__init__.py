"""Schedulers: the seed's ``add_task``/``get_results`` verbs, in-process or on Dask."""

from .base import Scheduler
from .batch import Batch
from .callables import FunctionCallable, TaskCallable
from .dask_scheduler import DaskScheduler
from .local import LocalScheduler
from .results import ListResultContainer, OrderedResultContainer, ResultContainer
from .running import TaskOutcome, current_task, worker_address

__all__ = [
    "Scheduler",
    "Batch",
    "LocalScheduler",
    "DaskScheduler",
    "TaskCallable",
    "FunctionCallable",
    "TaskOutcome",
    "ResultContainer",
    "ListResultContainer",
    "OrderedResultContainer",
    "current_task",
    "worker_address",
]
