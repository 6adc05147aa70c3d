"""The Dask-backed scheduler: an embedded LocalCluster or any existing cluster.

The task callable is scattered (broadcast) to the workers once per callable,
so tasks carry only their chunk.  Completion comes back through future
callbacks (no polling), and one collector thread fetches whatever results
have finished in a single gather; task starts come back as Dask worker events on a
private topic, so views can show what is running.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import uuid
from functools import partial

from ..errors import LabkitError, SchedulerError
from ..events import TaskInfo, TaskStarted
from .base import OpenTask, Scheduler, _as_labkit_error
from .task import TaskCallable, is_delayed, run_task

__all__ = ["DaskScheduler"]

logger = logging.getLogger("labkit.scheduling")


class _Failed:
    """Stands in for a future when shipping a chunk failed before a task existed."""

    status = "error"

    def __init__(self, exc: BaseException):
        self._exc = exc

    def exception(self):
        return self._exc

    def result(self):
        raise self._exc


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
        Most tasks open at once; 32 per cluster thread (at least 256) by default.
    max_bytes_in_flight : int, optional
        Most bytes of client-side chunks held by open tasks (128 MiB by default),
        so a stream of big chunks trains in bounded client memory.
    direct_bytes : int
        Chunks of at least this many bytes go straight to a worker (scattered)
        instead of inside the task graph; they are sent again if their worker
        is lost before the task is done.
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

    max_attempts = 4  # sends of one scattered chunk, when workers holding it are lost

    def __init__(self, address: str | None = None, *, client=None, n_workers: int = 2,
                 threads_per_worker: int = 1, max_in_flight: int | None = None,
                 max_bytes_in_flight: int | None = None, result_container=None,
                 direct_bytes: int = 2**20, report_starts: bool = True, **cluster_kwargs):
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
        super().__init__(result_container, max_in_flight or max(256, 32 * threads),
                         max_bytes_in_flight)
        self.direct_bytes = direct_bytes
        self._callable_future = None
        self._finished: queue.SimpleQueue = queue.SimpleQueue()
        self._collector = threading.Thread(target=self._collect, daemon=True,
                                           name="labkit-dask-collector")
        self._collector.start()
        self._topic = f"labkit-start-{uuid.uuid4().hex[:12]}" if report_starts else None
        if self._topic:
            self.client.subscribe_topic(self._topic, self._on_started)

    def __repr__(self):
        if self.closed:
            return "<DaskScheduler: shut down>"
        info = self.client.scheduler_info()
        kind = "embedded cluster" if self._cluster is not None else "existing cluster"
        return (f"<DaskScheduler {info.get('address')}: {len(info.get('workers', {}))} workers "
                f"({kind}), {self.n_open_tasks} open tasks>")

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

    def _submit(self, data, entry: OpenTask):
        info = entry.info
        key = f"labkit-{info.kind}-{info.run}-{info.task}-{entry.attempts}"
        topic = self._topic if self.has_subscribers else None  # no listener: no messages
        if entry.nbytes >= self.direct_bytes:
            entry.data = data  # kept until the task is done: scattered data cannot be recomputed
            asyncio.run_coroutine_threadsafe(
                self._ship(data, entry, key, self._callable_future, topic),
                self.client.loop.asyncio_loop)
            return None
        if is_delayed(data):
            import dask
            task = dask.delayed(run_task, pure=False)(self._callable_future, data, info,
                                                      topic, dask_key_name=key)
            future = self.client.compute(task)
        else:
            future = self.client.submit(run_task, self._callable_future, data, info,
                                        topic, key=key, pure=False)
        future.add_done_callback(partial(self._on_done, info))
        return future

    async def _ship(self, data, entry: OpenTask, key: str, callable_future, topic) -> None:
        """On the event loop: send a big chunk straight to a worker, then submit its task.

        The client thread goes on reading the next chunk meanwhile, and the chunk
        skips the scheduler (which would hold a copy inside the task graph).
        """
        info = entry.info
        try:
            chunk_future = await self.client.scatter(data, direct=True, hash=False,
                                                     asynchronous=True)
            if info.task not in self._open:
                chunk_future.release()
                return
            future = self.client.submit(run_task, callable_future, chunk_future, info,
                                        topic, key=key, pure=False)
            entry.handle = future
            future.add_done_callback(partial(self._on_done, info))
        except Exception as exc:  # e.g. no workers left
            self._finished.put((info, _Failed(exc)))

    def _on_done(self, info: TaskInfo, future) -> None:
        """Dask's callback: queue the future for the collector thread."""
        self._finished.put((info, future))

    def _collect(self) -> None:
        """Collector thread: fetch finished results in batches, one round trip each."""
        while True:
            batch = [self._finished.get()]
            while not self._finished.empty():
                batch.append(self._finished.get())
            if any(item is None for item in batch):
                return
            batch = [(info, f) for info, f in batch if info.task in self._open]
            done = [(info, f) for info, f in batch if f.status == "finished"]
            if done:
                self._deliver(done)
            for info, future in batch:
                if future.status != "finished" and not self._ship_again(info, future):
                    self._deliver([(info, future)])

    def _ship_again(self, info: TaskInfo, future) -> bool:
        """Send a chunk again whose copy on a worker was lost with that worker.

        Only chunks that were scattered are sent again, only for failures that
        are not the task's own (those arrive as labkit errors), at most
        ``max_attempts`` times.  No result was delivered, so no join doubles.
        """
        entry = self._open.get(info.task)
        if entry is None or entry.data is None or entry.attempts >= self.max_attempts:
            return False
        if isinstance(future, _Failed):
            return False
        error = future.exception() if future.status == "error" else None
        if isinstance(error, LabkitError):
            return False
        entry.attempts += 1
        logger.warning("labkit: re-sending chunk %s of %s (attempt %d): its worker was lost",
                       info.chunk, info.run, entry.attempts)
        self._submit(entry.data, entry)
        return True

    def _deliver(self, items) -> None:
        """Gather ``items`` and record each; a failing gather falls back to one by one."""
        if len(items) == 1 and isinstance(items[0][1], _Failed):
            info = items[0][0]
            self._task_done(info, error=_as_labkit_error(items[0][1].exception(), info, None))
            return
        try:
            outcomes = self.client.gather([f for _, f in items])
        except BaseException as exc:  # the future's error, re-described with its place
            if len(items) > 1:
                for item in items:
                    self._deliver([item])
                return
            info, future = items[0]
            if not self._ship_again(info, future):  # a result lost with its worker, say
                self._task_done(info, error=_as_labkit_error(exc, info, None))
            return
        for (info, _), outcome in zip(items, outcomes):
            self._task_done(info, outcome)

    def _on_started(self, event) -> None:
        _, msg = event
        entry = self._open.get(msg.get("task"))
        if entry is not None:
            self.emit(TaskStarted(entry.info, msg["worker"], msg["time"]))

    def _cancel_handles(self, handles: list) -> None:
        if handles:
            try:
                self.client.cancel(handles)
            except Exception:  # the cluster may already be gone at shutdown
                pass

    def _close(self) -> None:
        self._finished.put(None)
        self._collector.join(timeout=30)
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
