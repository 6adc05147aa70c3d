"""The scheduler base: the seed's ``add_task``/``get_results`` verbs on a bounded window.

A scheduler keeps at most ``max_in_flight`` tasks open: ``add_task`` blocks
(on a condition variable, no polling) until a slot frees, so a caller that
pulls chunks from a stream while adding them trains in bounded memory.
Backends report each finished task once through :meth:`Scheduler._task_done`;
the base puts the result into the container, emits events and remembers the
first error, which is re-raised in the caller by the next ``add_task`` or by
``get_results``.  After that the scheduler is clean and usable again.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import uuid
from typing import Any, Callable

from ..errors import CancelledError, LabkitError, SchedulerError, located
from ..events import Event, EventBus, TaskFailed, TaskFinished, TaskInfo, TaskSubmitted
from .results import ListResultContainer, ResultContainer
from .task import FunctionCallable, TaskCallable, TaskOutcome

__all__ = ["Scheduler", "OpenTask"]

logger = logging.getLogger("labkit.scheduling")


@dataclasses.dataclass
class OpenTask:
    """Book-keeping of one open task."""

    info: TaskInfo
    nbytes: int = 0
    handle: Any = None          # the backend's handle, for cancelling
    data: Any = None            # kept by backends that may have to send the chunk again
    attempts: int = 1


class Scheduler:
    """Runs task callables on chunks of data; subclasses say where.

    Parameters
    ----------
    result_container : ResultContainer, optional
        Where results go; a :class:`ListResultContainer` by default.
    max_in_flight : int, optional
        Most tasks open at once; ``add_task`` waits for a free slot.
    max_bytes_in_flight : int, optional
        Most bytes of chunk data held by open tasks (128 MiB by default); a
        single task larger than that still runs, alone.

    Examples
    --------
    >>> from labkit.scheduling import LocalScheduler, FunctionCallable
    >>> with LocalScheduler() as s:
    ...     for x in range(3):
    ...         task_id = s.add_task(x, FunctionCallable(lambda v: v * 10))
    ...     s.get_results()
    [0, 10, 20]
    """

    default_max_in_flight = 256
    default_max_bytes_in_flight = 128 * 2**20

    def __init__(self, result_container: ResultContainer | None = None,
                 max_in_flight: int | None = None, max_bytes_in_flight: int | None = None):
        self.result_container = result_container if result_container is not None \
            else ListResultContainer()
        self.max_in_flight = max_in_flight or self.default_max_in_flight
        self.max_bytes_in_flight = max_bytes_in_flight or self.default_max_bytes_in_flight
        self._bytes_open = 0
        self._bus = EventBus()
        self._cond = threading.Condition(threading.RLock())
        self._open: dict[int, OpenTask] = {}
        self._error: BaseException | None = None
        self._task_ids = itertools.count()
        self._batch_index = 0
        self._callable: TaskCallable | None = None
        self._closed = False
        self._shutdown_callbacks: list[Callable[[], Any]] = []
        self._batch_lock = threading.RLock()
        self._run = f"tasks-{uuid.uuid4().hex[:8]}"

    # -- events ------------------------------------------------------------------

    def subscribe(self, fn: Callable[[Event], Any]) -> Callable[[], None]:
        """Call ``fn(event)`` for every event; returns a function that unsubscribes."""
        return self._bus.subscribe(fn)

    @property
    def has_subscribers(self) -> bool:
        """Whether anybody listens (lets callers skip building costly events)."""
        return self._bus.has_subscribers

    def emit(self, event: Event) -> None:
        """Deliver an event to the subscribers (used by flows and backends)."""
        self._bus.emit(event)

    # -- the seed's verbs --------------------------------------------------------

    @property
    def n_open_tasks(self) -> int:
        """Tasks submitted and not yet completed."""
        return len(self._open)

    def add_task(self, data, task_callable: TaskCallable | Callable | None = None,
                 info: TaskInfo | None = None) -> int:
        """Submit one task; waits while ``max_in_flight`` tasks are open.

        Parameters
        ----------
        data
            The chunk: an array, a tuple, or (on Dask) a future or delayed.
        task_callable : TaskCallable or callable, optional
            Used for this and later tasks; the last one given when ``None``.
            A new callable is shipped to the workers once, not per task.
        info : TaskInfo, optional
            Where the task belongs (run, chunk, node, phase) for events and errors.

        Returns
        -------
        int
            The task id.
        """
        self._check_usable()
        self._raise_pending()
        if task_callable is not None:
            task_callable = self._as_task_callable(task_callable)
            if task_callable is not self._callable:
                self._use_callable(task_callable)
                self._callable = task_callable
        if self._callable is None:
            raise SchedulerError("add_task needs a task_callable (none was given yet)")
        nbytes = _nbytes(data)
        self._wait(lambda: self._has_room(nbytes))
        self._raise_pending()
        info = self._task_info(info)
        entry = OpenTask(info, nbytes)
        with self._cond:
            self._open[info.task] = entry
            self._bytes_open += nbytes
        self.emit(TaskSubmitted(info))
        handle = self._submit(data, entry)
        if handle is not None:
            entry.handle = handle
        self._raise_pending()
        return info.task

    def _as_task_callable(self, fn) -> TaskCallable:
        """``fn`` as a TaskCallable; the same plain function keeps the same wrapper."""
        if isinstance(fn, TaskCallable):
            return fn
        current = self._callable
        if isinstance(current, FunctionCallable) and current.fn is fn:
            return current  # so it is not shipped again with every task
        return FunctionCallable(fn)

    def _has_room(self, nbytes: int) -> bool:
        """Whether one more task fits the window of tasks and of bytes in flight."""
        if not self._open:
            return True
        return (len(self._open) < self.max_in_flight
                and self._bytes_open + nbytes <= self.max_bytes_in_flight)

    def get_results(self):
        """Wait for every open task; return ``result_container.get_results()``.

        The first error of the batch is raised here (or by ``add_task``) as a
        labkit error naming where it happened; open tasks are cancelled.
        """
        try:
            self._wait(lambda: not self._open)
        except BaseException:  # e.g. KeyboardInterrupt in a notebook: leave nothing running
            self.cancel()
            raise
        self._raise_pending()
        self._batch_index = 0
        return self.result_container.get_results()

    def cancel(self) -> int:
        """Cancel the open tasks and drop partial results; returns how many were open."""
        with self._cond:
            handles = [entry.handle for entry in self._open.values()]
            self._open.clear()
            self._bytes_open = 0
            self._error = None
            self._cond.notify_all()
        self._cancel_handles([h for h in handles if h is not None])
        self.result_container.discard()
        self._batch_index = 0
        return len(handles)

    def exclusive(self) -> "threading.RLock":
        """A lock to hold while using the scheduler for one batch of tasks.

        A scheduler has one result container and one batch at a time, so runs
        that share it (two ``wait=False`` runs, say) take turns per phase.
        """
        return self._batch_lock

    def on_shutdown(self, fn: Callable[[], Any]) -> None:
        """Call ``fn()`` when the scheduler shuts down (views stop their servers so)."""
        self._shutdown_callbacks.append(fn)

    def shutdown(self) -> None:
        """Cancel what is open and release the backend; idempotent."""
        if self._closed:
            return
        self.cancel()
        self._closed = True
        for fn in self._shutdown_callbacks:
            try:
                fn()
            except Exception:  # a view must never stop a shutdown
                logger.exception("labkit shutdown callback %r failed", fn)
        self._close()

    @property
    def closed(self) -> bool:
        """Whether the scheduler was shut down."""
        return self._closed

    def __repr__(self):
        state = "shut down" if self.closed else f"{self.n_open_tasks} open tasks"
        return f"<{type(self).__name__}: {state}>"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()

    # -- for backends ------------------------------------------------------------

    def _task_done(self, info: TaskInfo, outcome: TaskOutcome | None = None,
                   error: BaseException | None = None) -> None:
        """Record one completed task, exactly once; any thread may call this."""
        with self._cond:
            entry = self._open.pop(info.task, None)
            if entry is None:
                return  # already completed, or its batch was cancelled
            self._bytes_open -= entry.nbytes
            if error is None:
                try:
                    self.result_container.add_result(outcome.result, info.chunk)
                except Exception as exc:  # a join that fails names the task too
                    error = _as_labkit_error(exc, info, outcome.worker)
            if error is not None and self._error is None:
                self._error = error
            self._cond.notify_all()
        if error is None:
            self.emit(TaskFinished(info, outcome.worker, outcome.start, outcome.end,
                                   outcome.n_samples))
        else:
            self._emit_failure(info, error)

    def _emit_failure(self, info: TaskInfo, error: BaseException) -> None:
        where = getattr(error, "where", {})
        self.emit(TaskFailed(info, where.get("worker"), None, None,
                             getattr(error, "original_type", None) or type(error).__name__,
                             str(error), getattr(error, "remote_traceback", None)))

    def _task_info(self, info: TaskInfo | None) -> TaskInfo:
        task_id = next(self._task_ids)
        chunk = self._batch_index
        self._batch_index += 1
        if info is None:
            return TaskInfo(run=self._run, task=task_id, chunk=chunk)
        return dataclasses.replace(info, task=task_id)

    def _wait(self, ready: Callable[[], bool]) -> None:
        with self._cond:
            while not ready() and self._error is None:
                self._cond.wait()

    def _raise_pending(self) -> None:
        with self._cond:
            error, self._error = self._error, None
        if error is not None:
            self.cancel()
            raise error

    def _check_usable(self) -> None:
        if self._closed:
            raise SchedulerError(f"{type(self).__name__} is shut down")

    # -- what a backend implements ------------------------------------------------

    def _use_callable(self, task_callable: TaskCallable) -> None:
        """Ship a new callable to where tasks run (once, not per task)."""

    def _submit(self, data, entry: "OpenTask"):
        """Start one task; return a handle that ``_cancel_handles`` understands."""
        raise NotImplementedError

    def _cancel_handles(self, handles: list) -> None:
        """Cancel started tasks."""

    def _close(self) -> None:
        """Release the backend."""


def _nbytes(data) -> int:
    """Bytes of client-side array data in a chunk (0 for futures and delayed)."""
    if isinstance(data, tuple):
        return sum(_nbytes(part) for part in data)
    return int(getattr(data, "nbytes", 0) or 0) if hasattr(data, "__array__") else 0


def _as_labkit_error(exc: BaseException, info: TaskInfo, worker: str | None) -> LabkitError:
    """A labkit error located at ``info``; other exceptions become TaskError."""
    if type(exc).__name__ == "CancelledError" and not isinstance(exc, LabkitError):
        return CancelledError("task was cancelled outside labkit", **info.where(), worker=worker)
    return located(exc, **info.where(), worker=worker)
