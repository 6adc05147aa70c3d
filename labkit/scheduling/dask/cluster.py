"""The embedded cluster: which kind to start, chosen by measurement.

Three modes, measured on 2 cores (``benchmarks/RESULTS.md``, issue 12):

``"auto"`` (the default)
    One in-process worker with a thread per core (chunks reach tasks by
    reference, nothing is pickled, BLAS is held to one thread per task), plus
    a pool of worker processes, started on first use, for tasks whose
    callable ``holds_gil`` (pure-Python nodes and functions marked so).
``"threads"``
    The in-process worker alone: every task on a thread.
``"processes"``
    ``n_workers`` worker processes with one thread each on 127.0.0.1 (chunks
    are pickled to them): for work that holds the GIL throughout, or tests
    that kill a worker.

``LocalCluster``'s own ``processes=True/False`` are understood as
``"processes"``/``"threads"``.

Examples
--------
>>> resolve_mode("auto", None), resolve_mode("auto", False), resolve_mode("auto", True)
('auto', 'threads', 'processes')
>>> cluster_size("processes", None, None, n_cores=4)
(4, 1)
>>> cluster_size("auto", None, None, n_cores=4)
(1, 4)
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
import os
import threading
from typing import Any

import dask
from dask.utils import parse_timedelta

from ...constraints import Options, check_argument
from ...errors import InputError, LabkitError, SchedulerError
from .connect import check_client, check_cluster, check_limit, connect
from .dask_adapter import keep_shipped_copies
from .lifetime_nanny import LifetimeNanny
from .main_guard import check_main_guarded
from .quiet import install as quiet_install
from .quiet import quiet_clusters
from .worker_start import resolve_start_method, worker_start

__all__ = [
    "MODES",
    "resolve_mode",
    "cluster_size",
    "start_cluster",
    "check_cluster_keywords",
    "cores",
    "no_message_log",
    "check_cluster_choice",
    "Opened",
    "open_cluster",
    "run_on_workers",
    "dashboard_link",
    "close_workers",
    "WORKER_CLOSE",
    "RESTART_WAIT",
    "restart_wait",
]

logger = logging.getLogger("labkit.scheduling")

MODES = ("auto", "threads", "processes")


def cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def resolve_mode(mode: str, processes: bool | None) -> str:
    """The mode for ``mode`` and LocalCluster's ``processes`` keyword."""
    check_argument("mode", mode, [Options(MODES)])
    if processes is None:
        return mode
    wanted = "processes" if processes else "threads"
    if mode not in ("auto", wanted):
        raise InputError(f"mode={mode!r} contradicts processes={processes!r}", argument="mode")
    return wanted


