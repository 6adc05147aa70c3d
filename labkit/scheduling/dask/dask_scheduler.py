"""The Dask-backed scheduler: its life cycle, and what a fault means.

The scheduler holds its parts, each with its own state and module: the
cluster it opened and what it tells of it (a :class:`~.held.HeldCluster`,
from :mod:`.cluster`); its routes, by which tasks reach the workers, chosen
once here and walked for each task (a
:class:`~labkit.scheduling.routes.dispatch.Dispatcher`); and the one thread
by which outcomes reach their batches
(:class:`~labkit.scheduling.routes.outcomes.Outcomes`).  Each batch holds its
own task starter (:mod:`labkit.scheduling.tasks.starting`).  Dask beyond its
public API is :mod:`.dask_adapter`.

Faults: a worker that dies under a task has Dask reschedule it; a task that
keeps killing workers is a :class:`~labkit.errors.WorkerLostError` naming
them; what only the client held (a callable, a chunk) and died with its
workers is shipped again by the task's route, at most ``max_attempts`` times.
"""

from __future__ import annotations

import contextlib
import uuid

from ...constraints import POSITIVE_INT, Options, check_parameters
from ...errors import CancelledError, InputError, LabkitError, SchedulerError, WorkerLostError
from ...events import TaskStarted
from ..routes.dispatch import Dispatcher
from ..routes.outcomes import Outcomes
from ..routes.transport import ClusterTraits, direct_bytes_for, task_key_prefix
from ..tasks.base import Scheduler
from ..tasks.open_task import OpenTask
from ..tasks.pickling import pickling_cause
from ..tasks.results import RESULT_CONTAINER
from . import dask_adapter as adapter
from .cluster import MODES, check_cluster_choice, open_cluster, resolve_mode
from .connect import ADDRESS, CLIENT, CLUSTER, SECONDS, WORKERS
from .held import HeldCluster
from .worker_start import START_METHODS, check_start_method

__all__ = ["DaskScheduler"]


