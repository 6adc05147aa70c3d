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
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import USER_EXITS, LabkitError, TaskError, require_callable
from ..events import TaskInfo
from .dask_adapter import is_delayed, is_future, is_task_graph, task_graph
from .quiet import install as _quiet_worker_log
from .reference import unwrap
from .shared import SharedChunk, unmap

__all__ = [
    "TaskCallable",
    "FunctionCallable",
    "TaskOutcome",
    "run_task",
    "run_task_here",
    "HereTask",
    "n_samples",
    "is_delayed",
    "is_future",
    "LazyChunk",
    "lazy_chunk",
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


class TaskCallable:
    """Work that a scheduler applies to each chunk of data.

    A scheduler ships the callable to the workers once (not with every task)
    and calls ``fork()`` before each task, so a callable that accumulates
    state must return a fresh copy from ``fork``.

    ``holds_gil`` says that the work is pure Python (it holds the GIL): on an
    in-process cluster such tasks run in worker processes instead of threads
    (see :mod:`labkit.scheduling.offload`).  numpy, BLAS, scikit-learn and
    torch work releases the GIL and runs best on threads.

    Examples
    --------
    >>> class Square(TaskCallable):
    ...     def __call__(self, data):
    ...         return data * data
    >>> Square().fork()(3)
    9
    """

    holds_gil: bool = False

    def setup_environment(self) -> None:
        """Prepare the process the callable runs in; called once per process."""

    def fork(self) -> "TaskCallable":
        """The callable that runs one task; ``self`` for stateless callables."""
        return self

    def parts(self) -> dict[str, Any]:
        """The user's objects it carries, by how a message should name them.

        An error about the callable (it cannot be sent to the workers, say)
        names the part at fault (``"estimator 'svm' (SVC)"``), never labkit's
        own wrapper.  None by default.
        """
        return {}

    def __call__(self, data) -> Any:
        raise NotImplementedError


class FunctionCallable(TaskCallable):
    """A plain function as a task callable.

    Parameters
    ----------
    fn : callable
    holds_gil : bool
        The function is pure Python: run it in processes beside an
        in-process cluster (see :class:`TaskCallable`).

    Examples
    --------
    >>> FunctionCallable(len)([1, 2])
    2
    """

    def __init__(self, fn: Callable[[Any], Any], holds_gil: bool = False):
        require_callable(fn, "fn", "FunctionCallable")
        self.fn = fn
        self.holds_gil = holds_gil

    def __call__(self, data):
        return self.fn(data)

    def parts(self) -> dict[str, Any]:
        """The function, named as its code names it."""
        name = getattr(self.fn, "__qualname__", None) or type(self.fn).__name__
        return {f"the task function {name}": self.fn}

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
    released: bool | None = None  # a shared-memory chunk: unmapped, nothing views it here


def n_samples(data) -> int | None:
    """Rows in a chunk (its first array when the chunk is a tuple)."""
    first = data[0] if isinstance(data, tuple) and data else data
    shape = getattr(first, "shape", None)
    return int(shape[0]) if shape else None


class LazyChunk:
    """A chunk not computed yet: its own small task graph, computed inside the task.

    A block of a lazy Dask array (say ``from_delayed`` or ``da.random``) would
    otherwise be a task of its own whose output the training task then takes:
    two tasks a chunk, the block kept in the worker's memory between them.
    Computing it inside the training task makes one task a chunk, and the
    chunk never leaves the thread that made it.
    """

    def __init__(self, graph: dict, key):
        self.graph, self.key = graph, key

    def materialize(self):
        """The chunk, computed here: node by node, or by Dask's synchronous scheduler.

        A culled block graph holds a task or two; walking it directly costs a
        third of ``get_sync`` (about 50 µs against 140 µs a chunk).
        """
        graph = self.graph
        if len(graph) <= 64 and is_task_graph(graph):
            return _evaluate(graph, self.key, {})
        from dask.local import get_sync

        return get_sync(self.graph, self.key)


def _evaluate(graph: dict, key, cache: dict):
    """``graph[key]`` computed depth first, each node once (``cache`` holds results)."""
    node = graph[key]
    for dependency in node.dependencies:
        if dependency not in cache:
            _evaluate(graph, dependency, cache)
    cache[key] = value = node(cache)
    return value


def lazy_chunk(delayed) -> LazyChunk | None:
    """``delayed`` as a :class:`LazyChunk`, or ``None`` when it needs data already on a cluster.

    A persisted array's blocks (and chunks built on futures) have keys that
    live on the cluster: they are trained as dependent tasks, where they lie.
    """
    from dask.optimization import cull

    try:
        graph, converted = _as_dicts(delayed.__dask_graph__())
        if delayed.key not in graph:
            return None
        culled, dependencies = cull(graph, [delayed.key])
    except Exception:  # an unusual graph: let Dask handle it as a task of its own
        return None
    if any(d not in culled for deps in dependencies.values() for d in deps) or any(
        is_future(value) for value in culled.values()
    ):
        return None
    return LazyChunk({key: converted[key] for key in culled}, delayed.key)


# The blocks of one array share one graph: convert it once.  One tuple, swapped whole,
# so threads submitting different arrays never see one graph's dicts for another's.
_last_graph: tuple = (None, None, None)


def _as_dicts(graph) -> tuple[dict, dict]:
    """``graph`` as a dict, and as a dict of task specs (old-style tuples converted)."""
    global _last_graph
    held, as_dict, converted = _last_graph
    if held is not graph:
        as_dict = dict(graph)
        converted = task_graph(as_dict)
        _last_graph = (graph, as_dict, converted)
    return as_dict, converted


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
            setattr(task_callable, "_labkit_env_ready", _PROCESS)


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
        from .offload import offload_pool

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
