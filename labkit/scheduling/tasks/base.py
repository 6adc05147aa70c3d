"""The scheduler base: batches of tasks sharing bounded in-flight windows.

Work reaches a scheduler in :class:`~labkit.scheduling.tasks.batch.Batch` es: each
owner (a flow's phase, an ensemble's layer, a program's Spawn, a user's own
loop) opens one with :meth:`Scheduler.batch` and gets its own results, its
own first error and its own cancel, while sharing the cluster with every
other batch.  The seed's verbs on the scheduler itself (``add_task``,
``get_results``, ``result_container``, ``n_open_tasks``) use the calling
thread's default batch.

Each batch keeps at most its share of ``max_in_flight`` tasks (and of
``max_bytes_in_flight`` bytes of client-side chunks) open: ``add_task`` waits
on a condition variable, no polling, so a caller that pulls chunks from a
stream trains in bounded memory.  That accounting lives in one
:class:`~labkit.scheduling.tasks.window.Window` per scheduler.  Backends report
each finished task through :meth:`Scheduler.record`, the one path by which an
outcome reaches its batch (exactly once).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from ...errors import CancelledError, SchedulerError, located, require_callable
from ...events import Observable, TaskFailed, TaskFinished, TaskInfo
from ..dask.connect import check_limit
from ..dask.dask_adapter import is_cancelled
from .batch import Batch
from .callables import TaskCallable
from .open_task import OpenTask
from .results import ListResultContainer, ResultContainer, check_container
from .window import Window

__all__ = ["Scheduler", "as_labkit_error"]

logger = logging.getLogger("labkit.scheduling")


class Scheduler(Observable):
    """Runs task callables on chunks of data; subclasses say where.

    Parameters
    ----------
    result_container : ResultContainer, optional
        The default batch's container (of the thread that makes the
        scheduler; other threads' default batches get a fresh one of the same
        class); a :class:`ListResultContainer` by default.
    max_in_flight : int, optional
        Most tasks open at once, shared evenly by the batches that have tasks open.
    max_bytes_in_flight : int, optional
        Most bytes of chunk data held by open tasks (128 MiB by default),
        shared the same way; a single task larger than a share still runs, alone.

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

    def __init__(
        self,
        result_container: ResultContainer | None = None,
        max_in_flight: int | None = None,
        max_bytes_in_flight: int | None = None,
    ):
        check_container(result_container)
        check_limit("max_in_flight", max_in_flight)
        check_limit("max_bytes_in_flight", max_bytes_in_flight)
        self.window = Window(
            max_in_flight or self.default_max_in_flight,
            max_bytes_in_flight or self.default_max_bytes_in_flight,
        )
        self._task_ids = itertools.count()
        self._closed = False
        self._shutdown_callbacks: list[Callable[[], Any]] = []
        self._runs: dict[str, Any] = {}  # run id -> what views read of it, in start order
        self._container_class = (
            type(result_container) if result_container is not None else ListResultContainer
        )
        self._local = threading.local()
        self._local.batch = Batch(self, result_container, default=True)

    @property
    def max_in_flight(self) -> int:
        """Most tasks open at once, over every batch."""
        return self.window.max_in_flight

    @max_in_flight.setter
    def max_in_flight(self, value: int) -> None:
        check_limit("max_in_flight", value, allow_none=False)
        self.window.max_in_flight = value

    @property
    def max_bytes_in_flight(self) -> int:
        """Most bytes of client-side chunks held by open tasks, over every batch."""
        return self.window.max_bytes_in_flight

    # -- batches -----------------------------------------------------------------------

    def batch(
        self,
        result_container: ResultContainer | None = None,
        info: TaskInfo | None = None,
        control=None,
        name: str | None = None,
        total: int | None = None,
    ) -> Batch:
        """A new batch of tasks on this scheduler; use it in a ``with`` block.

        Parameters
        ----------
        result_container : ResultContainer, optional
            Where the batch's results go (a :class:`ListResultContainer` by default).
        info : TaskInfo, optional
            What the batch's tasks belong to (run, kind, node, phase), for
            events and errors.
        control : RunControl, optional
            The run owning the batch: cancelling the run cancels the batch.
        name : str, optional
            What a board calls the batch's tasks (``"tasks"`` by default).
        total : int, optional
            How many tasks a cycle of the batch has, when you know it: a board
            shows ``done/total``.
        """
        self.check_usable()
        return Batch(self, result_container, info, control, name=name, total=total)

    def _default_batch(self) -> Batch:
        """The calling thread's default batch (the seed's verbs use it)."""
        batch = getattr(self._local, "batch", None)
        if batch is None:
            batch = self._local.batch = Batch(self, self._fresh_container(), default=True)
        return batch

    def _fresh_container(self) -> ResultContainer:
        try:
            return self._container_class()
        except TypeError:  # a container that needs arguments: the plain one
            return ListResultContainer()

    def new_task_id(self) -> int:
        """A task id unique on this scheduler."""
        return next(self._task_ids)

    # -- the seed's verbs: the calling thread's default batch --------------------------

    @property
    def result_container(self) -> ResultContainer:
        """The container of the calling thread's default batch."""
        return self._default_batch().result_container

    @result_container.setter
    def result_container(self, container: ResultContainer) -> None:
        self._default_batch().result_container = check_container(container)

    @property
    def n_open_tasks(self) -> int:
        """Open tasks of the calling thread's default batch."""
        return self._default_batch().n_open_tasks

    @property
    def total_open_tasks(self) -> int:
        """Open tasks of every batch on this scheduler."""
        return self.window.total_open()

    def add_task(
        self,
        data,
        task_callable: TaskCallable | Callable | None = None,
        info: TaskInfo | None = None,
    ) -> int:
        """Submit one task to the default batch (see :meth:`Batch.add_task`)."""
        __tracebackhide__ = True
        return self._default_batch().add_task(data, task_callable, info)

    def add_tasks(self, chunks, task_callable=None, *, ready: bool = False) -> int:
        """Submit a task a chunk to the default batch; how many (see :meth:`Batch.add_tasks`).

        With ``ready=True`` (the chunks are all at hand) the tasks start in groups,
        one call to the backend a group, as ``client.map`` does.
        """
        __tracebackhide__ = True
        return self._default_batch().add_tasks(chunks, task_callable, ready=ready)

    def get_results(self):
        """Wait for the default batch; its results (see :meth:`Batch.get_results`)."""
        __tracebackhide__ = True  # IPython leaves labkit's frames out of tracebacks
        return self._default_batch().get_results()

    def cancel(self) -> int:
        """Cancel the open tasks of every batch; returns how many there were.

        Each batch's owner raises ``CancelledError`` at its next ``add_task`` or
        ``get_results`` (a run raises it from ``result()``); a batch with
        nothing submitted is not touched.
        """
        return sum(
            b.cancel(CancelledError("cancelled by scheduler.cancel()"))
            for b in self.window.owners()
        )

    def on_shutdown(self, fn: Callable[[], Any]) -> None:
        """Call ``fn()`` when the scheduler shuts down (views stop their servers so)."""
        require_callable(fn, "fn", "on_shutdown")
        self._shutdown_callbacks.append(fn)

    # -- the runs it carries --------------------------------------------------------------

    def hold_run(self, run_id: str, handle: Any) -> None:
        """Keep ``handle`` (what views read of the run ``run_id``: a sweep's live sweep).

        A run registers itself when it starts on this scheduler; views that see
        only a run's id in events (a dashboard) find it in :meth:`runs`, ended
        runs too, until the scheduler shuts down.  Nothing is kept once shut down.
        """
        with self.window.lock:
            if not self._closed:
                self._runs[run_id] = handle

    def runs(self) -> Mapping[str, Any]:
        """The runs started on this scheduler, by id, in start order, ended ones too (read-only).

        Empty once the scheduler is shut down.

        Examples
        --------
        >>> from labkit.scheduling import LocalScheduler
        >>> s = LocalScheduler()
        >>> s.hold_run("sweep-1", "its sweep"); dict(s.runs())
        {'sweep-1': 'its sweep'}
        >>> s.shutdown(); dict(s.runs())
        {}
        """
        with self.window.lock:
            return MappingProxyType(dict(self._runs))

    def shutdown(self) -> None:
        """Cancel every batch (their owners raise ``SchedulerError``), release the backend."""
        with self.window.lock:
            if self._closed:
                return
            self._closed = True
            batches = self.window.owners()
            self._runs.clear()  # what it held goes with it: ended sweeps are not kept alive
            self.window.lock.notify_all()
        for b in batches:
            b.cancel(
                SchedulerError(
                    f"{type(self).__name__} was shut down while the batch had tasks to finish"
                )
            )
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
        state = "shut down" if self.closed else f"{self.total_open_tasks} open tasks"
        return f"<{type(self).__name__}: {state}>"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()

    # -- for batches and backends: the one path of an outcome ----------------------------

    def record(self, entry: OpenTask, outcome=None, error: BaseException | None = None) -> None:
        """Record one completed task in its batch, exactly once, and announce it."""

        def announce(error):
            if error is None:
                self.emit(
                    TaskFinished(
                        entry.info, outcome.worker, outcome.start, outcome.end, outcome.n_samples
                    )
                )
            else:
                where = getattr(error, "where", {})
                self.emit(
                    TaskFailed(
                        entry.info,
                        where.get("worker"),
                        None,
                        None,
                        getattr(error, "original_type", None) or type(error).__name__,
                        str(error),
                        getattr(error, "remote_traceback", None),
                    )
                )

        entry.batch.record(entry, outcome, error, announce)

    def check_usable(self) -> None:
        """Raise a ``SchedulerError`` once the scheduler is shut down."""
        if self._closed:
            raise SchedulerError(f"{type(self).__name__} is shut down")

    # -- workers -------------------------------------------------------------------------

    @property
    def in_process(self) -> bool:
        """Whether tasks run in this process (they see chunks by reference, and no
        worker can be lost without the client)."""
        return True

    def run_on_workers(self, fn: Callable[..., Any], *args) -> dict[str, Any]:
        """Call ``fn(*args)`` once on every worker, outside any task; results by worker.

        Workers lost on the way are left out.  ``fn`` may take a ``dask_worker``
        keyword (the Dask worker it runs on; ``None`` here).

        Examples
        --------
        >>> from labkit.scheduling import LocalScheduler
        >>> LocalScheduler().run_on_workers(lambda: 42)
        {'local': 42}
        """
        self.check_usable()
        return {"local": fn(*args)}

    # -- what a backend implements (batches call these) ------------------------------------

    def ship_callable(self, task_callable: TaskCallable):
        """Send a callable to where tasks run (once, not per task); a handle to it."""
        return task_callable

    def callable_alive(self, shipped) -> bool:
        """Whether a shipped callable is still there (its holders may be lost)."""
        return True

    def release_callable(self, shipped) -> None:
        """Drop a shipped callable nobody needs any more."""

    def start_task(self, entry: OpenTask, data):
        """Start one opened task; a handle to it, or ``None``."""
        raise NotImplementedError

    def start_tasks(self, group: list) -> list | None:
        """Start several opened tasks, ``[(entry, data), ...]``, in one call; their handles.

        ``None`` (the default): this backend starts them one by one with :meth:`start_task`.
        """
        return None

    def cancel_tasks(self, entries: list, handles: list) -> None:
        """Cancel open tasks (their batch forgot them) and other handles a batch tracked."""

    def _close(self) -> None:
        """Release the backend."""


def as_labkit_error(exc: BaseException, info: TaskInfo, worker: str | None):
    """A labkit error located at ``info``; other exceptions become TaskError."""
    if is_cancelled(exc) and not isinstance(exc, CancelledError):
        return CancelledError("task was cancelled outside labkit", **info.where(), worker=worker)
    return located(exc, **info.where(), worker=worker)