class DaskScheduler(Scheduler):
    """Runs tasks on a Dask cluster: an embedded ``LocalCluster``, or one you have.

    Parameters
    ----------
    address : str, optional
        Address of an existing scheduler (``"tcp://host:8786"``); left running on shutdown.
    client : distributed.Client, optional
        An existing client; left open on shutdown.
    cluster : distributed.deploy.Cluster, optional
        A cluster you started (a ``LocalCluster``, dask-jobqueue's ``SLURMCluster``,
        dask-kubernetes' ``KubeCluster``, ...), maybe adaptive, maybe with no worker
        yet: reached through a client of its own, and left running on shutdown
        (see ``docs/guide/elastic-clusters.md``).  One of ``address``, ``client``
        and ``cluster`` at most.
    mode : {"auto", "threads", "processes"}
        The embedded cluster's kind, when neither is given (see :mod:`.cluster`):
        ``"auto"`` runs tasks on threads of this process (chunks by reference)
        and GIL-holding ones in worker processes; ``"threads"`` only threads;
        ``"processes"`` worker processes.  ``processes=True/False`` say the same.
    n_workers, threads_per_worker : int, optional
        Size of the embedded cluster: one thread per core by default (one
        in-process worker, or one process per core for ``"processes"``).
    max_in_flight, max_bytes_in_flight : int, optional
        Most tasks open at once (32 per cluster thread, at least 256) and most bytes
        of client-side chunks they hold (128 MiB): big chunks stream in bounded memory.
    direct_bytes : int, optional
        On worker processes, chunks of at least this many bytes go straight to
        a worker instead of inside the task graph, and are sent again if their
        worker is lost: 1 MiB by default, 64 KiB where a worker is on another host.
    connect_timeout : float, optional
        Seconds to wait for the scheduler at ``address`` (10 by default, or
        ``LABKIT_CONNECT_TIMEOUT``); then a :class:`~labkit.errors.SchedulerError`.
    report_starts : bool
        Send a small event from the worker when a task starts (for live views).
    shared_memory : bool, optional
        Send chunk arrays to worker processes through shared memory (see
        :mod:`.shared`): by default on the processes of an embedded cluster;
        ``True`` only where every worker runs on this machine.
    workers : list of str, optional
        Addresses of the only workers of the cluster this scheduler uses: its
        tasks and the chunks it copies go there alone, and a
        ``DataParallelTrainer`` on it has one rank on each (see :meth:`restricted`).
    start_method : {"forkserver", "spawn"}, optional
        How an embedded cluster of worker processes starts them (and restarts them, at a
        ``lifetime``'s end or after a fault): by default forked from a server that has
        Dask, NumPy and labkit loaded, ready in a fraction of a spawned worker's start
        (``"spawn"``, Dask's default: a new interpreter each; where the platform has no
        fork server, always).  See :mod:`.worker_start`.
    **cluster_kwargs
        Passed to ``LocalCluster``; it binds 127.0.0.1 (dashboard included).

    Notes
    -----
    It holds three parts: its cluster (a :class:`~.held.HeldCluster`), its
    routes (a :class:`~labkit.scheduling.routes.dispatch.Dispatcher`) and the outcomes'
    thread (``outcomes``); each batch holds a task starter.

    Examples
    --------
    Not a doctest, as a cluster takes a moment (``tests/scheduling/test_dask.py``)::

        with DaskScheduler() as s:
            s.add_task(3, lambda x: x * x)
            s.get_results()          # [9]
    """

    #: What each argument may be (checked first: :func:`labkit.constraints.check_parameters`).
    parameter_constraints = {
        "address": [ADDRESS, None],
        "client": [CLIENT, None],
        "cluster": [CLUSTER, None],
        "mode": [Options(MODES)],
        "n_workers": [POSITIVE_INT, None],
        "threads_per_worker": [POSITIVE_INT, None],
        "max_in_flight": [POSITIVE_INT, None],
        "max_bytes_in_flight": [POSITIVE_INT, None],
        "result_container": [RESULT_CONTAINER, None],
        "direct_bytes": [POSITIVE_INT, None],
        "report_starts": [Options((True, False))],
        "shared_memory": [Options((True, False)), None],
        "connect_timeout": [SECONDS, None],
        "workers": [WORKERS, None],
        "start_method": [Options(START_METHODS), None],
    }
    max_attempts = 4  # submissions of one task whose inputs were lost with their workers
    #: Hand in-process tasks their inputs by reference (see :mod:`.reference`); False
    #: lets Dask pickle them (read when the scheduler opens; benchmarks compare the two).
    inputs_by_reference = True

    def __init__(
        self,
        address: str | None = None,
        *,
        client=None,
        cluster=None,
        mode: str = "auto",
        n_workers: int | None = None,
        threads_per_worker: int | None = None,
        max_in_flight: int | None = None,
        max_bytes_in_flight: int | None = None,
        result_container=None,
        direct_bytes: int | None = None,
        report_starts: bool = True,
        shared_memory: bool | None = None,
        connect_timeout: float | None = None,
        workers: list[str] | tuple[str, ...] | None = None,
        start_method: str | None = None,
        **cluster_kwargs,
    ):
        check_parameters(self, locals())
        embedded = dict(mode=mode, n_workers=n_workers, threads_per_worker=threads_per_worker)
        embedded["start_method"] = start_method
        check_cluster_choice(address, client, {**embedded, **cluster_kwargs}, cluster)
        resolved = resolve_mode(mode, cluster_kwargs.pop("processes", None))
        check_start_method(start_method, resolved)
        embedded["mode"] = resolved
        opened = open_cluster(address, client, cluster, connect_timeout, embedded, cluster_kwargs)
        self._cluster = HeldCluster(opened, workers)  # closes what it opened if workers= is wrong
        self.client, self.mode = self._cluster.client, self._cluster.mode
        #: The only workers this scheduler uses (their addresses), or None: all of them.
        self.workers = self._cluster.workers
        super().__init__(
            result_container,
            max_in_flight or max(256, 32 * self._cluster.threads),
            max_bytes_in_flight,
        )
        self.outcomes = Outcomes(self.client, self.record, self._failed, self._failed_to_send)
        local = self._cluster.embedded_processes
        traits = ClusterTraits(
            self.in_process,
            self.inputs_by_reference,
            local if shared_memory is None else bool(shared_memory),
        )
        self._topic = f"labkit-start-{uuid.uuid4().hex[:12]}" if report_starts else None
        self._routes = Dispatcher(
            self.client,
            self.outcomes,
            self.window,
            self.record,
            traits,
            direct_bytes or direct_bytes_for(self._cluster.nthreads),
            self._run_options,
            self.workers,
        )
        if self._topic:  # start events from the workers, for live views
            self.client.subscribe_topic(self._topic, self._on_started)

    def restricted(self, workers) -> DaskScheduler:
        """A scheduler over ``workers`` of this one's cluster alone, on the same client.

        What it runs goes to those workers only (``allow_other_workers=False``);
        a ``DataParallelTrainer`` on it has exactly one rank a worker.  It does not
        own the client: its ``shutdown()`` cancels its own tasks and closes nothing
        else.  The sweep gives one to each trial of ``workers_per_trial`` workers
        (``trial.scheduler``).
        """
        self.check_usable()
        return DaskScheduler(
            client=self.client,
            workers=list(workers),
            shared_memory=self.route("shared-memory") is not None,
            direct_bytes=self.direct_bytes,
            report_starts=False,
        )

    # -- its cluster ------------------------------------------------------------------------

    @property
    def in_process(self) -> bool:
        """Whether tasks run on threads of this process (chunks by reference)."""
        return self._cluster.in_process

    @property
    def cluster(self):
        """The ``LocalCluster`` this scheduler started, the cluster given by ``cluster=``,
        or ``None`` (one reached by an address or a client)."""
        return self._cluster.cluster

    @property
    def adaptive(self) -> bool:
        """Whether its cluster adapts its size to demand (``cluster.adapt(...)``): a sweep
        then keeps a queued task for each trial that waits, which Dask's target counts."""
        return adapter.is_adaptive(self.cluster or getattr(self.client, "cluster", None))

    @property
    def offload_pool(self):
        """The pool of processes for GIL-holding tasks (``mode="auto"``), else ``None``."""
        return self._cluster.offload

    @property
    def dashboard_link(self) -> str | None:
        """Link to Dask's own dashboard, when it runs one."""
        return self._cluster.dashboard_link

    def run_on_workers(self, fn, *args) -> dict:
        """``fn(*args)`` on every worker (``client.run``); workers lost meanwhile left out."""
        self.check_usable()
        return self._cluster.run_on_workers(fn, *args)

    def __repr__(self):
        if self.closed:
            return "<DaskScheduler: shut down>"
        return self._cluster.describe(self.total_open_tasks)

    # -- its routes ---------------------------------------------------------------------------

    @property
    def routes(self) -> list:
        """The routes tasks take, in the order they are tried (see ``routes/transport.py``)."""
        return self._routes.routes

    def route(self, name: str):
        """The route called ``name``, or ``None`` if unused here."""
        return self._routes.route(name)

    @property
    def direct_bytes(self) -> int:
        """From how many bytes a chunk goes straight to a worker process."""
        return self._routes.direct_bytes

    @direct_bytes.setter
    def direct_bytes(self, value: int) -> None:
        self._routes.direct_bytes = value

    def ship_callable(self, task_callable):
        """Send a callable to the workers used, once; its future."""
        with self._said_of_the_client():
            return self._routes.ship_callable(task_callable)

    @contextlib.contextmanager
    def _said_of_the_client(self):
        """An error sending work says the scheduler was shut down, or its client closed by hand,
        where that is the cause: Dask's own words for it differ from step to step."""
        try:
            yield
        except Exception as exc:
            if self.closed:  # shut down meanwhile: the cause, not the client it closed
                raise SchedulerError(
                    f"{type(self).__name__} was shut down while its work was sent to the workers"
                ) from exc
            if self._client_closed():
                raise _closed_by_hand() from exc
            raise

    def _client_closed(self) -> bool:
        """Whether the client was closed (``close()`` called), by hand or by ``shutdown()``."""
        return self.client.status in ("closing", "closed")

    def callable_alive(self, shipped) -> bool:
        """Whether a shipped callable is still held by a worker."""
        return self._routes.callable_alive(shipped)

    def release_callable(self, shipped) -> None:
        """Drop a shipped callable nobody needs any more."""
        self._routes.release_callable(shipped)

    def start_task(self, entry: OpenTask, data):
        """Start one opened task by its route."""
        with self._said_of_the_client():
            return self._routes.start_task(entry, data)

    def start_tasks(self, group: list) -> list | None:
        """Start opened tasks in one call where the first route can."""
        with self._said_of_the_client():
            return self._routes.start_tasks(group)

    def cancel_tasks(self, entries: list, handles: list) -> None:
        """Cancel open tasks and other handles a batch tracked."""
        self._routes.cancel_tasks(entries, handles)

    def _run_options(self) -> tuple:
        """``(topic, offload)`` for a task: where to report its start (only while someone
        listens), and the pool for GIL-holding callables."""
        topic = self._topic if self.has_subscribers else None
        offload = self._cluster.offload
        return topic, offload.token if offload else None

    def record(self, entry: OpenTask, outcome=None, error: BaseException | None = None) -> None:
        """Give back what the task's route holds, then record it in its batch."""
        self._routes.release(entry, outcome, error)
        super().record(entry, outcome, error)

    def _on_started(self, event) -> None:
        _, msg = event
        entry = self.outcomes.entry(msg.get("key"))
        if entry is not None:
            self.emit(TaskStarted(entry.info, msg["worker"], msg["time"]))

    # -- faults (on the outcomes thread) ------------------------------------------------------

    def _failed(self, entry: OpenTask, future) -> None:
        """A task that did not finish: its own error, or a fault to repair or report."""
        error = future.exception() if future.status == "error" else None
        if isinstance(error, LabkitError):  # the task itself raised
            return self.record(entry, error=error)
        where = entry.info.where()
        if self._client_closed():  # closed by hand, not by shutdown()
            return self.record(entry, error=_closed_by_hand().locate(**where))
        reason = adapter.cancel_reason(future)
        # A cancel with no reason ("unknown") comes from a lost input as well (a worker's
        # death races the message that names it); a restart says why.
        if reason not in ("", "unknown") and not adapter.lost_input(reason):
            return self.record(
                entry,
                error=CancelledError(f"the task was cancelled outside labkit ({reason})", **where),
            )
        lost = adapter.workers_lost_under(self.client, task_key_prefix(entry))
        if adapter.is_killed_worker(error) or len(lost) > adapter.allowed_failures():
            return self.record(entry, error=_worker_lost(entry, error, lost))
        if entry.attempts < self.max_attempts:
            return self._routes.resubmit(entry, error or reason)
        self.record(
            entry,
            error=SchedulerError(
                f"the task's inputs were lost with their workers {entry.attempts} times "
                f"({error or reason})",
                **where,
                worker=", ".join(lost) or None,
            ),
        )

    def _failed_to_send(self, entry: OpenTask, exc: BaseException) -> None:
        """A chunk did not reach a worker: send it again (its worker died under the copy,
        as a lost input would), or fail its task naming the chunk."""
        if not entry.is_open():
            return
        unpicklable = pickling_cause(exc) is not None  # no retry makes it picklable
        if not unpicklable and self._client_closed():
            return self.record(entry, error=_closed_by_hand().locate(**entry.info.where()))
        if (
            not unpicklable
            and entry.attempts < self.max_attempts
            and self.client.status == "running"
        ):
            return self._routes.resubmit(entry, f"{type(exc).__name__}: {exc}")
        kind = InputError if unpicklable else SchedulerError
        self.record(
            entry,
            error=kind(
                f"chunk {entry.info.chunk} could not be sent to a "
                f"worker: {type(exc).__name__}: {exc}",
                **entry.info.where(),
            ),
        )

    def _close(self) -> None:
        self.outcomes.close()
        if self._topic:
            with contextlib.suppress(Exception):
                self.client.unsubscribe_topic(self._topic)
        self._cluster.close()
        self._routes.close()


def _closed_by_hand() -> SchedulerError:
    """The error of work cut short by a client closed with ``close()``, not ``shutdown()``."""
    return SchedulerError(
        "the Dask client of this DaskScheduler was closed while its work ran; "
        "shut the scheduler down with shutdown() and make a new one"
    )


def _worker_lost(entry: OpenTask, error, lost: list[str]) -> WorkerLostError:
    """The error of a task under which workers kept dying."""
    last = adapter.killed_worker_address(error)
    workers = lost or ([last] if last else [])
    named = ", ".join(dict.fromkeys(workers)) or "unknown"
    return WorkerLostError(
        f"worker lost: {len(workers) or 'a'} worker(s) died while running this task "
        f"({named}); a task that crashes its worker process (os._exit, a segfault, "
        "running out of memory) fails here",
        **entry.info.where(),
        worker=workers[-1] if workers else None,
    )
