"""Outcomes on one thread: in-process tasks started in groups and delivering their own outcome."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import labkit as lk
from labkit.scheduling.routes import packing
from labkit.scheduling.workers.lazy_chunks import LazyChunk
from tests import helpers


class GraphUpdates:
    """Counts the graph updates that carried labkit tasks (a plugin of the in-process scheduler)."""

    def __init__(self, scheduler):
        from distributed.diagnostics.plugin import SchedulerPlugin
        counts = self.counts = []

        class Plugin(SchedulerPlugin):
            name = "labkit-test-graph-updates"

            def update_graph(self, scheduler, *args, keys=(), **kwargs):
                n = sum(1 for k in keys if str(k).startswith("labkit-"))
                if n:
                    counts.append(n)
        scheduler.cluster.scheduler.add_plugin(Plugin())


@pytest.fixture(scope="module")
def threads():
    """The default embedded cluster: one in-process worker, a thread per core."""
    with lk.DaskScheduler() as s:
        assert s.in_process
        yield s


def lazy_array(n_blocks: int, rows: int = 50):
    import dask
    import dask.array as da
    return da.concatenate([da.from_delayed(dask.delayed(np.full, pure=False)((rows, 3), float(i)),
                                           shape=(rows, 3), dtype=float)
                           for i in range(n_blocks)], axis=0)


def test_chunks_at_hand_start_in_one_graph_update_and_a_stream_one_by_one(threads):
    updates = GraphUpdates(threads)
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
    flow.train([lazy_array(40)], scheduler=threads)
    assert updates.counts == [40]          # one client.map for the 40 blocks
    updates.counts.clear()
    chunks = [np.random.default_rng(i).normal(size=(50, 3)) for i in range(6)]
    streamed = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
    streamed.train([iter(chunks)], scheduler=threads)    # made on demand: each starts at once
    assert updates.counts == [1] * 6
    serial = lk.Flow([lk.nodes.PCA(output_dim=2)])
    serial.train([chunks])
    helpers.assert_nodes_equal(streamed[0], serial[0])


def test_a_full_window_refills_in_groups_and_loses_nothing(monkeypatch):
    # one Dask task a labkit task: once the clock times double as short, refills are packed
    # (several tasks under one key), which the graph-update count below would not see
    monkeypatch.setattr(packing, "PACK_SECONDS", 0.0)
    with lk.DaskScheduler(max_in_flight=16) as s:
        updates = GraphUpdates(s)
        with s.batch() as batch:
            assert batch.add_tasks(range(200), helpers.double, ready=True) == 200
            assert sorted(batch.get_results()) == [2 * x for x in range(200)]
        assert sum(updates.counts) == 200
        assert max(updates.counts) <= 16              # never more than the window
        assert len(updates.counts) <= 100             # refilled two or more at a time
        assert s.outcomes.followed == 0


def test_a_task_error_is_recorded_in_the_task_with_its_place_and_traceback(threads, recorder):
    unsubscribe = threads.subscribe(recorder)
    try:
        with threads.batch() as batch:
            with pytest.raises(lk.TaskError, match="chunk two is bad") as caught:
                batch.add_tasks(range(4), helpers.fail_on_two, ready=True)
                batch.get_results()
            assert caught.value.where["chunk"] == 2 and "fail_on_two" in \
                caught.value.remote_traceback
            assert batch.n_open_tasks == 0
            batch.add_tasks(range(3), helpers.double, ready=True)   # the batch goes on
            assert sorted(batch.get_results()) == [0, 2, 4]
    finally:
        unsubscribe()
    failed = recorder.of(lk.events.TaskFailed)
    assert [e.info.chunk for e in failed] == [2]


def test_a_task_cancelled_outside_labkit_is_noticed_by_the_watch(threads):
    started = threading.Event()

    def wait_for_cancel(x):
        started.set()
        time.sleep(3)
        return x

    with threads.batch() as batch:
        batch.add_task(1, wait_for_cancel)
        assert started.wait(10)
        (future,) = [f for f in threads.outcomes.watched()]
        t0 = time.monotonic()
        threads.client.cancel([future], reason="stopped by hand")
        with pytest.raises(lk.CancelledError, match="cancelled outside labkit .stopped by hand") as caught:
            batch.get_results()
        assert time.monotonic() - t0 < 2.5     # the watch looked, not the task's end
        assert caught.value.where["chunk"] == 0
    assert threads.outcomes.followed == 0


def test_a_failing_source_leaves_no_task_opened_and_never_started(threads):
    def source():
        yield from range(5)
        raise OSError("disk gone")

    with threads.batch() as batch:
        with pytest.raises(lk.InputError, match="disk gone"):
            batch.add_tasks(lk.flows.chunks.pulled(source()), helpers.double, ready=True)
        assert batch.n_open_tasks == 0      # the five chunks pulled were opened, not started
        batch.add_tasks([1, 2], helpers.double, ready=True)
        assert sorted(batch.get_results()) == [2, 4]


def test_add_tasks_checks_before_each_chunk(local_scheduler):
    seen = []

    def check():
        if len(seen) == 3:
            raise lk.CancelledError("stop")
        seen.append(1)

    with local_scheduler.batch() as batch:
        with pytest.raises(lk.CancelledError):
            batch.add_tasks(range(10), helpers.double, ready=True, check=check)
        assert batch.n_open_tasks == 0


def test_lazy_chunks_are_computed_node_by_node_or_by_dask_for_old_style_graphs():
    from dask import delayed
    from labkit.scheduling.workers.lazy_chunks import lazy_chunk
    block = delayed(np.add)(delayed(np.full)((2, 2), 3.0), 1.0)
    chunk = lazy_chunk(block)
    np.testing.assert_array_equal(chunk.materialize(), np.full((2, 2), 4.0))
    old_style = LazyChunk({"x": (np.full, (2, 2), 5.0), "y": (np.negative, "x")}, "y")
    np.testing.assert_array_equal(old_style.materialize(), np.full((2, 2), -5.0))



def _wait_for_gate() -> bool:
    from distributed import Event
    return Event("labkit-test-gate").wait(60)


class Entry:
    """An open task as the outcomes thread sees it: open until something is recorded."""

    def __init__(self):
        self.open = True

    def is_open(self) -> bool:
        return self.open


def test_a_future_its_closed_client_never_ended_is_handed_on_as_failed():
    """Dask cancels the futures a client holds when it closes, but not one submitted while it
    closed: that one stays pending for ever, and its run waited on it (seen 1 in 3 times
    with 10 submissions racing 10 closes). A future still pending once the client is closed
    is handed on as failed."""
    import queue

    from distributed import Client, Event, LocalCluster

    from labkit.scheduling.routes.outcomes import Outcomes
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as other:
        closing = Client(cluster, set_as_default=False)
        failed: queue.SimpleQueue = queue.SimpleQueue()
        outcomes = Outcomes(closing, record=lambda *a, **k: None,
                            failed=lambda entry, future: failed.put((entry, future)),
                            failed_to_send=lambda *a: None)
        try:
            # a future the closing client will not cancel: another client's, still running
            gate = Event("labkit-test-gate", client=other)
            never = other.submit(_wait_for_gate, key="labkit-test-never-ends")
            entry = Entry()
            outcomes.follow(entry, never)
            assert outcomes.followed == 1
            with pytest.raises(queue.Empty):
                failed.get(timeout=1.0)      # running: the thread waits for it
            closing.close()
            handed, future = failed.get(timeout=10)
            assert handed is entry and future is never and future.status == "pending"
            assert outcomes.followed == 0
        finally:
            outcomes.close()
            gate.set()
            never.result(timeout=30)
