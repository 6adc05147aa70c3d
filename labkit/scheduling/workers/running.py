"""Running one task wherever it lands: on a Dask worker, a thread here, a pool process.

:func:`run_task` is what actually executes on a Dask worker (or in-process for
the local scheduler): it forks the shipped callable, runs it on one chunk,
times it, reports its start, and turns any exception into a picklable labkit
error that names node, phase, chunk and worker.
"""

from __future__ import annotations

import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...errors import USER_EXITS, LabkitError, TaskError
from ...events import TaskInfo
from ..dask.quiet import install as _quiet_worker_log
from ..tasks.callables import TaskCallable
from .lazy_chunks import LazyChunk
from .pools import offload_pool
from .reference import unwrap
from .shared import SharedChunk, unmap

__all__ = [
    "TaskOutcome",
    "run_task",
    "run_task_here",
    "HereTask",
    "n_samples",
    "current_task",
    "worker_address",
]

# This module is imported wherever a labkit task runs (a Dask worker unpickling
# run_task): from then on the worker leaves reporting labkit's failures to labkit.
_quiet_worker_log()

_env_lock = threading.Lock()
_PROCESS = uuid.uuid4().hex  # this process, for marks that must not travel to another
_running = threading.local()  # the task this thread runs, for callables that ask


def current_task() -> TaskInfo | None:
    """The :class:`~labkit.events.TaskInfo` of the task this thread is running, if any.

    Lets a callable that keeps state across tasks (say, one fork per worker)
    record which chunks it has seen.
    """
    return getattr(_running, "info", None)


@dataclass(frozen=True)
class TaskOutcome:
    """What a task sends back: its result, where it ran and when."""

    result: Any
    worker: str
    start: float
    end: float
    n_samples: int | None
    released: bool | None = None  # a shared-memory chunk: unmapped, nothing views it here


def n_samples(data) -> int | None:
    """Rows in a chunk (its first array when the chunk is a tuple)."""
    first = data[0] if isinstance(data, tuple) and data else data
    shape = getattr(first, "shape", None)
    return int(shape[0]) if shape else None


def worker_address() -> str:
    """The address of the Dask worker running this code, or ``"local"``."""
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return "local"


def _ensure_environment(task_callable: TaskCallable) -> None:
    """Call ``setup_environment`` once in this process for ``task_callable``.

    The scattered callable object is shared by all tasks in a worker process,
    so it carries the mark; the mark names this process, because a copy made
    after its setup (Dask replicating it from a worker where it ran to
    another) must set that other process up too.
    """
    if getattr(task_callable, "_labkit_env_ready", None) == _PROCESS:
        return
    with _env_lock:
        if getattr(task_callable, "_labkit_env_ready", None) != _PROCESS:
            task_callable.setup_environment()
            setattr(task_callable, "_labkit_env_ready", _PROCESS)  # noqa: B010  (a mark on the user's object)


def _report_start(topic: str, info: TaskInfo, worker: str, start: float, key=None) -> None:
    from distributed import get_worker

    try:
        w = get_worker()
        key = key or w.get_current_task()  # a packed task has a key of its own
        w.log_event(topic, {"key": key, "task": info.task, "worker": worker, "time": start})
    except ValueError:  # not on a worker: nothing to report to
        pass


def run_task(
    task_callable: TaskCallable,
    data,
    info: TaskInfo,
    topic: str | None = None,
    worker: str | None = None,
    offload: str | None = None,
    key: str | None = None,
) -> TaskOutcome:
    """Run one task; errors come out as labkit errors located at ``info``.

    ``offload``: the token of an offload pool that runs GIL-holding callables;
    ``key``: the task's own key where it runs inside another Dask task (a pack).
    """
    start = time.time()
    worker = worker or worker_address()
    if topic is not None:
        _report_start(topic, info, worker, start, key)
    pool = None
    if offload is not None and getattr(task_callable, "holds_gil", False):
        pool = offload_pool(offload)
    mapped: list = []
    data = unwrap(data)
    try:
        if isinstance(data, LazyChunk):
            data = data.materialize()
        elif isinstance(data, SharedChunk):
            data = data.materialize(mapped)
        if pool is not None:
            return pool.run(task_callable, data, info, worker)
        _ensure_environment(task_callable)
        _running.info = info
        try:
            result = task_callable.fork()(data)
        finally:
            _running.info = None
    except LabkitError as err:
        err.locate(**info.where(), worker=worker)
        if not getattr(err, "remote_traceback", None):  # an offloaded task's came with it
            err.remote_traceback = traceback.format_exc()
        raise
    except USER_EXITS as exc:  # a task's failure, not the worker's: Dask's thread would die
        raise TaskError.from_exception(
            exc, traceback.format_exc(), **info.where(), worker=worker
        ) from None
    rows, end = n_samples(data), time.time()
    del data  # so that unmapping tells whether anything else still views the chunk
    released = unmap(mapped) if mapped else None
    return TaskOutcome(result, worker, start, end, rows, released)


def _always() -> bool:
    return True


class HereTask:
    """A task's input and how to record its outcome, for a worker thread of this process."""

    __slots__ = ("data", "deliver", "is_open")

    def __init__(
        self, data, deliver: Callable[..., Any], is_open: Callable[[], bool] | None = None
    ):
        self.data, self.deliver = data, deliver
        self.is_open = is_open or _always  # whether its batch still wants it run


def run_task_here(
    held,
    info: TaskInfo,
    task_callable: TaskCallable,
    topic: str | None = None,
    worker: str | None = None,
    offload: str | None = None,
    key: str | None = None,
) -> None:
    """:func:`run_task` on a worker thread of the client's process; records its own outcome.

    ``held`` is a :class:`HereTask` (handed over by reference): its outcome is
    recorded right here, so the client fetches nothing back from Dask and
    the task's result in Dask is ``None``.  So is an error of the task (a
    labkit error located at ``info``, as :func:`run_task` raises it).
    """
    here = unwrap(held)
    try:
        outcome = run_task(task_callable, here.data, info, topic, worker, offload, key)
    except USER_EXITS as error:
        here.deliver(error=error)
    else:
        here.deliver(outcome)
