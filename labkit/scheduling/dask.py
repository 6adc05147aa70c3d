"""The Dask-backed scheduler: an embedded LocalCluster or any existing cluster.

Each batch's task callable is scattered (broadcast) to the workers once, so
tasks carry only their chunk.  Tasks on worker threads of this process take
their chunk by reference and record their own outcome; tasks that are ready
together start in one ``client.map``.  Other tasks' results are fetched by a
:class:`~labkit.scheduling.collector.Collector`.  Task starts come back as
Dask worker events on a private topic, so views can show what is running.

Faults, and who repairs them:

* a worker dies while a task runs: Dask reschedules the task where its
  inputs still are; a task that keeps killing workers raises
  :class:`~labkit.errors.WorkerLostError` naming the workers lost under it;
* data only the client holds (a scattered callable, a scattered chunk) that
  died with its workers is shipped again, and the task resubmitted, at most
  ``max_attempts`` times.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
import weakref

from ..errors import CancelledError, InputError, LabkitError, SchedulerError, WorkerLostError
from ..events import TaskStarted
from .base import OpenTask, Scheduler, _as_labkit_error
from .blas import one_blas_thread
from .collector import Collector
from .cluster import cluster_size, no_message_log, resolve_mode, start_cluster
from .connect import (check_address, check_client, check_limit, connect, on_loopback,
                      scatter_everywhere, scheduler_identity)
from .offload import OffloadPool
from .reference import ByReference
from .shared import SHARE_BYTES, SharedChunk, SharedChunks
from .task import HereTask, TaskCallable, is_delayed, lazy_chunk, run_task, run_task_here

__all__ = ["DaskScheduler"]

logger = logging.getLogger("labkit.scheduling")

# Why Dask cancels a task whose inputs are gone (their holders died).
_LOST_INPUTS = ("lost dependencies", "already forgotten")


def _check_arguments(address, client, max_in_flight, max_bytes_in_flight, direct_bytes,
                     embedded: dict):
    """Labkit errors for arguments that would otherwise fail deep inside Dask, or later.

    ``embedded``: the options that size or shape an embedded cluster, as given.
    """
    if address is not None and client is not None:
        raise InputError("give the scheduler's address or a client, not both",
                         argument="address")
    given = [name for name, value in embedded.items()
             if value is not None and not (name == "mode" and value == "auto")]
    if given and (address is not None or client is not None):
        # they would be ignored: the existing cluster is used as it is
        raise InputError(f"{', '.join(given)} shape the embedded cluster only; a cluster "
                         f"given by {'address' if address is not None else 'client'} is used "
                         "as it is", argument=given[0])
    if client is not None:
        check_client(client)
    elif address is not None:
        check_address(address)
    check_limit("max_in_flight", max_in_flight)
    check_limit("max_bytes_in_flight", max_bytes_in_flight)
    check_limit("direct_bytes", direct_bytes)


class DaskScheduler(Scheduler):
    """Runs tasks on a Dask cluster.

    Parameters
    ----------
    address : str, optional
        Address of an existing scheduler (``"tcp://host:8786"``); left running
        on shutdown.
    client : distributed.Client, optional
        An existing client; left open on shutdown.
    mode : {"auto", "threads", "processes"}
        The embedded cluster's kind, when neither is given (see
        :mod:`labkit.scheduling.cluster`): ``"auto"`` runs tasks on threads of
        this process (chunks by reference) and GIL-holding ones in worker
        processes; ``"threads"`` only threads; ``"processes"`` worker processes.
        ``processes=True/False`` (LocalCluster's keyword) say the same.
    n_workers, threads_per_worker : int, optional
        Size of the embedded cluster: one thread per core by default (one
        in-process worker, or one process per core for ``"processes"``).
    max_in_flight : int, optional
        Most tasks open at once; 32 per cluster thread (at least 256) by default.
    max_bytes_in_flight : int, optional
        Most bytes of client-side chunks held by open tasks (128 MiB by default),
        so a stream of big chunks trains in bounded client memory.
    direct_bytes : int, optional
        On worker processes, chunks of at least this many bytes go straight to
        a worker (scattered) instead of inside the task graph; they are sent
        again if their worker is lost before the task is done.  By default
        1 MiB, or 64 KiB where some worker is on another host: a chunk in the
        task graph crosses the network twice (client to scheduler, scheduler
        to worker).
    connect_timeout : float, optional
        Seconds to wait for the scheduler at ``address`` (10 by default, or the
        ``LABKIT_CONNECT_TIMEOUT`` environment variable): one that does not
        answer by then is a :class:`~labkit.errors.SchedulerError` naming it.
    report_starts : bool
        Send a small event from the worker when a task starts (for live views).
    shared_memory : bool, optional
        Send chunk arrays to worker processes through shared memory (one copy,
        mapped by the worker; see :mod:`labkit.scheduling.shared`).  By default
        where the workers are processes of an embedded cluster (this machine);
        ``True`` only where every worker runs on this machine.
    **cluster_kwargs
        Passed to ``LocalCluster``; it binds 127.0.0.1 (dashboard included)
        unless told otherwise.

    Examples
    --------
    A cluster takes a moment to start, so this one is not run as a doctest
    (``tests/scheduling/test_dask.py`` does the same for real)::

        with DaskScheduler() as s:
            s.add_task(3, lambda x: x * x)
            s.get_results()          # [9]
    """

    max_attempts = 4  # submissions of one task whose inputs were lost with their workers
    #: Hand in-process tasks their inputs by reference (see :mod:`.reference`); False
    #: lets Dask pickle them as it would (benchmarks compare the two).
    inputs_by_reference = True

    def __init__(self, address: str | None = None, *, client=None, mode: str = "auto",
                 n_workers: int | None = None, threads_per_worker: int | None = None,
                 max_in_flight: int | None = None, max_bytes_in_flight: int | None = None,
                 result_container=None, direct_bytes: int | None = None, report_starts: bool = True,
                 shared_memory: bool | None = None, connect_timeout: float | None = None,
                 **cluster_kwargs):
        from distributed import Client
        self._cluster, self._offload = None, None
        embedded = dict(mode=mode, n_workers=n_workers, threads_per_worker=threads_per_worker,
                        **cluster_kwargs)
        mode = resolve_mode(mode, cluster_kwargs.pop("processes", None))
        _check_arguments(address, client, max_in_flight, max_bytes_in_flight, direct_bytes,
                         embedded)
        if client is not None:
            self.client, self._owns_client, self.mode = client, False, "existing"
        else:
            with no_message_log():
                if address is not None:
                    self.client, self.mode = connect(address, connect_timeout), "existing"
                else:
                    size = cluster_size(mode, n_workers, threads_per_worker)
                    self._cluster = start_cluster(mode, *size, **cluster_kwargs)
                    self.client, self.mode = Client(self._cluster), mode
            self._owns_client = True
        nthreads = self.client.nthreads()
        threads = sum(nthreads.values()) or 1
        # a client of someone else's in-process cluster: its workers are threads here too
        self._in_process = self.mode in ("auto", "threads") or (
            bool(nthreads) and all(a.startswith("inproc://") for a in nthreads))
        if self.mode == "auto":
            self._offload = OffloadPool(threads)
        # Workers that are threads of this process share its BLAS: one thread per task
        # thread, for the scheduler's whole life (Dask's nanny does the same for its
        # processes; limiting per task instead made OpenBLAS resize its pool every time).
        self._blas_hold = one_blas_thread() if self._in_process else None
        if self._blas_hold is not None:
            self._blas_hold.__enter__()
        # Worker processes this scheduler started run on this machine: chunks reach them
        # through shared memory (one copy) instead of a socket (see .shared).
        local = self._cluster is not None and self.mode == "processes"
        self._shares_memory = (local if shared_memory is None else bool(shared_memory)) \
            and not self._in_process   # threads see chunks by reference already
        self._shared = SharedChunks()
        super().__init__(result_container, max_in_flight or max(256, 32 * threads),
                         max_bytes_in_flight)
        self.direct_bytes = direct_bytes or _direct_bytes(nthreads)
        self._collector = Collector(self.client, self._complete, self._failed)
        self._topic = f"labkit-start-{uuid.uuid4().hex[:12]}" if report_starts else None
        if self._topic:
            self.client.subscribe_topic(self._topic, self._on_started)

    @property
    def in_process(self) -> bool:
        """Whether tasks run on threads of this process (chunks by reference)."""
        return self._in_process

    @property
    def offload_pool(self):
        """The pool of processes for GIL-holding tasks (``mode="auto"``), else ``None``."""
        return self._offload

    def run_on_workers(self, fn, *args) -> dict:
        """``fn(*args)`` on every worker (``client.run``); workers lost meanwhile left out."""
        self._check_usable()
        try:
            results = self.client.run(fn, *args, on_error="return")
        except Exception as exc:
            raise SchedulerError(f"could not reach the workers: {type(exc).__name__}: "
                                 f"{exc}") from exc
        failed = {w: r for w, r in results.items() if isinstance(r, BaseException)}
        for worker, error in failed.items():
            if isinstance(error, LabkitError):
                raise error.locate(worker=worker)
            logger.warning("labkit: worker %s did not answer (%s: %s)", worker,
                           type(error).__name__, error)
        return {w: r for w, r in results.items() if w not in failed}

    def __repr__(self):
        if self.closed:
            return "<DaskScheduler: shut down>"
        info = scheduler_identity(self.client)
        kind = (f"embedded cluster, mode {self.mode!r}" if self._cluster is not None
                else "existing cluster")
        return (f"<DaskScheduler {info.get('address')}: {len(info.get('workers', {}))} workers "
                f"({kind}), {self.total_open_tasks} open tasks>")

    @property
    def dashboard_link(self) -> str | None:
        """Link to Dask's own dashboard, when it runs one."""
        if self._cluster is not None and self._in_process:
            # Dask names an in-process cluster's host after the machine's address,
            # where its dashboard does not listen: it binds 127.0.0.1 only.
            server = getattr(self._cluster.scheduler, "http_server", None)
            port = getattr(server, "port", None)
            return f"http://127.0.0.1:{port}/status" if port else None
        return getattr(self.client, "dashboard_link", None)

    # -- callables ---------------------------------------------------------------------

    def _ship(self, task_callable: TaskCallable):
        return scatter_everywhere(self.client, task_callable, f"{task_callable!r}")

    def _alive(self, shipped) -> bool:
        return shipped.status == "finished"

    def _release(self, shipped) -> None:
        shipped.release()

    # -- tasks -------------------------------------------------------------------------

    def _submit(self, entry: OpenTask, data):
        info = entry.info
        # Kept until the task is done: if its inputs die with their workers it is sent again.
        entry.data = data
        callable_future = entry.batch._live_callable(entry)
        key = _key(entry)
        topic, offload = self._run_options()
        held = self._held_here(entry, data, key)
        if held is not None:
            self._collector.expect([(key, entry)])
            future = self.client.submit(run_task_here, held, info, callable_future, topic,
                                        offload=offload, key=key, pure=False)
            self._collector.watch([future])
            return future
        if self._shares_memory and entry.nbytes >= SHARE_BYTES:
            data = self._shared.chunk_for(entry.info.task, data)
        if entry.nbytes >= self.direct_bytes and not self.in_process \
                and not isinstance(data, SharedChunk):
            asyncio.run_coroutine_threadsafe(
                self._ship_chunk(data, entry, key, callable_future, topic),
                self.client.loop.asyncio_loop)
            return None
        lazy = lazy_chunk(data) if is_delayed(data) else None
        if lazy is not None:
            future = self.client.submit(run_task, callable_future, lazy, info, topic, None,
                                        offload, key=key, pure=False)
        elif is_delayed(data):
            import dask
            task = dask.delayed(run_task, pure=False)(callable_future, data, info, topic, None,
                                                      offload, dask_key_name=key)
            future = self.client.compute(task)
        else:
            future = self.client.submit(run_task, callable_future, data, info, topic, None,
                                        offload, key=key, pure=False)
        self._collector.fetch([(entry, future)])
        return future

    def _run_options(self) -> tuple:
        """``(topic, offload)`` for ``run_task``: where to report starts (only while someone
        listens), and the pool for GIL-holding callables."""
        topic = self._topic if self.has_subscribers else None
        return topic, self._offload.token if self._offload else None

    def _submit_group(self, group: list) -> list | None:
        """In-process tasks of one callable start in one ``client.map`` (one graph update)."""
        if not (self._in_process and self.inputs_by_reference):
            return None
        callable_future = group[0][0].batch._live_callable(group[0][0])
        if any(entry.callable is not group[0][0].callable for entry, _ in group):
            return None
        held, keys = [], [_key(entry) for entry, _ in group]
        for (entry, data), key in zip(group, keys):
            entry.data = data
            held.append(self._held_here(entry, data, key))
            if held[-1] is None:   # a chunk that needs data on the cluster: one by one
                return None
        self._collector.expect([(key, entry) for (entry, _), key in zip(group, keys)])
        topic, offload = self._run_options()
        futures = self.client.map(run_task_here, held, [e.info for e, _ in group],
                                  task_callable=callable_future, topic=topic, offload=offload,
                                  key=keys, pure=False)
        self._collector.watch(futures)
        return futures

    def _held_here(self, entry: OpenTask, data, key: str):
        """``entry``'s input by reference, with how to record its outcome, for a task on a
        thread of this process; ``None`` where the task goes another way."""
        if not (self._in_process and self.inputs_by_reference):
            return None
        if is_delayed(data):
            data = lazy_chunk(data)   # a chunk needing cluster data goes as a Dask task
            if data is None:
                return None
        # pickled as a token, not as the chunk's graph or buffer (see .reference)
        entry.reference = ByReference(HereTask(
            data, functools.partial(self._deliver_here, weakref.ref(entry), key)))
        return entry.reference

    def _deliver_here(self, entry_ref, key: str, outcome=None, error=None) -> None:
        """Record an in-process task's outcome on its worker thread (see ``run_task_here``)."""
        self._collector.recorded(key)
        entry = entry_ref()
        if entry is not None:
            self._complete(entry, outcome, error)

    def _complete(self, entry: OpenTask, outcome=None, error=None) -> None:
        self._shared.drop([entry.info.task], reuse=error is None and
                          getattr(outcome, "released", None) is True)
        super()._complete(entry, outcome, error)

    async def _ship_chunk(self, data, entry: OpenTask, key: str, callable_future, topic) -> None:
        """On the event loop: send a big chunk straight to a worker, then submit its task.

        The client thread goes on reading the next chunk meanwhile, and the chunk
        skips the scheduler (which would hold a copy inside the task graph).
        """
        try:
            chunk_future = await self.client.scatter(data, direct=True, hash=False,
                                                     asynchronous=True)
            if not entry.is_open():
                chunk_future.release()
                return
            future = self.client.submit(run_task, callable_future, chunk_future, entry.info,
                                        topic, key=key, pure=False)
            entry.handle = future
            self._collector.fetch([(entry, future)])
        except Exception as exc:  # the worker it went to died, no workers left, no pickle
            # sending it again may ship the callable again, which waits on this loop
            self.client.loop.asyncio_loop.run_in_executor(None, self._ship_failed, entry, exc)

    def _ship_failed(self, entry: OpenTask, exc: Exception) -> None:
        """A big chunk did not reach a worker: send it again (its worker died under the
        copy, as a lost input would), or fail its task naming the chunk."""
        from .pickling import pickling_cause
        if not entry.is_open():
            return
        unpicklable = pickling_cause(exc) is not None   # no retry makes it picklable
        if not unpicklable and entry.attempts < self.max_attempts \
                and self.client.status == "running":
            self._submit_again(entry, f"{type(exc).__name__}: {exc}")
            return
        kind = InputError if unpicklable else SchedulerError
        self._complete(entry, error=kind(
            f"chunk {entry.info.chunk} could not be sent to a worker: "
            f"{type(exc).__name__}: {exc}", **entry.info.where()))

    def _failed(self, entry: OpenTask, future) -> None:
        """A task that did not finish: its own error, or a fault to repair or report."""
        if not entry.is_open():   # its batch was cancelled meanwhile: nothing is owed
            return
        error = future.exception() if future.status == "error" else None
        if isinstance(error, LabkitError):  # the task itself raised
            self._complete(entry, error=error)
            return
        if self.client.status in ("closing", "closed"):   # closed by hand, not by shutdown()
            self._complete(entry, error=SchedulerError(
                "the Dask client of this DaskScheduler was closed while the task ran; "
                "shut the scheduler down with shutdown() and make a new one",
                **entry.info.where()))
            return
        reason = _cancel_reason(future)
        # A cancel with no reason ("unknown") comes from a lost input as well (a worker's
        # death races the message that names it); a restart says why.
        known = reason not in ("", "unknown")
        if future.status == "cancelled" and known and not any(r in reason for r in _LOST_INPUTS):
            self._complete(entry, error=CancelledError(
                f"the task was cancelled outside labkit ({reason})", **entry.info.where()))
            return
        lost = self._workers_lost_under(entry)
        if type(error).__name__ == "KilledWorker" or len(lost) > _allowed_failures():
            self._complete(entry, error=_worker_lost(entry, error, lost))
        elif entry.attempts < self.max_attempts:
            self._submit_again(entry, error or reason)
        else:
            self._complete(entry, error=SchedulerError(
                f"the task's inputs were lost with their workers {entry.attempts} times "
                f"({error or reason})", **entry.info.where(), worker=", ".join(lost) or None))

    def _submit_again(self, entry: OpenTask, why) -> None:
        """Ship what was lost again (callable, chunk) and resubmit; no result was recorded."""
        if not entry.is_open():
            return
        entry.attempts += 1
        logger.warning("labkit: resubmitting chunk %s of %s (attempt %d): its inputs were "
                       "lost with their workers (%s)",
                       entry.info.chunk, entry.info.run, entry.attempts, why)
        try:
            handle = self._submit(entry, entry.data)
        except Exception as exc:
            self._complete(entry, error=_as_labkit_error(exc, entry.info, None))
            return
        if handle is not None:
            entry.handle = handle
        if not entry.is_open():   # cancelled while it was being sent again: take it back
            self._cancel_handles([handle] if handle is not None else [])

    def _workers_lost_under(self, entry: OpenTask) -> list[str]:
        """Workers that died while processing any attempt of ``entry`` (the scheduler's log)."""
        prefix = f"labkit-{entry.info.kind}-{entry.info.run}-{entry.info.task}-"

        def lost_under(dask_scheduler):  # nested: pickled by value, the scheduler needs no labkit
            return [msg.get("worker", "?") for _, msg in dask_scheduler.get_events("all")
                    if isinstance(msg, dict) and msg.get("action") == "remove-worker"
                    and any(str(k).startswith(prefix) for k in msg.get("processing-tasks", ()))]
        try:
            return list(self.client.run_on_scheduler(lost_under))
        except Exception:  # the scheduler is gone too: nothing more to learn
            return []

    def _on_started(self, event) -> None:
        _, msg = event
        entry = self._collector.entry(msg.get("key"))
        if entry is not None:
            self.emit(TaskStarted(entry.info, msg["worker"], msg["time"]))

    def _cancel_handles(self, handles: list) -> None:
        self._shared.drop([_task_of(getattr(h, "key", "")) for h in handles])
        if handles:
            try:
                self.client.cancel(handles)
            except Exception:  # the cluster may already be gone at shutdown
                pass

    def _close(self) -> None:
        self._collector.close()
        if self._topic:
            try:
                self.client.unsubscribe_topic(self._topic)
            except Exception:
                pass
        if self._owns_client:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()
        if self._offload is not None:
            self._offload.close()
        if self._blas_hold is not None:
            self._blas_hold.__exit__(None, None, None)
        self._shared.drop_all()


def _direct_bytes(nthreads: dict) -> int:
    """The default ``direct_bytes``: lower where a worker is on another host."""
    return 2**20 if on_loopback(nthreads) else 2**16


def _key(entry: OpenTask) -> str:
    """The Dask key of ``entry``'s current attempt."""
    info = entry.info
    return f"labkit-{info.kind}-{info.run}-{info.task}-{entry.attempts}"


def _task_of(key: str) -> int | None:
    """The task id in a labkit future key ``labkit-{kind}-{run}-{task}-{attempt}``."""
    try:
        return int(str(key).rsplit("-", 2)[1])
    except (IndexError, ValueError):
        return None


def _cancel_reason(future) -> str:
    """Why Dask cancelled ``future`` (``"lost dependencies"``...), or ``""``."""
    exc = getattr(getattr(future, "_state", None), "exception", None)
    return str(getattr(exc, "reason", "") or "")


def _allowed_failures() -> int:
    """How many workers may die under one task before Dask gives up on it."""
    import dask
    return int(dask.config.get("distributed.scheduler.allowed-failures", 3))


def _worker_lost(entry: OpenTask, error, lost: list[str]) -> WorkerLostError:
    """The error of a task under which workers kept dying."""
    last = getattr(getattr(error, "last_worker", None), "address", None)
    workers = lost or ([last] if last else [])
    named = ", ".join(dict.fromkeys(workers)) or "unknown"
    return WorkerLostError(
        f"worker lost: {len(workers) or 'a'} worker(s) died while running this task "
        f"({named}); a task that crashes its worker process (os._exit, a segfault, "
        "running out of memory) fails here", **entry.info.where(),
        worker=workers[-1] if workers else None)
