"""Task callables and the wrapper that runs one task wherever it lands.

:func:`run_task` is what actually executes on a Dask worker (or in-process for
the local scheduler): it forks the shipped callable, runs it on one chunk,
times it, reports its start, and turns any exception into a picklable labkit
error that names node, phase, chunk and worker.
"""

from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import LabkitError, TaskError
from ..events import TaskInfo

__all__ = ["TaskCallable", "FunctionCallable", "TaskOutcome", "run_task", "n_samples",
           "is_delayed", "is_future"]

_env_lock = threading.Lock()


class TaskCallable:
    """Work that a scheduler applies to each chunk of data.

    A scheduler ships the callable to the workers once (not with every task)
    and calls ``fork()`` before each task, so a callable that accumulates
    state must return a fresh copy from ``fork``.

    Examples
    --------
    >>> class Square(TaskCallable):
    ...     def __call__(self, data):
    ...         return data * data
    >>> Square().fork()(3)
    9
    """

    def setup_environment(self) -> None:
        """Prepare the process the callable runs in; called once per process."""

    def fork(self) -> "TaskCallable":
        """The callable that runs one task; ``self`` for stateless callables."""
        return self

    def __call__(self, data) -> Any:
        raise NotImplementedError


class FunctionCallable(TaskCallable):
    """A plain function as a task callable.

    Examples
    --------
    >>> FunctionCallable(len)([1, 2])
    2
    """

    def __init__(self, fn: Callable[[Any], Any]):
        self.fn = fn

    def __call__(self, data):
        return self.fn(data)

    def __repr__(self):
        return f"FunctionCallable({getattr(self.fn, '__name__', self.fn)!r})"


@dataclass(frozen=True)
class TaskOutcome:
    """What a task sends back: its result, where it ran and when."""

    result: Any
    worker: str
    start: float
    end: float
    n_samples: int | None


def n_samples(data) -> int | None:
    """Rows in a chunk (its first array when the chunk is a tuple)."""
    first = data[0] if isinstance(data, tuple) and data else data
    shape = getattr(first, "shape", None)
    return int(shape[0]) if shape else None


def is_delayed(obj) -> bool:
    """Whether ``obj`` is a ``dask.delayed`` object (it answers any ``hasattr``)."""
    kind = type(obj)
    return kind.__name__ == "Delayed" and kind.__module__.startswith("dask")


def is_future(obj) -> bool:
    """Whether ``obj`` is a ``distributed`` future."""
    kind = type(obj)
    return kind.__name__ == "Future" and kind.__module__.startswith("distributed")


def _worker_address() -> str:
    try:
        from distributed import get_worker
        return get_worker().address
    except (ImportError, ValueError):
        return "local"


def _ensure_environment(task_callable: TaskCallable) -> None:
    # The scattered callable object is shared by all tasks in a worker process.
    if getattr(task_callable, "_labkit_env_ready", False):
        return
    with _env_lock:
        if not getattr(task_callable, "_labkit_env_ready", False):
            task_callable.setup_environment()
            task_callable._labkit_env_ready = True


def _report_start(topic: str, info: TaskInfo, worker: str, start: float) -> None:
    from distributed import get_worker
    try:
        w = get_worker()
        w.log_event(topic, {"key": w.get_current_task(), "task": info.task, "worker": worker,
                            "time": start})
    except ValueError:  # not on a worker: nothing to report to
        pass


def run_task(task_callable: TaskCallable, data, info: TaskInfo, topic: str | None = None,
             worker: str | None = None) -> TaskOutcome:
    """Run one task; errors come out as labkit errors located at ``info``."""
    start = time.time()
    worker = worker or _worker_address()
    if topic is not None:
        _report_start(topic, info, worker, start)
    try:
        _ensure_environment(task_callable)
        result = task_callable.fork()(data)
    except LabkitError as err:
        err.locate(**info.where(), worker=worker)
        err.remote_traceback = traceback.format_exc()
        raise
    except Exception as exc:
        raise TaskError.from_exception(exc, traceback.format_exc(), **info.where(),
                                       worker=worker) from None
    return TaskOutcome(result, worker, start, time.time(), n_samples(data))
