"""How a :class:`~labkit.scheduling.DaskScheduler` hands its tasks to their routes.

A scheduler holds one :class:`Dispatcher`: the routes (:mod:`.transport`,
:mod:`.routes`), chosen once when the scheduler opens, and what is done with
them.  It walks them for each task, keeps each task's data until it is done
(a task whose inputs die with their worker is sent again by its route),
releases what a route holds when the task ends, and cancels.  Its inputs are
explicit: the client, the outcomes, the window and the scheduler's ``record``.
The scheduler's own module keeps only its life cycle and what a fault means.

Examples
--------
Routes are tried in order; the first that takes a chunk sends it::

    with DaskScheduler(mode="threads") as s:
        s.route("in-process")       # <InProcessRoute 'in-process'>
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

from ..dask.connect import cancel_futures, scatter_everywhere
from ..dask.dask_adapter import SHIPPED_PREFIX
from ..tasks.base import as_labkit_error
from ..tasks.open_task import OpenTask
from ..tasks.pickling import unpicklable_part
from ..tasks.window import Window
from . import routes  # noqa: F401  (registers the built-in routes)
from .outcomes import Outcomes
from .transport import PASS, ClusterTraits, RouteContext, Transport, open_routes

__all__ = ["Dispatcher"]

logger = logging.getLogger("labkit.scheduling")


class Dispatcher:
    """A scheduler's routes: starts, releases, cancels and resubmits tasks through them.

    Parameters
    ----------
    client : distributed.Client
    outcomes : Outcomes
        Where every route reports what became of its tasks.
    window : Window
        The scheduler's window (its lock makes a resubmission and a cancel one step).
    record : callable
        The scheduler's ``record(entry, outcome=None, error=None)``: a task's outcome to its batch.
    traits : ClusterTraits
        What the cluster is: it chooses the routes, once.
    direct_bytes : int
        From how many bytes a chunk goes straight to a worker process.
    run_options : callable
        ``() -> (start topic or None, offload token or None)`` for each task.
    workers : tuple of str, optional
        The only workers tasks and their chunks may go to (None: any).
    """

    def __init__(
        self,
        client,
        outcomes: Outcomes,
        window: Window,
        record: Callable[..., None],
        traits: ClusterTraits,
        direct_bytes: int,
        run_options: Callable[[], tuple],
        workers: tuple | None = None,
    ):
        self.client, self.window, self.record = client, window, record
        placement: dict[str, Any] = {}
        if workers is not None:
            placement = {"workers": list(workers), "allow_other_workers": False}
        #: What the routes need of their scheduler.
        self.context = RouteContext(client, outcomes, run_options, direct_bytes, placement)
        #: The routes tasks take, in the order they are tried.
        self.routes: list[Transport] = open_routes(traits, self.context)

    @property
    def direct_bytes(self) -> int:
        """From how many bytes a chunk goes straight to a worker process."""
        return self.context.direct_bytes

    @direct_bytes.setter
    def direct_bytes(self, value: int) -> None:
        self.context.direct_bytes = value

    def route(self, name: str) -> Transport | None:
        """The route called ``name`` (see :mod:`.transport`), or ``None`` if unused here."""
        return next((r for r in self.routes if r.name == name), None)

    def ship_callable(self, task_callable):
        """Send ``task_callable`` to every worker used, once; its future."""
        # an error names the user's part at fault, not labkit's wrapper (see TaskCallable.parts);
        # Dask's own log of the failure is left out (quiet.LabkitObjectsUnpicklable)
        workers = self.context.placement.get("workers")
        return scatter_everywhere(
            self.client,
            task_callable,
            lambda: unpicklable_part(task_callable),
            only=workers,
            key=f"{SHIPPED_PREFIX}{uuid.uuid4().hex}",  # the scheduler keeps its every copy
        )

    def callable_alive(self, shipped) -> bool:
        """Whether a shipped callable is still held by a worker."""
        return shipped.status == "finished"

    def release_callable(self, shipped) -> None:
        """Drop a shipped callable nobody needs any more."""
        shipped.release()

    def start_task(self, entry: OpenTask, data):
        """Start ``entry`` by the first route that takes its chunk; its handle, or None."""
        entry.data = data  # kept until done: a task whose inputs die is sent again
        for route in self.routes:
            payload = route.prepare(entry, data)
            if payload is not PASS:
                entry.route = route
                return route.submit(entry, payload)
        raise AssertionError("the graph route takes every chunk")

    def start_tasks(self, group: list) -> list | None:
        """Start ``[(entry, data), ...]`` in one call where the first route can; else None."""
        first = self.routes[0]
        if not first.starts_groups:
            return None
        futures = first.submit_group(group)
        if futures is not None:
            for entry, data in group:
                entry.data, entry.route = data, first
        return futures

    def release(self, entry: OpenTask, outcome=None, error=None) -> None:
        """Give back what ``entry``'s route holds for it (it is done: recorded next)."""
        if entry.route is not None:
            entry.route.release(entry, outcome if error is None else None)

    def cancel_tasks(self, entries: list, handles: list) -> None:
        """Release the routes of ``entries`` and cancel their handles and ``handles`` on Dask."""
        for entry in entries:
            if entry.route is not None:
                entry.route.release(entry)
        handles = [e.handle for e in entries if e.handle is not None] + list(handles)
        cancel_futures(self.client, handles)

    def resubmit(self, entry: OpenTask, why) -> None:
        """Ship what was lost again (callable, chunk) by the task's route; nothing was recorded.

        The check that the task is still open and its new start are one step for a
        cancel: the cancel waits (the window's lock) and then cancels the new start, so
        a cancelled run's ``result()`` never raises while one of its tasks is sent
        again, nor before it was taken back.
        """
        if not entry.is_open():
            return
        # shipped again first if it was lost (a wait on the cluster), outside the lock; if it
        # fails, the route's own attempt below fails again, and is recorded
        with contextlib.suppress(Exception):
            entry.batch.shipped_callable(entry)
        with self.window.lock:
            if not entry.is_open():
                return
            entry.attempts += 1
            logger.warning(
                "labkit: resubmitting chunk %s of %s (attempt %d): its inputs were "
                "lost with their workers (%s)",
                entry.info.chunk,
                entry.info.run,
                entry.attempts,
                why,
            )
            try:
                handle = entry.route.resubmit(entry)
            except Exception as exc:
                failed: BaseException | None = exc
            else:
                failed = None
                if handle is not None:
                    entry.handle = handle
        if failed is not None:  # recorded outside the lock (the batch takes its own first)
            self.record(entry, error=as_labkit_error(failed, entry.info, None))

    def close(self) -> None:
        """Give back what every route holds (the scheduler shuts down)."""
        for route in self.routes:
            route.close()
