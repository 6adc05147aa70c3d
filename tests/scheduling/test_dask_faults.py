"""Lost workers: what was shipped is shipped again; a worker dying under a task is named."""

import os

import pytest

import labkit as lk
from labkit.scheduling.connect import scheduler_identity
from tests import helpers


@pytest.fixture
def own_scheduler():
    """A cluster of its own: its workers get restarted and killed."""
    from distributed import LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        with lk.DaskScheduler(cluster.scheduler_address) as s:
            yield s


def kill_own_worker(x):
    """A task that takes its worker process down with it (as a segfault would)."""
    os._exit(3)


def test_after_both_workers_restart_the_same_function_runs_again(own_scheduler):
    s = own_scheduler
    s.add_task(1, helpers.double)
    assert s.get_results() == [2]
    before = set(s.client.run(os.getpid).values())
    s.client.restart()                           # every worker, and the shipped callable, gone
    assert not before & set(s.client.run(os.getpid).values())
    for attempt in range(2):
        for x in range(4):
            s.add_task(x, helpers.double)      # the same plain function as before
        assert sorted(s.get_results()) == [0, 2, 4, 6]


def test_a_batch_whose_workers_all_die_mid_way_finishes(own_scheduler):
    """Tasks waiting on a callable lost with every worker: re-shipped, resubmitted, done."""
    import signal
    s = own_scheduler
    with s.batch() as b:
        for x in range(6):
            b.add_task(x, helpers.sleep_then_return)
        for pid in s.client.run(os.getpid).values():
            os.kill(pid, signal.SIGKILL)         # the nannies start new, empty workers
        assert sorted(b.get_results()) == list(range(6))


def test_a_restart_cancels_the_open_tasks_and_says_so(own_scheduler):
    s = own_scheduler
    with s.batch() as b:
        for x in range(6):
            b.add_task(x, helpers.sleep_then_return)
        s.client.restart()
        with pytest.raises(lk.CancelledError, match="scheduler-restart"):
            b.get_results()


def test_a_task_that_kills_its_worker_raises_worker_lost(own_scheduler, recorder):
    s = own_scheduler
    s.subscribe(recorder)
    workers = set(scheduler_identity(s.client)["workers"])
    with s.batch() as b:
        b.add_task(1, helpers.double)
        with pytest.raises(lk.WorkerLostError, match="worker lost") as info:
            b.add_task(2, kill_own_worker)
            b.get_results()
    err = info.value
    assert isinstance(err, lk.SchedulerError)
    assert err.where["chunk"] == 1 and err.where["worker"].startswith("tcp://127.0.0.1:")
    assert "died while running this task" in str(err)
    assert any(w in str(err) for w in workers)              # the workers it took down
    failed = recorder.of(lk.events.TaskFailed)
    assert failed and failed[-1].error_type == "WorkerLostError"
    s.add_task(5, helpers.double)                           # the scheduler works on
    assert s.get_results() == [10]
