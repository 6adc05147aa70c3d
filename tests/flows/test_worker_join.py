"""Joining on the workers: one fork per worker thread, exactly once when workers die."""

import os
import signal
import threading

import numpy as np
import pytest

import labkit as lk
from labkit.events import NodeJoined, PhaseFinished, TaskFinished
from labkit.flows import worker_join
from labkit.flows.worker_join import WorkerJoin, held_phases
from tests import helpers
from tests.flows.cases import CASES, SLOW, X


def _serial(factory, data):
    flow = lk.Flow([factory()])
    flow.train([data])
    return flow


def _joins_per_phase(recorder):
    """NodeJoined events of each (node, phase), in order."""
    per = {}
    for e in recorder.of(NodeJoined):
        per.setdefault((e.node, e.phase), []).append(e)
    return per


@pytest.mark.parametrize("name", ["PCA", "SFA", "FDA", "LinearRegression"])
def test_worker_processes_join_there_by_default(name, dask_scheduler, recorder):
    """On worker processes ``join="auto"`` keeps one fork per worker thread."""
    factory, data = CASES[name]
    dask_scheduler.subscribe(recorder)
    flow = lk.ParallelFlow([factory()])
    flow.train([data], scheduler=dask_scheduler)
    helpers.assert_nodes_equal(_serial(factory, data)[0], flow[0])
    n_threads = sum(dask_scheduler.client.nthreads().values())
    for (node, phase), joins in _joins_per_phase(recorder).items():
        # forks come back when the phase ends, and once a second while someone watches
        assert 1 <= len(joins) < len(data) or len(data) <= n_threads
        assert joins[-1].state["samples"] == sum(len(c[0] if isinstance(c, tuple) else c)
                                                 for c in data)
    finished = recorder.of(PhaseFinished)
    assert all(e.n_tasks == len(data) for e in finished)
    assert not _held_of(dask_scheduler, finished[0].run)


def _held_of(scheduler, run):
    """Phases of ``run`` whose forks some worker still holds."""
    held = scheduler.run_on_workers(held_phases)
    return [k for keys in held.values() for k in keys if k.startswith(f"{run}-")]


def test_unwatched_phase_returns_one_fork_per_worker_thread(dask_scheduler):
    factory, data = CASES["PCA"]
    flow = lk.ParallelFlow([factory()])
    node = flow[0]
    joins = []
    original = node.join
    node.join = lambda forked: (joins.append(forked._samples), original(forked))
    flow.train([data], scheduler=dask_scheduler, join="workers")
    del node.join
    n_threads = sum(dask_scheduler.client.nthreads().values())
    assert 1 <= len(joins) <= n_threads
    assert sum(joins) == sum(len(c) for c in data)
    helpers.assert_nodes_equal(_serial(factory, data)[0], flow[0])


@pytest.mark.parametrize("make", ["local", "threads"])
def test_in_process_schedulers_join_on_workers_when_asked(make):
    factory, data = CASES["SFA"]
    s = lk.LocalScheduler() if make == "local" else lk.DaskScheduler(mode="threads")
    with s:
        rec = []
        s.subscribe(rec.append)
        flow = lk.ParallelFlow([factory()])
        node = flow[0]
        forks = []
        original = node.join
        node.join = lambda forked: (forks.append(forked), original(forked))
        flow.train([data], scheduler=s, join="workers")
        del node.join
        threads = 1 if make == "local" else sum(s.client.nthreads().values())
        phases = len([e for e in rec if isinstance(e, lk.events.PhaseStarted)])
        assert phases >= 1 and phases <= len(forks) <= phases * threads
    helpers.assert_nodes_equal(_serial(factory, data)[0], flow[0])
    assert held_phases() == []


def test_auto_joins_on_the_client_in_process():
    """In-process forks come back by reference: joined here, one a chunk, live state."""
    factory, data = CASES["PCA"]
    with lk.DaskScheduler(mode="threads") as s:
        rec = []
        s.subscribe(rec.append)
        lk.ParallelFlow([factory()]).train([data], scheduler=s)
    assert len([e for e in rec if isinstance(e, NodeJoined)]) == len(data)


