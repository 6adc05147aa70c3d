"""A preemption notice (SIGTERM) to a worker process: the worker leaves gracefully, as if retired.

A spot machine taken back, a Kubernetes pod evicted and a SLURM job at its
time limit all get a SIGTERM first, and a SIGKILL some seconds later.  Dask
answers the SIGTERM only where ``dask worker`` runs (its nanny): the nanny
closes its worker, which tells the scheduler why (a ``closing-worker`` event
whose reason is ``"signal-15"``).  A worker *process* under a nanny keeps the
default action: it dies at once, and the scheduler sees a loss it cannot tell
from a SIGKILL (SLURM signals every process of the job, the worker's too).

:func:`watch_preemption` registers a worker plugin (once per cluster, workers
that join later included) that has each worker process under a nanny take a
SIGTERM as a notice: the scheduler retires the worker, as ``client.retire_workers``
does (its data moved, its nanny closed with it); a scheduler that cannot retire it
sees it close for the signal (reason ``"signal-15"``), as ``dask worker`` closes.
A second SIGTERM, or the SIGKILL that follows, ends the process at once.  The
scheduler's retirement watch (:func:`.dask_adapter.watch_retirements`) then counts
the departure as graceful, and a trial that ran there moves rather than fails.

A worker without a nanny, or whose event loop is not its process's main thread
(the threads of an in-process cluster), keeps its signals as they are: its
process is not its own.

A worker with a ``lifetime`` (``--lifetime``, ``LocalCluster(lifetime=...)``)
knows from its start when it will retire: a second plugin, registered with the
first, has it say so with each of its heartbeats, as the metric
:data:`RETIRES_AT` (the time, on the worker's clock, its lifetime ends), so that
work that needs a worker for a while (a group trial) can pass over one about to
leave (:func:`retires_in`).
"""

from __future__ import annotations

import logging
import math
import time

__all__ = [
    "LIFETIMES",
    "PREEMPTION",
    "RETIRES_AT",
    "SIGNAL_REASON",
    "retires_in",
    "watch_preemption",
]

logger = logging.getLogger("labkit.scheduling")

#: The name of labkit's preemption plugin on the workers.
PREEMPTION = "labkit-preemption"

#: How a close for a signal starts its reason, as Dask's ``dask worker`` says it ("signal-15").
SIGNAL_REASON = "signal-"

#: The metric a worker with a ``lifetime`` sends with its heartbeats: when that lifetime ends.
RETIRES_AT = "labkit-retires-at"

#: The name of labkit's plugin that has each worker with a lifetime say when it ends.
LIFETIMES = "labkit-lifetimes"


def retires_in(worker: dict, now: float | None = None) -> float:
    """Seconds until a worker (the scheduler's record of it) reaches its lifetime; inf without one.

    >>> retires_in({"metrics": {RETIRES_AT: 130.0}}, now=100.0)
    30.0
    >>> retires_in({"metrics": {}})
    inf
    """
    at = (worker.get("metrics") or {}).get(RETIRES_AT)
    if not isinstance(at, (int, float)):
        return math.inf
    return float(at) - (time.time() if now is None else now)


def watch_preemption(client) -> None:
    """Have every worker process under a nanny of ``client``'s cluster (now and later) leave
    gracefully on a SIGTERM.  A cluster that refuses plugins keeps Dask's behaviour."""
    try:
        client.register_plugin(_plugin(), name=PREEMPTION)
        client.register_plugin(_lifetimes(), name=LIFETIMES)
    except Exception:  # an old or locked-down cluster: a SIGTERM stays a loss
        logger.debug("labkit: could not watch the workers for preemption", exc_info=True)


def _plugin():
    """The worker plugin, made here so that it travels by value (the worker needs no labkit)."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class Preemption(WorkerPlugin):
        """Turns a SIGTERM to its worker's process into the worker's graceful close."""

        idempotent = True  # registered again by each sweep and fit: the first one stays
        name = PREEMPTION
        loop = None  # the worker's loop, once its SIGTERM is watched
        closing = None  # the close under way (asyncio keeps only weak references to tasks)

        def setup(self, worker) -> None:
            """Watch for a SIGTERM on the worker's loop, where its process is its own."""
            import asyncio
            import signal
            import threading

            if worker.nanny is None or threading.current_thread() is not threading.main_thread():
                return  # not a process of its own: its signals stay as they are
            loop = asyncio.get_running_loop()
            try:
                loop.add_signal_handler(signal.SIGTERM, self.notice, worker)
            except (NotImplementedError, RuntimeError, ValueError):  # no signals on this loop
                return
            self.loop = loop

        def notice(self, worker) -> None:
            """On the worker's loop: a SIGTERM came; leave gracefully (once)."""
            import asyncio

            self.teardown(worker)  # a second SIGTERM ends the process at once
            self.closing = asyncio.ensure_future(self.leave(worker))

        @staticmethod
        async def leave(worker) -> None:
            """Be retired, as by ``client.retire_workers``; else close for the signal."""
            import contextlib
            import signal

            reason = f"signal-{int(signal.SIGTERM)}"
            with contextlib.suppress(Exception):  # the scheduler closes it meanwhile
                await worker.scheduler.retire_workers(
                    workers=[worker.address],
                    close_workers=True,
                    remove=True,
                    stimulus_id=f"labkit-{reason}-{worker.address}",
                )
            await worker.close(nanny=True, reason=reason)  # closed already: waits for its end

        def teardown(self, worker) -> None:
            """Give SIGTERM its default action back (the process ends at once)."""
            import signal

            if self.loop is not None:
                self.loop.remove_signal_handler(signal.SIGTERM)
                self.loop = None

    return Preemption()


def _lifetimes():
    """The worker plugin that says when a worker's lifetime ends, made here to travel by value."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class Lifetimes(WorkerPlugin):
        """Sends, with each of its worker's heartbeats, when the worker's lifetime ends."""

        idempotent = True  # registered again by each sweep and fit: the first one stays
        name = LIFETIMES
        metric = RETIRES_AT

        def setup(self, worker) -> None:
            """Put the metric on a worker that has a lifetime."""
            if worker.lifetime:  # its timer started as the worker was made
                ends = self.made_at(worker) + worker.lifetime
                worker.metrics[self.metric] = lambda _worker: ends

        @staticmethod
        def made_at(worker) -> float:
            """When ``worker`` was made: its system monitor's first sample, taken then, while
            the monitor keeps it (an hour); else now (the plugin comes as a worker starts)."""
            import time

            try:
                times = worker.monitor.quantities["time"]
                if times and worker.monitor.count <= len(times):
                    return float(times[0])
            except (AttributeError, KeyError, TypeError):  # another Dask: none kept
                pass
            return time.time()

    return Lifetimes()
