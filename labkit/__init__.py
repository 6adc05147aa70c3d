"""labkit: parallel machine-learning experiments on Dask, watched live from Jupyter."""

from . import nodes
from .errors import (CancelledError, InputError, LabkitError, NotForkableError,
                     SchedulerError, TaskError, TrainingError)
from .flows import Node

__version__ = "0.1.0"

__all__ = [
    "nodes", "Node", "LabkitError", "TaskError", "NotForkableError", "InputError",
    "TrainingError", "CancelledError", "SchedulerError",
]