def test_gil_holding_nodes_offloaded_join_on_the_client():
    """``mode="auto"`` runs them in a process pool that no worker call reaches."""
    with lk.DaskScheduler() as s:
        rec = []
        s.subscribe(rec.append)
        flow = lk.ParallelFlow([helpers.PythonMoments()])
        flow.train([np.array_split(X, 6)], scheduler=s, join="workers")
    assert len([e for e in rec if isinstance(e, NodeJoined)]) == 6
    serial = lk.Flow([helpers.PythonMoments()])
    serial.train([np.array_split(X, 6)])
    helpers.assert_nodes_equal(serial[0], flow[0])


def test_a_bounded_client_takes_forks_back_on_the_way(cluster):
    """With room for about two chunks, the client collects forks as it goes."""
    data = np.array_split(X, 12)
    limit = 2 * data[0].nbytes
    with lk.DaskScheduler(cluster.scheduler_address, max_bytes_in_flight=limit) as s:
        flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=3)])
        node, seen = flow[0], []
        original = node.join
        node.join = lambda forked: (seen.append(forked._samples), original(forked))
        run = flow.train([data], scheduler=s, join="workers", wait=False)
        run.result(timeout=60)
        del node.join
        assert not _held_of(s, run.id)
    n_threads = 2
    assert len(seen) > n_threads, "the client never took a fork back before the end"
    assert sum(seen) == len(X)
    helpers.assert_nodes_equal(_serial(lambda: lk.nodes.PCA(output_dim=3), data)[0], flow[0])


def test_a_chunk_seen_twice_drops_the_later_fork_and_retrains_its_other_chunks():
    """The client's exactly-once rule, on real forks of a real node."""
    data = np.array_split(X, 3)
    node = lk.nodes.PCA(output_dim=3)
    first, second = node.fork(), node.fork()
    first.train(data[0])
    first.train(data[1])
    second.train(data[1])   # chunk 1 again: its first result was lost, say
    second.train(data[2])
    joiner = WorkerJoin(lk.LocalScheduler(), node, "k", keep=True)
    for i, chunk in enumerate(data):
        joiner.added(i, chunk, chunk.nbytes)
    assert joiner._join(first, {0, 1}) == 1
    assert joiner._join(second, {1, 2}) == 0
    assert joiner.missing(3) == [2]
    assert joiner.kept_bytes == data[2].nbytes
    [again] = joiner.data_for([2])
    assert again is data[2]
    assert node.joins == 1 and node.samples_seen == len(data[0]) + len(data[1])


def test_a_chunk_not_kept_cannot_be_retrained_silently():
    joiner = WorkerJoin(lk.LocalScheduler(), lk.nodes.PCA(output_dim=2), "k", keep=False)
    joiner.added(0, X[:10], X[:10].nbytes)
    with pytest.raises(lk.SchedulerError, match=r"chunks \[0\]"):
        joiner.data_for(joiner.missing(1))


def test_failing_chunk_names_its_place_and_leaves_no_fork(dask_scheduler, recorder):
    dask_scheduler.subscribe(recorder)
    data = [X[:100], X[100:200], np.full((50, 6), 999.0), X[200:300]]
    flow = lk.ParallelFlow([helpers.FussyPCA(output_dim=2)])
    with pytest.raises(lk.LabkitError) as info:
        flow.train([data], scheduler=dask_scheduler, join="workers")
    err = info.value
    assert "999 is not a sample" in str(err)
    assert (err.where["node"], err.where["chunk"], err.where["phase"]) == (0, 2, 0)
    assert flow[0].samples_seen == 0 and flow[0].is_training()
    assert not _held_of(dask_scheduler, recorder.of(lk.events.PhaseStarted)[0].run)


