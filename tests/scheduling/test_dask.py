"""What only the Dask scheduler does: its cluster, shipping, futures and delayed."""

import dask
import numpy as np
import psutil
import pytest

import labkit as lk
from labkit.events import TaskStarted
from labkit.scheduling.dask.connect import scheduler_identity
from tests import helpers
from tests.helpers import own_client


def test_callable_is_shipped_once_not_per_task(dask_scheduler):
    helpers.CountingCallable.pickled = 0
    callable_ = helpers.CountingCallable()
    for x in range(20):
        dask_scheduler.add_task(x, callable_)
    assert sorted(dask_scheduler.get_results()) == [1.0 + x for x in range(20)]
    assert 1 <= helpers.CountingCallable.pickled <= 2


def test_setup_environment_once_per_worker_process(dask_scheduler):
    dask_scheduler.add_task(0, helpers.EnvCallable())
    for x in range(1, 12):
        dask_scheduler.add_task(x)
    results = dask_scheduler.get_results()
    assert len(results) == 12
    assert {setups for _, setups in results} == {1}  # every task saw exactly one setup


def test_task_started_events_name_real_workers(dask_scheduler, recorder):
    dask_scheduler.subscribe(recorder)
    for x in range(6):
        dask_scheduler.add_task(x, helpers.sleep_then_return)
    dask_scheduler.get_results()
    workers = set(scheduler_identity(dask_scheduler.client)["workers"])
    started = recorder.of(TaskStarted)
    assert started, "no TaskStarted event arrived"
    assert {e.worker for e in started} <= workers


def test_futures_and_delayed_chunks_are_used_where_they_lie(dask_scheduler):
    futures = dask_scheduler.client.scatter([np.full((2, 2), v) for v in range(3)])
    for f in futures:
        dask_scheduler.add_task(f, lambda a: float(a.sum()))
    delayed = [dask.delayed(np.full)((2, 2), v) for v in range(3, 5)]
    for d in delayed:
        dask_scheduler.add_task(d)
    assert sorted(dask_scheduler.get_results()) == [0.0, 4.0, 8.0, 12.0, 16.0]


def test_existing_cluster_by_address_and_client_is_left_running(cluster):
    with lk.DaskScheduler(cluster.scheduler_address) as s:
        s.add_task(1, helpers.double)
        assert s.get_results() == [2]
    with own_client(cluster.scheduler_address) as client:
        with lk.DaskScheduler(client=client) as s:
            s.add_task(2, helpers.double)
            assert s.get_results() == [4]
        assert client.status == "running"
        assert len(scheduler_identity(client)["workers"]) == 2


def test_embedded_cluster_binds_loopback_only_and_closes():
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        info = s.client.scheduler_info()
        assert info["address"].startswith("tcp://127.0.0.1:")
        assert all(w.startswith("tcp://127.0.0.1:") for w in info["workers"])
        assert s.dashboard_link and "127.0.0.1" in s.dashboard_link
        # this cluster's processes only: other tests' clusters may be running beside it
        workers = [psutil.Process(pid) for pid in s.client.run(helpers.worker_pid, None).values()]
        procs = [psutil.Process(), *workers, *(w.parent() for w in workers)]
        listening = [c.laddr.ip for p in procs for c in p.net_connections("inet")
                     if c.status == psutil.CONN_LISTEN]
        assert listening and set(listening) == {"127.0.0.1"}
        s.add_task(5, helpers.double)
        assert s.get_results() == [10]
        worker_pids = set(s.client.run(helpers.worker_pid, None).values())
    for pid in worker_pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_unpicklable_callable_is_a_clear_error(dask_scheduler):
    import threading
    lock = threading.Lock()
    with pytest.raises(lk.InputError, match="cannot be sent to the workers: "
                                            "TypeError: cannot pickle '_thread.lock'"):
        dask_scheduler.add_task(1, lambda x, lock=lock: x)
    dask_scheduler.add_task(2, helpers.double)    # nothing stayed open: the batch goes on
    assert dask_scheduler.get_results() == [4]


def test_chunks_go_straight_to_a_worker_from_1_mib_on_this_machine(cluster):
    with lk.DaskScheduler(cluster.scheduler_address) as s:
        assert s.direct_bytes == 2**20      # on other hosts 64 KiB (tests/multihost)
    with lk.DaskScheduler(cluster.scheduler_address, direct_bytes=5000) as s:
        assert s.direct_bytes == 5000


def test_a_callable_copied_after_its_setup_is_set_up_again_in_the_new_process(monkeypatch):
    """Dask copies a shipped callable on from the worker it reached first, maybe after a
    task there set it up: the copy's process must run ``setup_environment`` too."""
    import pickle
    from labkit.scheduling.workers import running as task
    monkeypatch.setenv("LABKIT_TEST_ENV_SETUPS", "0")
    callable_ = helpers.EnvCallable()
    task.run_task(callable_, 0, lk.events.TaskInfo("run", 0, 0))       # set up here
    copy = pickle.loads(pickle.dumps(callable_))
    monkeypatch.setattr(task, "_PROCESS", "another process", raising=False)
    assert task.run_task(copy, 1, lk.events.TaskInfo("run", 1, 1)).result[1] == 2
    assert task.run_task(copy, 2, lk.events.TaskInfo("run", 2, 2)).result[1] == 2   # once