def cluster_size(
    mode: str, n_workers: int | None, threads_per_worker: int | None, n_cores: int | None = None
) -> tuple[int, int]:
    """``(n_workers, threads_per_worker)``: by default all cores, one process or one thread each."""
    n = n_cores or cores()
    check_limit("n_workers", n_workers)
    check_limit("threads_per_worker", threads_per_worker)
    if mode == "processes":
        return n_workers or n, threads_per_worker or 1
    workers = n_workers or 1
    return workers, threads_per_worker or max(1, n // workers)


def check_cluster_keywords(mode: str, kwargs: dict) -> None:
    """An InputError naming a keyword that neither LocalCluster nor its workers take.

    LocalCluster hands keywords it does not know to each worker, whose
    ``TypeError`` then comes from deep inside Dask (or, for worker processes,
    as "Nanny failed to start" after the cluster half started).
    """
    from distributed import LocalCluster, Nanny, Worker
    from distributed.core import Server

    takers = [LocalCluster, Worker, Server] + ([Nanny] if mode == "processes" else [])
    known = {name for cls in takers for name in inspect.signature(cls).parameters}
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise InputError(
            f"DaskScheduler got keyword(s) {', '.join(map(repr, unknown))} that "
            "neither distributed.LocalCluster nor its workers take",
            argument=unknown[0],
        )


def start_cluster(mode: str, n_workers: int, threads_per_worker: int, **kwargs):
    """A ``LocalCluster`` for ``mode``; nothing listens beyond 127.0.0.1."""
    from distributed import LocalCluster

    check_cluster_keywords(mode, kwargs)
    if mode == "processes":  # each spawned worker imports the script: not from its top level
        method = dask.config.get("distributed.worker.multiprocessing-method", "spawn")
        check_main_guarded(f'lk.DaskScheduler(mode="{mode}")', method)
    options = dict(
        n_workers=n_workers, threads_per_worker=threads_per_worker, dashboard_address="127.0.0.1:0"
    )
    if mode == "processes":
        options.update(processes=True, host="127.0.0.1")
    else:
        # The in-process transport listens on no socket; giving it a host breaks it.  The
        # worker's own HTTP server (metrics) would bind every interface: keep it on loopback.
        options.update(processes=False, worker_dashboard_address="127.0.0.1:0")
    options.update(kwargs)
    return LocalCluster(**options)


def no_message_log():
    """A config context in which new Dask comms keep no log of recent messages.

    Every batched stream of Dask keeps its last 1000 messages for debugging
    (``distributed.admin.low-level-log-length``).  A chunk submitted inside a
    task is part of such a message, so the log kept up to 1000 chunks alive:
    on the in-process cluster every chunk of a training (1.2 GB in the
    benchmark), and up to 1000 small chunks with worker processes.  Streams
    read the setting when they are made, so clusters and clients made inside
    this context keep no log.
    """
    return dask.config.set({"distributed.admin.low-level-log-length": 0})


def check_cluster_choice(address, client, embedded: dict, cluster=None) -> None:
    """The rules between arguments: one of an address, a client or a cluster, and
    cluster options for none of them.

    ``embedded``: the options that size or shape an embedded cluster, as given
    (those of an existing cluster would be ignored: it is used as it is).
    """
    chosen = [
        name
        for name, value in (("address", address), ("client", client), ("cluster", cluster))
        if value is not None
    ]
    if len(chosen) > 1:
        raise InputError(
            f"give the scheduler's address, a client or a cluster, one of them; got "
            f"{' and '.join(chosen)}",
            argument=chosen[-1],
        )
    given = [
        name
        for name, value in embedded.items()
        if value is not None and not (name == "mode" and value == "auto")
    ]
    if given and chosen:
        raise InputError(
            f"{', '.join(given)} shape the embedded cluster only; a cluster "
            f"given by {chosen[0]} is used as it is",
            argument=given[0],
        )
    if client is not None:
        check_client(client)  # an open one
    if cluster is not None:
        check_cluster(cluster)  # not closed


@dataclasses.dataclass
class Opened:
    """A client and what it reaches: ``cluster`` is ``None`` unless labkit started it."""

    client: Any
    cluster: Any
    owns_client: bool
    mode: str  # "auto", "threads", "processes", or "existing"
    in_process: bool  # the workers are threads of this process
    quiet: Any = None  # Dask's chatter held quiet while the embedded cluster lives
    given: Any = None  # a cluster given by ``cluster=``: used, scaled by its owner, left open
    keeper: Any = None  # restarts closed nannies (:func:`keep_nannies`); stopped first

    def close(self) -> None:
        """Close what was opened here: the client and the cluster, not ones given."""
        try:
            if self.keeper is not None:  # the nannies about to close stay closed
                self.keeper.close()
            if self.owns_client:
                self.client.close()
            if self.cluster is not None:
                close_workers(self.cluster, WORKER_CLOSE)
                self.cluster.close()
        finally:
            quiet, self.quiet = self.quiet, None
            if quiet is not None:  # after the cluster's last words
                quiet.close()


#: Seconds a worker process of the embedded cluster has to close before its nanny kills it.
WORKER_CLOSE = 30.0


def close_workers(cluster, timeout: float) -> None:
    """Ask each worker process of ``cluster`` (a ``LocalCluster``) to close, waiting up to
    ``timeout`` seconds for each to end on its own before its nanny kills it.

    A ``LocalCluster`` gives a worker 4 s (80% of its nannies' 5 s): a worker that
    imported torch takes longer than that to leave its interpreter on a loaded machine
    (its modules' teardown alone took 3 s at load 25 on 2 cores), and was killed
    ("Worker process still alive after 4.0 seconds, killing", once a worker).

    A worker does not wait for its pool's threads (``executor_wait=False``): a task
    still running there (a user's call that blocks, a cancelled trial's step) would
    hold the close for the whole ``timeout``, 24 s, and then be killed anyway.  The
    pool's threads are daemons; they end with the process.
    """
    import asyncio

    async def close_one(nanny):
        if nanny.process is not None:  # the worker process first, not waiting for its pool
            await nanny.process.kill(timeout=timeout, executor_wait=False)
        await nanny.close(timeout=timeout)

    async def close_all():
        nannies = [w for w in list(cluster.workers.values()) if hasattr(w, "kill")]
        await asyncio.gather(*(close_one(w) for w in nannies), return_exceptions=True)

    try:
        cluster.sync(close_all)
    except Exception:  # the cluster's own close still ends every process
        logger.debug("labkit: closing the workers before their cluster failed", exc_info=True)


def open_cluster(
    address, client, given, connect_timeout, embedded: dict, cluster_kwargs: dict
) -> Opened:
    """The client of ``client``, of the scheduler at ``address``, of the cluster ``given``,
    or of a new embedded cluster (``embedded``: its ``mode``, ``n_workers`` and
    ``threads_per_worker``; ``cluster_kwargs`` for ``LocalCluster``)."""
    quiet_install()  # Dask's handlers exist once it is imported: they get labkit's filters
    if client is not None:
        opened = Opened(client, None, False, "existing", False)
    elif given is not None:  # its own scheduler's address: reached as any other, in bounded time
        with no_message_log():
            reached = connect(given.scheduler_address, connect_timeout)
        opened = Opened(reached, None, True, "existing", False, given=given)
    elif address is not None:
        with no_message_log():
            opened = Opened(connect(address, connect_timeout), None, True, "existing", False)
    else:
        opened = _open_embedded(**embedded, cluster_kwargs=cluster_kwargs)
    nthreads = opened.client.nthreads()
    keep_shipped_copies(opened.client)  # a callable shipped once stays on every worker
    # a client of someone else's in-process cluster: its workers are threads here too
    opened.in_process = (
        opened.mode in ("auto", "threads")
        or (bool(nthreads) and all(a.startswith("inproc://") for a in nthreads))
        or (given is not None and str(given.scheduler_address).startswith("inproc://"))
    )
    return opened


#: Seconds Dask's cluster waits for a worker that left before it drops the worker's nanny,
#: where the nannies restart their workers (``lifetime_restart``): a day, that is never while
#: labkit uses the cluster.  Dask waits 15 s.
RESTART_WAIT = 86400.0


def restart_wait(cluster_kwargs: dict):
    """A config context in which the embedded cluster keeps the nannies that restart their
    workers at their lifetime's end (nothing to do without ``lifetime_restart``).

    Dask's ``SpecCluster`` looks once, ``lost-worker-timeout`` after a worker left, whether
    a worker of the same name is registered *at that moment*, and closes its nanny if not.
    A nanny that restarts its worker every lifetime leaves its name unregistered for the
    seconds of each restart: whatever the wait, the look may fall into a later restart, and
    the cluster closed a nanny that was working (with 120 s, one look in four did so on 2
    cores, and the cluster drained to no worker within minutes).  A nanny that cannot
    restart its worker closes itself, so the look has nothing to do here: it is put off
    for :data:`RESTART_WAIT` seconds.  (With Dask's 15 s a restart slower than 15 s, as
    on a loaded machine, lost its nanny as well.)
    """
    key = "distributed.deploy.lost-worker-timeout"
    if not cluster_kwargs.get("lifetime_restart"):
        return contextlib.nullcontext()
    given = parse_timedelta(dask.config.get(key, "15s"))
    return dask.config.set({key: f"{max(given, RESTART_WAIT)}s"})


#: Seconds between two looks for a nanny that closed in an embedded lifetime-restart cluster.
KEEP_EVERY = 1.0


def keep_nannies(cluster) -> contextlib.AbstractContextManager:
    """A context, held for the cluster's life, in which a nanny of ``cluster`` that closed is
    started again (a ``lifetime_restart`` cluster keeps its size).

    Dask races itself at a lifetime's end: the scheduler removes the retiring worker, a
    heartbeat that crosses that removal is answered "missing", and the worker closes
    *with its nanny* ("Scheduler was unaware of this worker; shutting down"), so the
    cluster lost a worker for good, now and then, over minutes of restarts.  Its nannies
    (:class:`.LifetimeNanny`) decline that close; this keeper starts again one that closed
    another way.  Each look
    (every :data:`KEEP_EVERY` s, on the cluster's loop) forgets a closed nanny that the
    cluster's spec still names and has the cluster start that name again.
    """
    from tornado.ioloop import PeriodicCallback

    stopped = threading.Event()  # set before the workers are closed on purpose

    def look() -> None:
        if stopped.is_set() or cluster.status.name != "running":
            return
        closed = [
            name
            for name, nanny in list(cluster.workers.items())
            if nanny.status.name in ("closed", "failed") and name in cluster.worker_spec
        ]
        for name in closed:
            logger.info("labkit: the nanny of worker %r closed; starting it again", name)
            del cluster.workers[name]
        if closed:
            cluster.scale(len(cluster.worker_spec))  # opens what the spec names and is not open

    watch = PeriodicCallback(look, KEEP_EVERY * 1000)
    cluster.loop.add_callback(watch.start)
    stack = contextlib.ExitStack()
    stack.callback(lambda: cluster.loop.add_callback(watch.stop))
    stack.callback(stopped.set)  # first (last in, first out): no look starts after this
    return stack


def _open_embedded(
    mode: str, n_workers, threads_per_worker, cluster_kwargs: dict, start_method=None
) -> Opened:
    """A new embedded ``LocalCluster`` and its client; Dask's chatter quiet while it lives
    (and, for restarting workers, the wait for them longer: :func:`restart_wait`; worker
    processes started by ``start_method``: :mod:`.worker_start`)."""
    from distributed import Client

    size = cluster_size(mode, n_workers, threads_per_worker)
    cluster = None
    quiet = contextlib.ExitStack()
    quiet.enter_context(restart_wait(cluster_kwargs))  # read when a worker leaves: held for life
    if mode == "processes":  # read at each worker's (re)start: held for life
        quiet.enter_context(worker_start(resolve_start_method(start_method)))
    quiet.enter_context(quiet_clusters())  # before its first words
    if mode == "processes" and cluster_kwargs.get("lifetime_restart"):  # Dask's race: its doc
        cluster_kwargs = {"worker_class": LifetimeNanny, **cluster_kwargs}
    try:
        with no_message_log():
            cluster = start_cluster(mode, *size, **cluster_kwargs)
            keeper = keep_nannies(cluster) if cluster_kwargs.get("lifetime_restart") else None
            return Opened(Client(cluster), cluster, True, mode, False, quiet, keeper=keeper)
    except BaseException:
        if cluster is not None:
            cluster.close()
        quiet.close()
        raise


def run_on_workers(client, fn, *args, workers=None) -> dict:
    """``fn(*args)`` on every worker (of ``workers``; ``client.run``); lost ones left out."""
    try:
        results = client.run(fn, *args, on_error="return", workers=workers)
    except Exception as exc:
        raise SchedulerError(f"could not reach the workers: {type(exc).__name__}: {exc}") from exc
    failed = {w: r for w, r in results.items() if isinstance(r, BaseException)}
    for worker, error in failed.items():
        if isinstance(error, LabkitError):
            raise error.locate(worker=worker)
        logger.warning(
            "labkit: worker %s did not answer (%s: %s)", worker, type(error).__name__, error
        )
    return {w: r for w, r in results.items() if w not in failed}


def dashboard_link(opened: Opened) -> str | None:
    """Link to Dask's own dashboard, when it runs one."""
    if opened.cluster is not None and opened.in_process:
        # Dask names an in-process cluster's host after the machine's address,
        # where its dashboard does not listen: it binds 127.0.0.1 only.
        server = getattr(opened.cluster.scheduler, "http_server", None)
        port = getattr(server, "port", None)
        return f"http://127.0.0.1:{port}/status" if port else None
    return getattr(opened.client, "dashboard_link", None)
