"""Schedulers: the seed's ``add_task``/``get_results`` verbs, in-process or on Dask."""

from .base import Scheduler
from .batch import Batch
from .dask import DaskScheduler
from .local import LocalScheduler
from .results import ListResultContainer, OrderedResultContainer, ResultContainer
from .task import FunctionCallable, TaskCallable, TaskOutcome

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
]
