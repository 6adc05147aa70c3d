"""A worker lost mid-run never fails a run that the other workers can finish.

On every kind of cluster labkit starts (``"processes"``; ``"auto"``, whose
GIL-holding tasks run in a pool of processes) and on a cluster reached by
address, one worker process is SIGKILLed at two moments: as a phase starts
(its callable is being shipped to the workers) and in the middle of a phase.
The run completes and equals serial training.
"""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest

import labkit as lk
from labkit.events import PhaseStarted, TaskStarted
from tests import helpers

pytestmark = pytest.mark.soak  # `make soak` runs these again and again

CHUNKS = [np.random.default_rng(k).normal(size=(40, 4)) for k in range(24)]


class Killer:
    """A subscriber that SIGKILLs ``victim()`` once, at the chosen moment of node 1's phase."""

    def __init__(self, moment: str, victim):
        self.moment, self.victim = moment, victim
        self.killed: int | None = None
        self.starts = 0
        self._lock = threading.Lock()

    def __call__(self, event):
        with self._lock:
            if self.killed is not None or not self._due(event):
                return
            self.killed = self.victim()
        os.kill(self.killed, signal.SIGKILL)

    def _due(self, event) -> bool:
        if self.moment == "phase-start":
            return isinstance(event, PhaseStarted) and event.node == 1
        if isinstance(event, TaskStarted) and event.info.node == 1:
            self.starts += 1
            return self.starts == 6
        return False


def _serial():
    flow = lk.Flow([helpers.SlowMoments(0.0), helpers.SlowMoments(0.0)])
    flow.train([CHUNKS, CHUNKS])
    return flow


@pytest.fixture
def address_cluster():
    """A cluster of its own, reached by address: one of its workers gets killed."""
    from distributed import LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def _open(kind: str, address: str | None):
    if kind == "address":
        return lk.DaskScheduler(address)
    if kind == "processes":
        return lk.DaskScheduler(mode="processes", n_workers=2)
    return lk.DaskScheduler(mode="auto", n_workers=1, threads_per_worker=2)


def _victim(kind: str, s):
    """The pid to kill: a pool process under ``"auto"``, else a Dask worker process."""
    if kind == "auto":
        return lambda: s.offload_pool.pids()[0]
    pid = sorted(s.client.run(os.getpid).values())[0]
    return lambda: pid


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("moment", ["phase-start", "mid-phase"])
@pytest.mark.parametrize("kind", ["processes", "auto", "address"])
def test_a_lost_worker_never_fails_a_run_the_others_can_finish(kind, moment, request):
    address = request.getfixturevalue("address_cluster") if kind == "address" else None
    with _open(kind, address) as s:
        flow = lk.ParallelFlow([helpers.SlowMoments(0.05), helpers.SlowMoments(0.05)])
        if kind == "auto":   # the pool starts with the first GIL-holding task
            s.add_task(CHUNKS[0], lk.FunctionCallable(np.sum, holds_gil=True))
            s.get_results()
        killer = Killer(moment, _victim(kind, s))
        s.subscribe(killer)
        flow.train([CHUNKS, CHUNKS], scheduler=s)
    assert killer.killed is not None, "no worker was killed"
    serial = _serial()
    for trained, expected in zip(flow, serial):
        np.testing.assert_allclose(trained.total, expected.total, rtol=1e-10, atol=1e-9)
        np.testing.assert_allclose(trained.mean, expected.mean, rtol=1e-10, atol=1e-12)
        assert trained.samples_seen == expected.samples_seen
