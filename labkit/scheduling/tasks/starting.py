"""Starting a batch's tasks: one at a time, or together where they are all at hand.

Each :class:`~labkit.scheduling.tasks.batch.Batch` holds a :class:`TaskStarter`,
which does its ``add_task`` and ``add_tasks`` and owns what starting needs: the
batch's current callable (shipped once), its next chunk number and its task
template.  It asks the batch only what :class:`StartingBatch` declares.  A task
is first *opened* (counted against the batch's share of the windows, once
there is room) and then *started* by the scheduler's backend.  Tasks opened together start in one call where the
backend can (``Scheduler.start_tasks``: one ``client.map`` for Dask workers
that are threads of this process), which costs the client one graph update
instead of one a task.  A task that cannot start is dropped, never counted
as open, and the error names its chunk.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from ...constraints import Callable as IsCallable
from ...constraints import InstanceOf, check_argument
from ...errors import InputError, LabkitError, SchedulerError, pulled
from ...events import TaskFailed, TaskInfo, TaskSubmitted
from .callables import FunctionCallable, TaskCallable
from .open_task import OpenTask, TaskOwner
from .pickling import pickling_cause, root_cause
from .window import Share

__all__ = ["TaskStarter", "StartingBatch", "GROUP_MAX", "chunk_nbytes"]

#: What a batch's ``task_callable`` may be.
TASK_CALLABLE = [InstanceOf(TaskCallable, "a TaskCallable"), IsCallable()]

#: Most tasks :meth:`TaskStarter.add_tasks` starts in one call to the backend.
GROUP_MAX = 64


@runtime_checkable
class StartingBatch(TaskOwner, Protocol):
    """What a :class:`TaskStarter` asks of the batch it starts tasks for."""

    #: The batch's share of the scheduler's windows.
    share: Share

    @property
    def failed(self) -> bool:
        """Whether the batch holds an error (a task's, a cancel's) not raised yet."""
        ...

    def check_open(self) -> None:
        """Raise a ``SchedulerError`` once the batch is closed."""
        ...

    def check(self) -> None:
        """Raise the batch's pending error, if any."""
        ...

    def count_open(self, entry: OpenTask) -> None:
        """Count ``entry`` open in the batch's share (the window's lock is held)."""
        ...

    def drop(self, entry: OpenTask) -> None:
        """Forget a task that could not start: it was never open."""
        ...


