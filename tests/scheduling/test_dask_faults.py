"""Lost workers: what was shipped is shipped again; a worker dying under a task is named."""

import os

import numpy as np

import pytest

import labkit as lk
from labkit.scheduling.dask.connect import scheduler_identity
from tests import helpers

pytestmark = pytest.mark.soak  # `make soak` runs these again and again


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


def test_a_big_chunk_whose_worker_dies_under_its_copy_is_sent_again(dask_scheduler,
                                                                     monkeypatch):
    """A chunk scattered straight to a worker that dies meanwhile is sent again (as a lost
    input is), not reported as a failed task; each chunk is trained once."""
    from distributed.comm import CommClosedError
    s, failures = dask_scheduler, []
    scatter = s.client.scatter

    def dying(data, *args, **kwargs):
        if kwargs.get("direct") and len(failures) < 2:   # the first two copies: their worker
            failures.append(True)                        # "died" under them
            raise CommClosedError("in <TCP ConnectionPool.update_data>: Connection reset by "
                                  "peer")
        return scatter(data, *args, **kwargs)
    monkeypatch.setattr(s.client, "scatter", dying)
    monkeypatch.setattr(s, "direct_bytes", 1)            # every chunk goes straight to a worker
    data = [np.random.default_rng(k).normal(size=(50, 4)) for k in range(6)]
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
    flow.train([data], scheduler=s, join="client")
    serial = lk.Flow([lk.nodes.PCA(output_dim=2)])
    serial.train([data])
    assert len(failures) == 2 and not flow[0].is_training()
    helpers.assert_nodes_equal(serial[0], flow[0])
    assert s.n_open_tasks == 0


def test_a_callable_shipped_while_every_worker_restarts_waits_for_a_new_one(dask_scheduler,
                                                                            monkeypatch):
    """Right after every worker died, the scheduler lists none until a nanny has started
    a new one: shipping waits for it instead of failing after a few quick attempts."""
    from labkit.scheduling.dask import connect
    identity, asked = connect.scheduler_identity, []

    def restarting(client):
        asked.append(True)
        info = identity(client)
        return dict(info, workers={}) if len(asked) <= 8 else info   # none for a while
    monkeypatch.setattr(connect, "scheduler_identity", restarting)
    dask_scheduler.add_task(3, helpers.double)
    assert dask_scheduler.get_results() == [6] and len(asked) > 8