def test_bad_join_mode_is_refused():
    with pytest.raises(lk.InputError, match="join must be one of"):
        lk.ParallelFlow([lk.nodes.PCA(output_dim=2)]).train([[X]], join="nowhere")


@pytest.fixture
def own_cluster():
    """A cluster of its own: one of its workers gets killed."""
    from distributed import LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        yield cluster


@pytest.mark.soak
def test_killing_a_worker_that_holds_a_fork(own_cluster, recorder, monkeypatch):
    """The chunks in the dead worker's fork are trained again elsewhere, exactly once."""
    # Forks come back only at the end: the victim's fork surely dies with chunks in it.
    monkeypatch.setattr(lk.ParallelFlow, "LIVE_COLLECT_EVERY", 1e9)
    data = [SLOW[i * 75:(i + 1) * 75] for i in range(16)]
    with lk.DaskScheduler(own_cluster.scheduler_address) as s:
        pids = s.client.run(os.getpid)
        victim_address, victim_pid = sorted(pids.items())[0]
        finished_there = threading.Event()

        def on_event(event):
            recorder(event)
            if isinstance(event, TaskFinished) and event.worker == victim_address:
                finished_there.set()

        s.subscribe(on_event)
        flow = lk.ParallelFlow([helpers.SlowPCA(delay=0.25, output_dim=3)])
        run = flow.train([data], scheduler=s, wait=False)
        assert finished_there.wait(timeout=60)
        os.kill(victim_pid, signal.SIGKILL)
        run.result(timeout=120)
    [finished] = recorder.of(PhaseFinished)
    assert finished.n_tasks > len(data), "no chunk of the lost fork was trained again"
    joins = recorder.of(NodeJoined)
    assert joins[-1].state["samples"] == sum(len(c) for c in data)
    serial = lk.Flow([helpers.SlowPCA(delay=0.0, output_dim=3)])
    serial.train([data])
    helpers.assert_nodes_equal(serial[0], flow[0])


def test_a_late_task_of_an_ended_phase_keeps_no_fork():
    """A task still running when its phase ends (cancelled, say) leaves nothing behind."""
    template = lk.nodes.PCA(output_dim=2).fork()
    key = "late-phase"
    held = worker_join._acquire(key, template)
    assert worker_join.take_forks(key, final=True) == []  # busy: not taken, phase closed
    worker_join._release(key, held)
    assert key not in held_phases()
    with pytest.raises(lk.CancelledError):
        worker_join._acquire(key, template)


def _set_idle_limit(seconds):
    worker_join.IDLE_FORK_SECONDS = seconds


def test_forks_of_a_client_gone_mid_phase_are_dropped_once_idle(cluster):
    """A client that never takes its forks: the workers' next worker-join call frees them."""
    import time
    data = [X[i * 100:(i + 1) * 100] for i in range(12)]
    s = lk.DaskScheduler(cluster.scheduler_address)
    started = threading.Event()
    s.subscribe(lambda e: started.set() if isinstance(e, TaskFinished) else None)
    flow = lk.ParallelFlow([helpers.SlowPCA(delay=0.2, output_dim=2)])
    run = flow.train([data], scheduler=s, join="workers", wait=False)
    assert started.wait(timeout=60)
    s.shutdown()                # closes its client: no collect reaches the workers
    with pytest.raises(lk.LabkitError):
        run.result(timeout=60)
    with lk.DaskScheduler(cluster.scheduler_address) as other:
        time.sleep(0.5)         # the last running tasks end in their forks
        assert _held_of(other, run.id), "nothing was left to drop: the test tests nothing"
        other.client.run(_set_idle_limit, 0.2)
        try:
            time.sleep(0.3)
            again = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
            again.train([np.array_split(X, 4)], scheduler=other, join="workers")
            assert not _held_of(other, run.id)
        finally:
            other.client.run(_set_idle_limit, worker_join.IDLE_FORK_SECONDS)