class TaskStarter:
    """Opens and starts a batch's tasks (see the module docstring).

    Parameters
    ----------
    scheduler : Scheduler
        Where the tasks start (its backend verbs, its window, its events).
    batch : StartingBatch
        The batch the tasks belong to.
    template : TaskInfo
        What every task of the batch belongs to; each gets its own task id and chunk.
    as_run : BatchRun, optional
        The batch as a run of its own (a user's tasks), whose cycles its tasks carry.
    """

    def __init__(self, scheduler, batch: StartingBatch, template: TaskInfo, as_run=None):
        self.scheduler = scheduler
        self.window = scheduler.window
        # Weakly: the batch holds its starter, and a batch nobody holds (a finished
        # thread's default batch) must go at once, its shipped callable with it.
        self._batch = weakref.ref(batch)
        self.as_run = as_run
        #: What the batch's next task belongs to (its run changes with each cycle).
        self.template = template
        #: The next chunk number (the window's lock guards it; a new cycle starts at 0).
        self.next_chunk = 0
        #: The batch's current callable, and the handle its backend shipped it as.
        self.callable: TaskCallable | None = None
        self.shipped: Any = None
        self.ship_lock = threading.Lock()

    @property
    def batch(self) -> StartingBatch:
        """The batch the tasks belong to."""
        batch = self._batch()
        if batch is None:  # only a caller of the batch's own verbs gets here: it holds it
            raise SchedulerError("the batch of these tasks is gone")
        return batch

    def add_task(
        self,
        data,
        task_callable: TaskCallable | Callable | None = None,
        info: TaskInfo | None = None,
    ) -> int:
        """Open one task, once the window has room, and start it; its task id."""
        __tracebackhide__ = True
        entry = self.open_task(data, task_callable, info)
        self.start([(entry, data)])
        return entry.info.task

    def add_tasks(
        self,
        chunks,
        task_callable: TaskCallable | Callable | None = None,
        *,
        ready: bool = False,
        check: Callable[[], Any] | None = None,
    ) -> int:
        """Open and start a task for each chunk, in groups when ``ready``; how many."""
        __tracebackhide__ = True
        group: list = []
        count = 0
        try:
            for chunk in pulled(chunks, "chunk", "the chunks given to add_tasks"):
                if check is not None:
                    check()
                nbytes = chunk_nbytes(chunk)
                if group and not (
                    ready
                    and len(group) < GROUP_MAX
                    and self.window.has_room(self.batch.share, nbytes)
                ):
                    started, group = group, []  # start drops what it could not start
                    self.start(started)
                # a full window refills in groups, not one task as each one ends
                spare = GROUP_MAX - 1 if ready and not group else 0
                group.append((self.open_task(chunk, task_callable, None, nbytes, spare), chunk))
                task_callable = None  # shipped with the first task
                count += 1
            started, group = group, []
            if started:
                self.start(started)
        finally:
            for entry, _ in group:  # opened, never started: an error stopped the loop
                self.batch.drop(entry)
        return count

    def open_task(
        self, data, task_callable, info, nbytes: int | None = None, spare: int = 0
    ) -> OpenTask:
        """Count one task open once the window has room (it is not started yet).

        ``spare``: wait until there is room for that many more (see ``Window.has_room``).
        """
        __tracebackhide__ = True
        s, window, batch = self.scheduler, self.window, self.batch
        s.check_usable()
        batch.check_open()
        batch.check()
        if task_callable is not None:
            self.use(task_callable)
        if self.callable is None:
            raise SchedulerError("add_task needs a task_callable (none was given yet)")
        nbytes = chunk_nbytes(data) if nbytes is None else nbytes
        window.wait(lambda: window.has_room(batch.share, nbytes, spare) or batch.failed or s.closed)
        s.check_usable()
        batch.check()
        if self.as_run is not None and info is None:
            run = self.as_run.opening()  # a new cycle: its tasks carry the cycle's run
            if run is not None:
                self.template = dataclasses.replace(
                    self.template, run=run, node_name=self.as_run.name
                )
        entry = OpenTask(self._next_info(info), batch, self.callable, self.shipped, nbytes)
        with window.lock:
            batch.count_open(entry)
        return entry

    def start(self, group: list) -> None:
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
        if self.batch.failed:  # a cancel or a failure came (cancelling a done task is harmless)
            late = [entry for entry, _ in group if not entry.is_open()]
            if late:
                s.cancel_tasks(late, [])
        self.batch.check()

    def _fail_start(self, unstarted: list, exc: Exception):
        """Drop tasks that could not start; raise the error naming the first one's chunk."""
        __tracebackhide__ = True
        error = _submit_error(exc, unstarted[0][0].info)
        for entry, _ in unstarted:
            self.batch.drop(entry)
            self.scheduler.emit(
                TaskFailed(entry.info, None, None, None, type(exc).__name__, str(error))
            )
        raise error from exc

    def use(self, task_callable) -> None:
        """Make ``task_callable`` the batch's; ship it once if it is new."""
        tc = self._as_task_callable(task_callable)
        if tc is self.callable:
            return
        shipped = self.scheduler.ship_callable(tc)
        with self.ship_lock:
            old, self.callable, self.shipped = self.shipped, tc, shipped
        if old is not None:
            self.scheduler.release_callable(old)

    def _as_task_callable(self, fn) -> TaskCallable:
        """``fn`` as a TaskCallable; the same plain function keeps the same wrapper."""
        if isinstance(fn, TaskCallable):
            return fn
        check_argument("task_callable", fn, TASK_CALLABLE)
        current = self.callable
        if isinstance(current, FunctionCallable) and current.fn is fn:
            return current  # so it is not shipped again with every task
        return FunctionCallable(fn)

    def _next_info(self, info: TaskInfo | None) -> TaskInfo:
        """``info`` (or the template at the next chunk) with a new task id."""
        task = self.scheduler.new_task_id()
        if info is not None:
            return dataclasses.replace(info, task=task)
        with self.window.lock:
            chunk, self.next_chunk = self.next_chunk, self.next_chunk + 1
        return dataclasses.replace(self.template, task=task, chunk=chunk)

    def shipped_callable(self, entry: OpenTask):
        """The shipped callable of ``entry``, shipped again if its holders were lost."""
        s = self.scheduler
        with self.ship_lock:
            if entry.shipped is not None and s.callable_alive(entry.shipped):
                return entry.shipped
            fresh = s.ship_callable(entry.callable)
            if entry.callable is self.callable:
                old, self.shipped = self.shipped, fresh
                if old is not None:
                    s.release_callable(old)
            entry.shipped = fresh
            return fresh

    def release_callable(self) -> None:
        """Give back the batch's shipped callable (the batch closes)."""
        shipped, self.shipped = self.shipped, None
        if shipped is not None:
            self.scheduler.release_callable(shipped)


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
