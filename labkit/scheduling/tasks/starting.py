"""Starting a batch's tasks: one at a time, or together where they are all at hand.

:class:`StartsTasks` gives :class:`~labkit.scheduling.tasks.batch.Batch` its
``add_task`` and ``add_tasks``.  A task is first *opened* (counted against the
batch's share of the windows, once there is room) and then *started* by the
scheduler's backend.  Tasks opened together start in one call where the
backend can (``Scheduler.start_tasks``: one ``client.map`` for Dask workers
that are threads of this process), which costs the client one graph update
instead of one a task.  A task that cannot start is dropped, never counted
as open, and the error names its chunk.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, cast

from ...constraints import Callable as IsCallable
from ...constraints import InstanceOf, check_argument
from ...errors import InputError, LabkitError, SchedulerError, pulled
from ...events import TaskFailed, TaskInfo, TaskSubmitted
from .callables import FunctionCallable, TaskCallable
from .open_task import OpenTask, TaskOwner
from .pickling import pickling_cause, root_cause

__all__ = ["StartsTasks", "GROUP_MAX", "chunk_nbytes"]

#: What a batch's ``task_callable`` may be.
TASK_CALLABLE = [InstanceOf(TaskCallable, "a TaskCallable"), IsCallable()]

#: Most tasks :meth:`StartsTasks.add_tasks` starts in one call to the backend.
GROUP_MAX = 64


class StartsTasks:
    """``add_task`` and ``add_tasks`` of a batch (see the module docstring)."""

    # What a Batch holds (see batch.py), declared for the type checker.
    scheduler: Any
    window: Any
    as_run: Any
    _share: Any
    _error: BaseException | None
    _submitted: int
    _next_chunk: int
    _callable: TaskCallable | None
    _shipped: Any
    _template: TaskInfo
    _ship_lock: Any
    _drop: Callable[[OpenTask], Any]
    _check_open: Callable[[], None]
    _raise_pending: Callable[[], None]

    def add_task(
        self,
        data,
        task_callable: TaskCallable | Callable | None = None,
        info: TaskInfo | None = None,
    ) -> int:
        """Submit one task; waits while the batch's share of the window is full.

        Parameters
        ----------
        data
            The chunk: an array, a tuple, or (on Dask) a future or delayed.
        task_callable : TaskCallable or callable, optional
            Used for this and later tasks of the batch; the last one given when
            ``None``.  A new callable is shipped to the workers once, not per task.
        info : TaskInfo, optional
            Where the task belongs; the batch's own, at the next chunk, by default.

        Returns
        -------
        int
            The task id.

        Raises
        ------
        LabkitError
            The batch's first error (a task's, a cancel's), or an error naming
            this chunk when it cannot be shipped; a chunk that could not be
            shipped is not counted as open.
        """
        __tracebackhide__ = True
        entry = self._open_task(data, task_callable, info)
        self._start([(entry, data)])
        return entry.info.task

    def add_tasks(
        self,
        chunks,
        task_callable: TaskCallable | Callable | None = None,
        *,
        ready: bool = False,
        check: Callable[[], Any] | None = None,
    ) -> int:
        """Submit a task for every chunk of ``chunks``; how many were submitted.

        Parameters
        ----------
        chunks : iterable
            The chunks, pulled one by one.
        task_callable : TaskCallable or callable, optional
            As for :meth:`add_task`.
        ready : bool
            The chunks are all at hand (a list, a Dask array's blocks): the
            tasks that fit in the window start together, in one call to the
            backend where it can (one ``client.map`` for in-process Dask
            workers) instead of one call each.  Leave it ``False`` for chunks
            made on demand, which should start as soon as each is made.
        check : callable, optional
            Called before each chunk is pulled (say, a run's cancel check).

        Examples
        --------
        >>> from labkit.scheduling import LocalScheduler
        >>> with LocalScheduler() as s, s.batch() as b:
        ...     b.add_tasks(range(4), lambda v: v + 1, ready=True)
        ...     sorted(b.get_results())
        4
        [1, 2, 3, 4]
        """
        __tracebackhide__ = True
        group: list = []
        count = 0
        try:
            for chunk in pulled(chunks, "chunk", "the chunks given to add_tasks"):
                if check is not None:
                    check()
                nbytes = chunk_nbytes(chunk)
                if group and not (
                    ready and len(group) < GROUP_MAX and self.window.has_room(self._share, nbytes)
                ):
                    started, group = group, []  # _start drops what it could not start
                    self._start(started)
                # a full window refills in groups, not one task as each one ends
                spare = GROUP_MAX - 1 if ready and not group else 0
                group.append((self._open_task(chunk, task_callable, None, nbytes, spare), chunk))
                task_callable = None  # shipped with the first task
                count += 1
            started, group = group, []
            if started:
                self._start(started)
        finally:
            for entry, _ in group:  # opened, never started: an error stopped the loop
                self._drop(entry)
        return count

    def _open_task(
        self, data, task_callable, info, nbytes: int | None = None, spare: int = 0
    ) -> OpenTask:
        """Count one task open once the window has room (it is not started yet).

        ``spare``: wait until there is room for that many more (see ``Window.has_room``).
        """
        __tracebackhide__ = True
        s, window = self.scheduler, self.window
        s.check_usable()
        self._check_open()
        self._raise_pending()
        if task_callable is not None:
            self._use(task_callable)
        if self._callable is None:
            raise SchedulerError("add_task needs a task_callable (none was given yet)")
        nbytes = chunk_nbytes(data) if nbytes is None else nbytes
        window.wait(
            lambda: (
                window.has_room(self._share, nbytes, spare) or self._error is not None or s.closed
            )
        )
        s.check_usable()
        self._raise_pending()
        if self.as_run is not None and info is None:
            run = self.as_run.opening()  # a new cycle: its tasks carry the cycle's run
            if run is not None:
                self._template = dataclasses.replace(
                    self._template, run=run, node_name=self.as_run.name
                )
        batch = cast(TaskOwner, self)  # the mixin is only ever a Batch
        entry = OpenTask(self._next_info(info), batch, self._callable, self._shipped, nbytes)
        with window.lock:
            window.open(self._share, entry.info.task, entry, nbytes)
            self._submitted += 1
        return entry

    def _start(self, group: list) -> None:
        """Start opened tasks, ``[(entry, data), ...]``: all in one call where the backend can.

        A task that cannot start is dropped (it was never open), and so are the
        ones of the group after it; the error names its chunk.
        """
        __tracebackhide__ = True
        s = self.scheduler
        for entry, _ in group:
            s.emit(TaskSubmitted(entry.info))
        try:
            handles = s.start_tasks(group) if len(group) > 1 else None
        except Exception as exc:
            self._fail_start(group, exc)
        for index, (entry, data) in enumerate(group):
            if handles is not None:
                handle = handles[index]
            else:
                try:
                    handle = s.start_task(entry, data)
                except Exception as exc:
                    self._fail_start(group[index:], exc)
            if handle is not None:
                entry.handle = handle
        # A cancel while they were being started read no handle (or their route's copies
        # were not made yet): take those back now.  Set first, checked after, so one of
        # the two sides always sees the other.
        if (
            self._error is not None
        ):  # a cancel or a failure came (cancelling a done task is harmless)
            late = [entry for entry, _ in group if not entry.is_open()]
            if late:
                s.cancel_tasks(late, [])
        self._raise_pending()

    def _fail_start(self, unstarted: list, exc: Exception):
        """Drop tasks that could not start; raise the error naming the first one's chunk."""
        __tracebackhide__ = True
        error = _submit_error(exc, unstarted[0][0].info)
        for entry, _ in unstarted:
            self._drop(entry)
            self.scheduler.emit(
                TaskFailed(entry.info, None, None, None, type(exc).__name__, str(error))
            )
        raise error from exc

    def _use(self, task_callable) -> None:
        """Make ``task_callable`` the batch's; ship it once if it is new."""
        tc = self._as_task_callable(task_callable)
        if tc is self._callable:
            return
        shipped = self.scheduler.ship_callable(tc)
        with self._ship_lock:
            old, self._callable, self._shipped = self._shipped, tc, shipped
        if old is not None:
            self.scheduler.release_callable(old)

    def _as_task_callable(self, fn) -> TaskCallable:
        """``fn`` as a TaskCallable; the same plain function keeps the same wrapper."""
        if isinstance(fn, TaskCallable):
            return fn
        check_argument("task_callable", fn, TASK_CALLABLE)
        current = self._callable
        if isinstance(current, FunctionCallable) and current.fn is fn:
            return current  # so it is not shipped again with every task
        return FunctionCallable(fn)

    def _next_info(self, info: TaskInfo | None) -> TaskInfo:
        task = self.scheduler.new_task_id()
        if info is not None:
            return dataclasses.replace(info, task=task)
        with self.window.lock:
            chunk, self._next_chunk = self._next_chunk, self._next_chunk + 1
        return dataclasses.replace(self._template, task=task, chunk=chunk)


def chunk_nbytes(data) -> int:
    """Bytes of client-side array data in a chunk (0 for futures and delayed)."""
    if isinstance(data, tuple):
        return sum(chunk_nbytes(part) for part in data)
    return int(getattr(data, "nbytes", 0) or 0) if hasattr(data, "__array__") else 0


def _submit_error(exc: BaseException, info: TaskInfo) -> LabkitError:
    """A chunk that could not be shipped: bad input when it cannot be pickled."""
    if isinstance(exc, LabkitError):
        return exc.locate(**info.where())
    root = root_cause(exc)
    text = f"{type(root).__name__}: {root}"
    if pickling_cause(exc) is not None:
        return InputError(
            f"chunk {info.chunk} could not be sent to the workers ({text}); nothing was submitted",
            **info.where(),
        )
    return SchedulerError(
        f"chunk {info.chunk} could not be submitted ({text}); nothing was submitted", **info.where()
    )
