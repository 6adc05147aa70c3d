"""An embedded cluster closes its worker processes at once, even with a task still running
(labkit/scheduling/dask/cluster.py::close_workers)."""

from __future__ import annotations

import logging
import os
import time

import psutil

import labkit as lk


def test_a_shutdown_with_a_blocking_task_running_closes_its_workers_without_a_kill(caplog):
    s = lk.DaskScheduler(mode="processes", n_workers=2, threads_per_worker=1)
    try:
        pids = list(s.client.run(os.getpid).values())
        running = s.client.submit(time.sleep, 120, pure=False)   # holds a worker's only thread
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(s.client.processing().values()):
            time.sleep(0.05)  # until a worker runs it
        assert any(s.client.processing().values()), "the task never started"
    except BaseException:
        s.shutdown()
        raise
    with caplog.at_level(logging.WARNING, logger="distributed.nanny"):
        started = time.monotonic()
        s.shutdown()
        took = time.monotonic() - started
    # before: the worker waited for its pool's thread, 24 s, then its nanny killed it
    assert took < 20, took
    assert not [r for r in caplog.records if "still alive" in r.getMessage()]
    assert not [p for p in pids if psutil.pid_exists(p)
                and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
