"""Nothing of labkit's stays on someone else's Dask scheduler after ``shutdown()``."""

from __future__ import annotations

import time

import numpy as np
import pytest

import labkit as lk
from tests.helpers import SlowPCA


def _scheduler_state(dask_scheduler):
    """Task keys and client ids the Dask scheduler still holds."""
    return {"tasks": sorted(map(str, dask_scheduler.tasks)),
            "clients": sorted(map(str, dask_scheduler.clients))}


def _settled(client, ours: str, deadline: float) -> dict:
    """The scheduler's state once our client and tasks are gone, or at the deadline."""
    state = client.run_on_scheduler(_scheduler_state)
    while (state["tasks"] or ours in state["clients"]) and time.monotonic() < deadline:
        time.sleep(0.2)
        state = client.run_on_scheduler(_scheduler_state)
    return state


@pytest.mark.parametrize("join", ["client", "workers"])
def test_shutdown_mid_training_leaves_no_task_keys_on_an_external_scheduler(cluster, join):
    from distributed import Client
    # connected first: the scheduler tells every client of a cancel, and one told so in
    # its first 2 ms fails Dask's handshake (labkit's own connect tries again)
    with Client(cluster.scheduler_address) as observer:
        s = lk.DaskScheduler(cluster.scheduler_address)
        ours = s.client.id
        chunks = np.array_split(np.random.default_rng(1).normal(size=(4000, 5)), 40)
        flow = lk.ParallelFlow([SlowPCA(delay=0.1, output_dim=2)])
        try:
            run = flow.train([chunks], scheduler=s, wait=False, join=join)
            deadline = time.monotonic() + 60
            while s.total_open_tasks < 4 and time.monotonic() < deadline:    # under way
                time.sleep(0.05)
            assert s.total_open_tasks >= 4
        finally:
            s.shutdown()
        with pytest.raises(lk.LabkitError, match="shut down"):
            run.result(timeout=60)
        assert flow[0].is_training() and flow[0].samples_seen == 0    # the phase was undone
        state = _settled(observer, ours, time.monotonic() + 30)
    assert state["tasks"] == [], f"task keys left on the scheduler: {state['tasks'][:5]}"
    assert ours not in state["clients"]


def test_a_client_closed_by_hand_mid_training_ends_the_run_with_a_scheduler_error(cluster):
    s = lk.DaskScheduler(cluster.scheduler_address)
    chunks = np.array_split(np.random.default_rng(2).normal(size=(4000, 5)), 40)
    flow = lk.ParallelFlow([SlowPCA(delay=0.1, output_dim=2)])
    try:
        run = flow.train([chunks], scheduler=s, wait=False, join="client")
        deadline = time.monotonic() + 60
        while s.total_open_tasks < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        s.client.close()                       # not s.shutdown(): the user's own doing
        with pytest.raises(lk.SchedulerError, match="client .* was closed|the client is closed") as info:
            run.result(timeout=60)             # before: resubmitted until the timeout
        assert "phase 0" in str(info.value)
        assert flow[0].is_training() and flow[0].samples_seen == 0
    finally:
        s.shutdown()


class Gate:
    """A task that waits for ``opened`` (a deadline keeps a broken test from hanging)."""

    def __init__(self):
        import threading
        self.opened, self.running = threading.Event(), threading.Semaphore(0)

    def __call__(self, x):
        self.running.release()
        self.opened.wait(60)
        return x


def test_a_finished_threads_cancelled_default_batch_leaves_no_shipped_callable():
    """A thread's default batch, cancelled with tasks waiting, then the thread ends: its
    shipped callable goes too (the outcomes thread kept the last cancelled task, so its
    batch and the callable's future, referenced while it waited)."""
    import gc
    import threading

    gate = Gate()
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        def owner():
            for x in range(10):  # two run, eight wait behind them
                s.add_task(x, gate)
            assert gate.running.acquire(timeout=60) and gate.running.acquire(timeout=60)
            s.cancel()   # the waiting tasks' futures end without delivering anything
            with pytest.raises(lk.CancelledError):
                s.get_results()

        thread = threading.Thread(target=owner)
        thread.start()
        thread.join(120)
        assert not thread.is_alive()
        gate.opened.set()
        thread = None
        gc.collect()
        state = _settled(s.client, "", time.monotonic() + 30)
        assert state["tasks"] == [], f"task keys left on the scheduler: {state['tasks'][:5]}"


def test_a_ship_cut_short_by_a_shutdown_says_shut_down(cluster):
    """The shutdown mid-training above may reach a phase while it ships its callable: the
    error then says the scheduler was shut down, not that its client is closing."""
    s = lk.DaskScheduler(cluster.scheduler_address)
    s.shutdown()
    with pytest.raises(lk.SchedulerError, match="DaskScheduler was shut down"):
        s.ship_callable(lk.FunctionCallable(abs))


def test_work_sent_after_the_client_was_closed_by_hand_says_so_in_one_way(cluster):
    """A client closed by the user (not by shutdown()) cuts a run short wherever it is: its
    callable's ship, a chunk's submission, a task under way. Each said it in Dask's words
    for that step ("the client is closing", "ClosedClientError: Client is closed. Can't send
    update-graph message."); now one error says what happened and what to do."""
    s = lk.DaskScheduler(cluster.scheduler_address)
    try:
        s.client.close()
        with pytest.raises(lk.SchedulerError, match="client of this DaskScheduler was closed"):
            s.ship_callable(lk.FunctionCallable(abs))
        with pytest.raises(lk.SchedulerError,
                           match="client of this DaskScheduler was closed") as info:
            s.add_task(np.ones(3), abs)
        assert "shutdown()" in str(info.value)
        assert s.total_open_tasks == 0      # nothing left open, so no run waits on it
    finally:
        s.shutdown()


def test_cancel_futures_cancels_on_an_open_client_and_asks_nothing_of_a_closed_one():
    """A run cut short by a client closed by hand cancelled its tasks with Dask's own
    ``cancel``, which on a client that was closing waited for ever (a stack dump of the hung
    run showed its thread there, 1 run in 47 under load)."""
    import threading

    from distributed import Client, Event, LocalCluster

    from labkit.scheduling.dask.connect import cancel_futures
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        gate = Event("labkit-test-cancel-gate", client=client)
        first = client.submit(_wait_on, "labkit-test-cancel-gate", pure=False)
        cancel_futures(client, [first])
        assert first.cancelled()
        second = client.submit(_wait_on, "labkit-test-cancel-gate", pure=False)
        closed = Client(cluster, set_as_default=False)
        theirs = closed.submit(_wait_on, "labkit-test-cancel-gate", pure=False)
        closed.close()
        returned = threading.Event()
        threading.Thread(target=lambda: (cancel_futures(closed, [theirs]), returned.set()),
                         daemon=True).start()
        assert returned.wait(15)            # at once, and without raising
        assert second.status == "pending"   # the open client's work is untouched
        gate.set()
        assert second.result(timeout=30) is True


def _wait_on(name: str) -> bool:
    from distributed import Event
    return Event(name).wait(60)
