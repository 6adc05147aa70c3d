"""A batch: the tasks of one owner on a shared scheduler.

A batch owns its result container, its share of the scheduler's in-flight
windows, its first error and its cancellation.  Tasks of different batches
never mix, and batches from several threads run on one scheduler at once.
A batch whose tasks did not all complete (a task failed, the batch or its run
was cancelled, the scheduler shut down, a worker was lost for good) raises in
its owner's next ``add_task`` or ``get_results``; it never hands over partial
results as if complete.  After raising, the batch is empty and usable again.

Examples
--------
>>> from labkit.scheduling import LocalScheduler, OrderedResultContainer
>>> with LocalScheduler() as s, s.batch(OrderedResultContainer()) as b:
...     for x in range(3):
...         _ = b.add_task(x, lambda v: v * 10)
...     b.get_results()
[0, 10, 20]
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

from ...errors import CancelledError, LabkitError, SchedulerError, for_caller, located
from ...events import TaskInfo
from .batch_runs import BatchRun
from .callables import TaskCallable
from .open_task import OpenTask
from .results import ListResultContainer, ResultContainer, check_container, discard
from .starting import TaskStarter

__all__ = ["Batch"]


class Batch:
    """Tasks of one owner: ``add_task``, ``get_results``, ``cancel``; use it with ``with``.

    Make one with :meth:`Scheduler.batch`.  It holds a
    :class:`~labkit.scheduling.tasks.starting.TaskStarter` (``starter``), which
    opens and starts its tasks and owns their callable and chunk numbers.

    Parameters
    ----------
    scheduler : Scheduler
    result_container : ResultContainer, optional
        A :class:`ListResultContainer` by default.
    info : TaskInfo, optional
        What every task of the batch belongs to (run, kind, node, phase); the
        batch numbers chunks 0, 1, 2... in the order tasks are added.
    control : RunControl, optional
        The run that owns the batch: cancelling the run cancels the batch.
    """

    def __init__(
        self,
        scheduler,
        result_container: ResultContainer | None = None,
        info: TaskInfo | None = None,
        control=None,
        default: bool = False,
        name: str | None = None,
        total: int | None = None,
    ):
        self.scheduler = scheduler
        self.result_container = (
            check_container(result_container)
            if result_container is not None
            else ListResultContainer()
        )
        template = info or TaskInfo(f"tasks-{uuid.uuid4().hex[:8]}", -1, -1)
        self.id = template.run
        self.window = scheduler.window  # one lock for every batch's book-keeping
        #: The batch's share of the scheduler's windows.
        self.share = self.window.join(self)
        self._results_lock = threading.RLock()  # the container is used by one thread at a time
        self._tracked: list = []  # backend handles made outside add_task
        self._error: BaseException | None = None
        self._submitted = 0  # tasks added since results were handed over
        self._default, self._closed = default, False
        self._control = control
        # a user's own tasks are runs of their own on a board (see .batch_runs)
        self.as_run = (
            BatchRun(scheduler, name or ("add_task" if default else "tasks"), total)
            if info is None
            else None
        )
        #: Opens and starts the batch's tasks (see :mod:`.starting`).
        self.starter = TaskStarter(scheduler, self, template, self.as_run)
        if control is not None:
            control.attach(self)

    # -- the owner's verbs ----------------------------------------------------------------

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
        return self.starter.add_task(data, task_callable, info)

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
        return self.starter.add_tasks(chunks, task_callable, ready=ready, check=check)

    @property
    def n_open_tasks(self) -> int:
        """Tasks of this batch submitted and not yet completed."""
        return self.window.n_open(self.share)

    def get_results(self):
        """Wait for every open task of the batch; hand over ``result_container.get_results()``.

        The batch's first error is raised here (or by ``add_task``) as a labkit
        error naming where it happened; open tasks are cancelled, and the batch
        starts afresh.
        """
        __tracebackhide__ = True
        self.check_open()
        try:
            self.window.wait(lambda: not self.window.n_open(self.share) or self._error is not None)
        except BaseException:  # e.g. KeyboardInterrupt in a notebook: leave nothing running
            self.cancel()
            raise
        self._raise_pending()
        with self._results_lock:
            # One step for a cancel from another thread (it takes this lock first): it
            # came before, and is raised, or comes after and finds nothing left to lose.
            with self.window.lock:
                cancelled = self._error is not None
                if not cancelled:
                    self._submitted, self.starter.next_chunk = 0, 0
            results = None if cancelled else self.result_container.get_results()
        if cancelled:
            self._raise_pending()  # raises: only the owner takes the error
        if self.as_run is not None:
            self.as_run.ended()
        return results

    def cancel(self, reason: LabkitError | None = None) -> int:
        """Cancel the batch's open tasks; its owner's next call raises ``reason``.

        ``reason`` is a ``CancelledError`` by default.  A default batch with
        nothing submitted since its results were last handed over has nothing
        to lose and is left as it is.  Returns how many tasks (tracked ones
        included) were open.
        """
        with self._results_lock:  # as in record: a result comes before the cancel or is dropped
            with self.window.lock:
                n_open = self.window.n_open(self.share) + len(self._tracked)
                lost = self._submitted > 0 or bool(self._tracked) or not self._default
                if lost and self._error is None and not self._closed:
                    self._error = reason or CancelledError(
                        f"the batch was cancelled with {n_open} task(s) open"
                    )
                entries, handles = self._clear()
                error = self._error
            # Now, not after the backend's cancel (a round trip to Dask): by then the owner
            # may have raised it and begun a new cycle, whose first results would go too.
            if lost:
                discard(self.result_container)
        self.scheduler.cancel_tasks(entries, handles)
        if self.as_run is not None and lost:  # the cycle ends now, not at the next call
            self.as_run.ended(error or CancelledError("the batch was cancelled"))
        return n_open

    def track(self, handles) -> None:
        """Cancel ``handles`` (backend futures made outside ``add_task``) with the batch.

        For owners that submit their own tasks (replicas pinned to workers): a
        cancel of the batch, its run or its scheduler then reaches them too;
        :meth:`check` raises the reason.  :meth:`untrack` them once done.
        """
        with self.window.lock:
            self._tracked.extend(handles)
            cancelled = self._error is not None or self._closed
        if cancelled:
            self.scheduler.cancel_tasks([], list(handles))

    def untrack(self, handles) -> None:
        """Stop tracking ``handles`` (they are done)."""
        ids = {id(h) for h in handles}
        with self.window.lock:
            self._tracked = [h for h in self._tracked if id(h) not in ids]

    def check(self) -> None:
        """Raise the batch's pending error (a cancel, a task's failure), if any."""
        self._raise_pending()

    def close(self) -> None:
        """Cancel what is still open and leave the scheduler; idempotent."""
        if self._closed:
            return
        with self.window.lock:
            entries, handles = self._clear()
            self._closed = True
        self.scheduler.cancel_tasks(entries, handles)
        with self._results_lock:
            discard(self.result_container)
        if self._control is not None:
            self._control.detach(self)
        if self.as_run is not None:
            self.as_run.ended(
                CancelledError("the batch was closed with tasks open") if self._submitted else None
            )
        self.window.leave(self.share)
        self.starter.release_callable()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<labkit Batch {self.id}: {self.n_open_tasks} open tasks>"

    # -- for the scheduler and its backends --------------------------------------------------

    def is_open(self, entry: OpenTask) -> bool:
        """Whether ``entry`` still waits for its outcome (not recorded, not cancelled)."""
        return self.window.is_open(self.share, entry.info.task, entry)

    def record(
        self,
        entry: OpenTask,
        outcome=None,
        error: BaseException | None = None,
        announce: Callable[[BaseException | None], Any] | None = None,
    ):
        """Record one completed task, exactly once: ``(recorded, its error or None)``.

        ``announce(error)`` runs once the result is recorded and before the owner
        is woken, so a run never ends before the events of its own tasks.
        """
        with self._results_lock:
            if not self.is_open(entry):
                return False, None  # already completed, or its batch was cancelled
            if error is None:
                try:
                    self.result_container.add_result(outcome.result, entry.info.chunk)
                except Exception as exc:  # a join that fails names the task too
                    error = located(exc, **entry.info.where(), worker=outcome.worker)
            if announce is not None:
                announce(error)
            with self.window.lock:
                if error is not None and self._error is None:
                    self._error = error
                self.window.close(self.share, entry.info.task, entry)
        return True, error

    def shipped_callable(self, entry: OpenTask):
        """The shipped callable of ``entry``, shipped again if its holders were lost."""
        return self.starter.shipped_callable(entry)

    # -- what its task starter asks of it (see starting.StartingBatch) ------------------------

    @property
    def failed(self) -> bool:
        """Whether the batch holds an error (a task's, a cancel's) not raised yet."""
        return self._error is not None

    def count_open(self, entry: OpenTask) -> None:
        """Count ``entry`` open in the batch's share (the window's lock is held)."""
        self.window.open(self.share, entry.info.task, entry, entry.nbytes)
        self._submitted += 1

    def drop(self, entry: OpenTask) -> None:
        """Forget a task whose submission failed: it was never open."""
        with self.window.lock:
            if self.window.close(self.share, entry.info.task, entry):
                self._submitted -= 1

    def check_open(self) -> None:
        """Raise a ``SchedulerError`` once the batch is closed."""
        if self._closed:
            raise SchedulerError(f"batch {self.id} is closed")

    # -- internals ---------------------------------------------------------------------------

    def _clear(self) -> tuple[list, list]:
        """Forget every open task (under the lock): the entries and tracked handles, to cancel."""
        handles, self._tracked = self._tracked, []
        return self.window.clear(self.share), handles

    def _raise_pending(self) -> None:
        """Raise the batch's first error, after cancelling what is open and starting afresh."""
        __tracebackhide__ = True
        with self.window.lock:
            error, self._error = self._error, None
            if error is None:
                return
            entries, handles = self._clear()
            self._submitted, self.starter.next_chunk = 0, 0
        self.scheduler.cancel_tasks(entries, handles)
        with self._results_lock:
            discard(self.result_container)
        raise for_caller(error) from error.__cause__
