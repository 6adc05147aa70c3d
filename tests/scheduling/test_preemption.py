"""A preemption notice (SIGTERM) is a graceful leave; a SIGKILL stays a loss.

Real worker processes under nannies.  Two places a SIGTERM lands on a real cluster:
the ``dask worker`` process (its nanny: Kubernetes' pod eviction, a spot machine's
shutdown), and the worker process itself (SLURM signals every process of the job).
Dask announces the first (its worker closes with the reason ``signal-15``) and not the
second (the process dies at once); labkit's plugin announces the second.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import labkit as lk
from labkit.scheduling.dask.dask_adapter import left_gracefully, watch_retirements
from tests.helpers import until


@contextlib.contextmanager
def dask_worker(client, timeout: float = 120):
    """A ``dask worker`` process (a nanny and its worker, one thread) joined to ``client``'s
    scheduler, as dask-jobqueue and dask-kubernetes start them; yields (process, address)."""
    before = set(client.nthreads())
    proc = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", client.scheduler.address,
         "--nthreads", "1", "--no-dashboard"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        until(lambda: set(client.nthreads()) - before or proc.poll() is not None, timeout,
              "the dask worker to join")
        assert proc.poll() is None, "the dask worker did not start"
        (address,) = set(client.nthreads()) - before
        yield proc, address
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(60)


def test_a_sigterm_to_a_worker_process_is_a_graceful_leave_a_sigkill_a_loss():
    with lk.DaskScheduler(mode="processes", n_workers=2, threads_per_worker=1) as s:
        watch_retirements(s.client)
        pids = s.run_on_workers(os.getpid)
        termed, killed = sorted(pids)
        os.kill(pids[termed], signal.SIGTERM)
        os.kill(pids[killed], signal.SIGKILL)
        until(lambda: not {termed, killed} & set(s.client.nthreads()), 120, "the workers to leave")
        assert left_gracefully(s.client, [termed, killed]) == [termed]
        # the killed worker's nanny starts it again; the preempted one closed with its nanny
        until(lambda: len(s.client.nthreads()) == 1, 120, "the killed worker to restart")


def test_a_sigterm_to_a_dask_worker_process_is_a_graceful_leave():
    with lk.DaskScheduler(mode="processes", n_workers=1, threads_per_worker=1) as s:
        watch_retirements(s.client)
        with dask_worker(s.client) as (proc, address):
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0  # it closed its worker and ended
            until(lambda: address not in s.client.nthreads(), 60, "the worker to leave")
            assert left_gracefully(s.client, [address]) == [address]
        with dask_worker(s.client) as (proc, address):
            proc.kill()  # SIGKILL to the nanny: its worker process, orphaned, exits at once
            until(lambda: address not in s.client.nthreads(), 120, "the worker to leave")
            assert left_gracefully(s.client, [address]) == []
