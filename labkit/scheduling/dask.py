"""The Dask-backed scheduler: an embedded LocalCluster or any existing cluster.

The task callable is scattered (broadcast) to the workers once per callable,
so tasks carry only their chunk.  Completion comes back through future
callbacks (no polling); task starts come back as Dask worker events on a
private topic, so views can show what is running.
"""

from __future__ import annotations

import uuid
from functools import partial

from ..errors import SchedulerError
from ..events import TaskInfo, TaskStarted
from .base import Scheduler, _as_labkit_error
from .task import TaskCallable, is_delayed, run_task

__all__ = ["DaskScheduler"]


class DaskScheduler(Scheduler):
    """Runs tasks on a Dask cluster.

    Parameters
    ----------
    address : str, optional
        Address of an existing scheduler (``"tcp://host:8786"``); left running
        on shutdown.
    client : distributed.Client, optional
        An existing client; left open on shutdown.
    n_workers, threads_per_worker
        Size of the embedded ``LocalCluster`` when neither is given.
    max_in_flight : int, optional
        Most tasks open at once; twice the cluster's threads by default.
    report_starts : bool
        Send a small event from the worker when a task starts (for live views).
    **cluster_kwargs
        Passed to ``LocalCluster``; it binds 127.0.0.1 (dashboard included)
        unless told otherwise.

    Examples
    --------
    A cluster takes seconds to start, so this one is not run as a doctest
    (``tests/scheduling/test_dask.py`` does the same for real)::

        with DaskScheduler(n_workers=2) as s:
            s.add_task(3, lambda x: x * x)
            s.get_results()          # [9]
    """

    def __init__(self, address: str | None = None, *, client=None, n_workers: int = 2,
                 threads_per_worker: int = 1, max_in_flight: int | None = None,
                 result_container=None, report_starts: bool = True, **cluster_kwargs):
        from distributed import Client, LocalCluster
        self._cluster = None
        if client is not None:
            self.client, self._owns_client = client, False
        elif address is not None:
            self.client, self._owns_client = Client(address), True
        else:
            options = dict(n_workers=n_workers, threads_per_worker=threads_per_worker,
                           processes=True, host="127.0.0.1",
                           dashboard_address="127.0.0.1:0")
            options.update(cluster_kwargs)
            self._cluster = LocalCluster(**options)
            self.client, self._owns_client = Client(self._cluster), True
        threads = sum(self.client.nthreads().values()) or 1
        super().__init__(result_container, max_in_flight or 2 * threads)
        self._callable_future = None
        self._topic = f"labkit-start-{uuid.uuid4().hex[:12]}" if report_starts else None
        if self._topic:
            self.client.subscribe_topic(self._topic, self._on_started)

    @property
    def dashboard_link(self) -> str | None:
        """Link to Dask's own dashboard, when it runs one."""
        return getattr(self.client, "dashboard_link", None)

    def _use_callable(self, task_callable: TaskCallable) -> None:
        old = self._callable_future
        try:
            self._callable_future = self.client.scatter(task_callable, broadcast=True,
                                                        hash=False)
        except Exception as exc:
            raise SchedulerError(f"could not ship {task_callable!r} to the workers: "
                                 f"{type(exc).__name__}: {exc}") from exc
        if old is not None:
            old.release()

    def _submit(self, data, info: TaskInfo):
        key = f"labkit-{info.kind}-{info.run}-{info.task}"
        if is_delayed(data):
            import dask
            task = dask.delayed(run_task, pure=False)(self._callable_future, data, info,
                                                      self._topic, dask_key_name=key)
            future = self.client.compute(task)
        else:
            future = self.client.submit(run_task, self._callable_future, data, info,
                                        self._topic, key=key, pure=False)
        future.add_done_callback(partial(self._on_done, info))
        return future

    def _on_done(self, info: TaskInfo, future) -> None:
        if info.task not in self._open:
            return  # cancelled by us; nothing to fetch
        try:
            outcome = future.result()
        except BaseException as exc:  # the future's error, re-described with its place
            self._task_done(info, error=_as_labkit_error(exc, info, None))
        else:
            self._task_done(info, outcome)

    def _on_started(self, event) -> None:
        _, msg = event
        entry = self._open.get(msg.get("task"))
        if entry is not None:
            self.emit(TaskStarted(entry[0], msg["worker"], msg["time"]))

    def _cancel_handles(self, handles: list) -> None:
        if handles:
            try:
                self.client.cancel(handles)
            except Exception:  # the cluster may already be gone at shutdown
                pass

    def _close(self) -> None:
        if self._topic:
            try:
                self.client.unsubscribe_topic(self._topic)
            except Exception:
                pass
        if self._callable_future is not None:
            self._callable_future.release()
            self._callable_future = None
        if self._owns_client:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()
