"""Chunks through shared memory to the embedded worker processes: mapped, not copied; removed."""

import os
import signal

import numpy as np
import pytest

import labkit as lk
from labkit.scheduling.workers.shared import SHARE_BYTES, SharedChunk, segment_prefix, unlink
from tests import helpers
from tests.flows.cases import X


def _segments() -> set[str]:
    """Shared-memory segments this process made, as the system lists them (another run's
    come and go meanwhile)."""
    return {n for n in os.listdir("/dev/shm") if n.startswith(segment_prefix())}


@pytest.fixture(scope="module")
def processes():
    """An embedded cluster of 2 worker processes started by labkit itself."""
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        yield s


def how_it_arrived(x):
    """What the chunk's memory is in the task, and its sum."""
    base = x.base
    while getattr(base, "base", None) is not None:
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return type(base).__name__, float(x.sum()), os.getpid()


def test_big_chunks_are_mapped_from_shared_memory(processes):
    before = _segments()
    big = np.arange(SHARE_BYTES // 8 * 4, dtype=np.float64).reshape(-1, 4)
    small = np.ones((10, 4))
    processes.add_task(big, how_it_arrived)
    processes.add_task(small, how_it_arrived)
    # results come in the order tasks finish: the small chunk's sum is the smaller
    (kind_small, sum_small, _), (kind_big, sum_big, pid) = sorted(
        processes.get_results(), key=lambda r: r[1])
    assert kind_big == "mmap" and sum_big == float(big.sum())
    assert kind_small != "mmap" and sum_small == 40.0
    assert pid != os.getpid()
    assert len(processes.route("shared-memory").segments) == 0
    # what is left waits for reuse, and goes with the scheduler (test_shutdown_...)
    assert len(_segments() - before) <= len(processes.route("shared-memory").segments._free)


def overwrite(x):
    x[...] = -1.0
    return float(x.sum())


def test_a_task_writing_to_its_chunk_writes_only_its_own_copy():
    segments = []
    chunk = SharedChunk.of(np.ones((SHARE_BYTES // 8,)), segments)
    try:
        first = chunk.materialize()
        first[...] = 5.0
        assert float(chunk.materialize().sum()) == SHARE_BYTES // 8   # as the client made it
    finally:
        unlink(segments)


def test_tuples_share_each_big_array(processes):
    x = np.random.default_rng(0).normal(size=(10000, 6))
    y = np.arange(10000.0)
    processes.add_task((x, y), lambda xy: (how_it_arrived(xy[0])[0], how_it_arrived(xy[1])[0],
                                           float(xy[0].sum() + xy[1].sum())))
    [(kx, ky, total)] = processes.get_results()
    assert (kx, ky) == ("mmap", "mmap") and total == pytest.approx(x.sum() + y.sum())


def slow_sum(x):
    import time
    time.sleep(0.5)
    return float(x.sum())


def test_cancelled_tasks_leave_no_segment(processes):
    before = _segments()
    with processes.batch() as batch:
        for i in range(6):
            batch.add_task(np.full((SHARE_BYTES // 8, 2), float(i)), slow_sum)
        assert len(processes.route("shared-memory").segments) == 6
        assert batch.cancel() == 6
    assert len(processes.route("shared-memory").segments) == 0
    assert _segments() <= before


def test_shutdown_removes_what_is_left():
    before = _segments()
    s = lk.DaskScheduler(mode="processes", n_workers=1)
    try:
        s.add_task(np.ones((SHARE_BYTES // 8, 4)), slow_sum)
        assert _segments() - before
    finally:
        s.shutdown()
    assert _segments() <= before


def test_training_through_shared_memory_survives_a_killed_worker(recorder):
    """Segments stay with the client: a lost worker's chunks go again under the same names."""
    data = [X[i * 75:(i + 1) * 75].repeat(20, axis=0) for i in range(16)]   # 72 KiB chunks
    assert all(c.nbytes >= SHARE_BYTES for c in data)
    starts = helpers.StartCounter(recorder)
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        s.subscribe(starts)
        pids = s.client.run(os.getpid)
        flow = lk.ParallelFlow([helpers.SlowPCA(delay=0.25, output_dim=3)])
        run = flow.train([data], scheduler=s, wait=False)
        starts.wait(4)
        os.kill(sorted(pids.values())[0], signal.SIGKILL)
        run.result(timeout=120)
        assert len(s.route("shared-memory").segments) == 0
    serial = lk.Flow([helpers.SlowPCA(delay=0.0, output_dim=3)])
    serial.train([data])
    helpers.assert_nodes_equal(serial[0], flow[0])


def test_an_existing_cluster_sends_chunks_as_they_are_unless_told(cluster):
    """Someone else's workers may be on other hosts: shared memory only when asked."""
    big = np.ones((SHARE_BYTES // 8, 2))
    with lk.DaskScheduler(cluster.scheduler_address) as s:
        s.add_task(big, how_it_arrived)
        [(kind, total, _)] = s.get_results()
        assert kind != "mmap" and total == big.sum()
    with lk.DaskScheduler(cluster.scheduler_address, shared_memory=True) as s:
        s.add_task(big, how_it_arrived)
        [(kind, total, _)] = s.get_results()
        assert kind == "mmap" and total == big.sum()


def test_threads_never_copy_into_shared_memory():
    big = np.ones((SHARE_BYTES // 8, 2))
    with lk.DaskScheduler(mode="threads", shared_memory=True) as s:
        s.add_task(big, lambda x: bool(np.shares_memory(x, big)))
        assert s.get_results() == [True] and s.route("shared-memory") is None


_KEPT = []   # on a worker: views of chunks that a task kept


def keep_a_view(x):
    _KEPT.append(x[:3])
    return float(x.sum())


def kept_views(_):
    return [v.copy() for v in _KEPT]


def test_segments_are_reused_unless_a_view_outlives_the_task():
    """A freed segment is written again only when the worker unmapped it (no view left)."""
    import dask
    # Dask's sampling profiler holds a task's frames for a moment now and then: the
    # worker would see the chunk still viewed and (safely) not offer its segment back
    with dask.config.set({"distributed.worker.profile.enabled": False}), \
            lk.DaskScheduler(mode="processes", n_workers=1) as s:
        first = np.full((SHARE_BYTES // 8, 2), 1.0)
        s.add_task(first, how_it_arrived)
        s.get_results()
        assert s.route("shared-memory").segments.free_bytes >= first.nbytes          # kept for the next chunk
        before = _segments()
        s.add_task(np.full_like(first, 2.0), how_it_arrived)
        assert s.get_results()[0][1] == 2.0 * first.size
        assert _segments() == before                         # the same segment again
        s.add_task(np.full_like(first, 3.0), keep_a_view)    # the worker keeps a view
        s.get_results()
        assert s.route("shared-memory").segments.free_bytes == 0                     # so that segment is not reused
        for value in (4.0, 5.0):
            s.add_task(np.full_like(first, value), how_it_arrived)
        s.get_results()
        s.add_task(np.zeros(2), kept_views)
        [[view]] = s.get_results()
        assert (view == 3.0).all(), "a kept view saw a later chunk"
