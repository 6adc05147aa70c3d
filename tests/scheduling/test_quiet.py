"""A labkit task's failure reaches its caller once, not also as a worker's log block."""

from __future__ import annotations

import logging
import threading
import time

import pytest

import labkit as lk
from tests.helpers import fail_on_two


class Records(logging.Handler):
    """Keeps the records of the logger it is attached to."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)

    def compute_failed(self) -> list[str]:
        return [str(r.args[0]) for r in self.records
                if isinstance(r.msg, str) and r.msg.startswith("Compute Failed")]


@pytest.fixture
def worker_log():
    log, handler = logging.getLogger("distributed.worker"), Records()
    log.addHandler(handler)
    yield handler
    log.removeHandler(handler)


def test_workers_do_not_log_labkit_task_failures_but_log_others(worker_log):
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        # the failure reaches the caller once: at get_results, or at an add_task that waited
        # for room in the window after chunk 2 had failed (a loaded machine)
        with pytest.raises(lk.TaskError, match="chunk 2"):
            for i in range(4):
                s.add_task(i, fail_on_two)
            s.get_results()
        future = s.client.submit(fail_on_two, 2, key="someone-else-1")
        with pytest.raises(Exception):
            future.result(timeout=30)
        del future
    failed = worker_log.compute_failed()
    assert "someone-else-1" in failed                       # other code's tasks still logged
    assert [k for k in failed if k.startswith("labkit-")] == []


@pytest.fixture
def state_machine_log():
    log, handler = logging.getLogger("distributed.worker.state_machine"), Records()
    handler.setLevel(logging.WARNING)
    log.addHandler(handler)
    yield handler
    log.removeHandler(handler)


def test_a_shutdown_under_running_tasks_logs_no_worker_warning_for_labkit_tasks(
        state_machine_log):
    """The owner hears of the shutdown (a SchedulerError); the closing worker's
    "ended with CancelledError" warning for the same task is not printed too."""
    RUNNING.clear()
    RELEASE.clear()
    s = lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2)
    try:
        s.add_task("labkit", _held)
        other = s.client.submit(_held, "other", key="someone-else-2")
        deadline = time.monotonic() + 60
        while len(RUNNING) < 2 and time.monotonic() < deadline:   # both are running now
            time.sleep(0.02)
        assert RUNNING == {"labkit", "other"}
        threading.Thread(target=s.shutdown).start()
        with pytest.raises(lk.SchedulerError, match="shut down"):
            s.get_results()
        del other

        def closed():
            return [r.getMessage() for r in state_machine_log.records
                    if "ended with CancelledError" in r.getMessage()]

        deadline = time.monotonic() + 60                  # the worker's threads end
        while not any("someone-else-2" in m for m in closed()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any("someone-else-2" in m for m in closed()), closed()   # others' still logged
        assert not [m for m in closed() if "labkit-" in m], closed()
    finally:
        RELEASE.set()
        s.shutdown()


RUNNING: set = set()          # the tasks of the test above that run now (module-level: the
RELEASE = threading.Event()   # in-process workers see the same objects)


def _held(name):
    """A task that says it runs, then waits (at most a minute) to be released."""
    RUNNING.add(name)
    RELEASE.wait(60)
    return name


@pytest.mark.timeout(300)
@pytest.mark.parametrize("modes", [("auto", "processes"), ("threads", "processes")])
def test_no_dask_chatter_below_warning_whatever_the_order_of_two_schedulers(modes):
    """A notebook opens the default scheduler and a ``mode="processes"`` one and shuts both
    down, in every order: nothing of Dask below WARNING reaches stderr (a notebook's cell),
    neither from this process nor from the worker processes; warnings still do."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-m", "tests.scheduling.quiet_orders", *modes],
                          cwd=root, env=env, capture_output=True, text=True, timeout=280)
    err = done.stderr
    assert done.returncode == 0, err[-3000:]
    chatter = [line for line in err.splitlines()
               if " - INFO - " in line or " - DEBUG - " in line or "chatter" in line]
    assert chatter == [], "\n".join(chatter[:20])
    assert err.count("=== ") == 5                     # every order ran
    assert "a real problem" in err.split("=== end")[0].rsplit("=== ", 1)[-1]
    assert "a real problem on a worker" in err         # the workers' warnings still show
