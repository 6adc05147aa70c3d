"""Tests of labkit.pipeline: ordering, chaining, outputs, stopping, errors, stats, flows."""

from __future__ import annotations

import collections
import itertools
import threading
import time

import numpy as np
import pytest

import labkit as lk
from labkit.pipeline import (STOP, PipelineError, ProcessingReader, Queue, Stage, StageStats,
                             pipe, pipe_and_output)

pytestmark = pytest.mark.timeout(10)  # a hang fails the test instead of blocking the run


def _pipe_threads():
    return {t for t in threading.enumerate() if t.name.startswith("labkit-pipe")}


@pytest.fixture(autouse=True)
def no_leftover_threads():
    """Every test ends with no pipeline thread still running."""
    before = _pipe_threads()
    yield
    new = _pipe_threads() - before
    for thread in new:  # the last thread closes the output just before it returns
        thread.join(timeout=2)
    assert not [t.name for t in new if t.is_alive()]


def drain(queue, timeout=2.0):
    """All records of ``queue`` until it ends; fails instead of hanging."""
    out = []
    while True:
        record = queue.get(timeout=timeout)
        if record is STOP:
            return out
        out.append(record)


def jittery(x):
    """Double ``x`` after a short, record-dependent pause so threads finish out of order."""
    time.sleep((x * 7 % 5) * 0.001)
    return 2 * x


def test_ordered_keeps_input_order_with_threads():
    assert drain(pipe(range(60), processor=jittery, num_threads=4, ordered=True)) == \
        [2 * x for x in range(60)]


def test_unordered_gives_same_multiset():
    out = drain(pipe(range(60), processor=jittery, num_threads=4, capacity=5))
    assert sorted(out) == [2 * x for x in range(60)]


def test_threads_are_named_after_stage():
    gate = threading.Event()
    q = pipe(range(3), processor=lambda x: gate.wait(2) and x, num_threads=2, name="demo")
    names = {t.name for t in _pipe_threads()}
    gate.set()
    assert {"labkit-pipe-demo-0", "labkit-pipe-demo-1"} <= names
    assert sorted(drain(q)) == [0, 1, 2]


def test_chaining():
    q = pipe(pipe(range(20), processor=lambda x: x + 1, num_threads=3), processor=lambda x: x * 10,
             num_threads=2)
    assert sorted(drain(q)) == [10 * (x + 1) for x in range(20)]


def test_queue_output_is_returned():
    out = Queue(4)
    assert pipe(range(10), out, processor=lambda x: -x) is out
    assert sorted(drain(out)) == sorted(-x for x in range(10))


def test_list_output():
    out = []
    stage = pipe(range(10), out, num_threads=3, processor=lambda x: x * x)
    assert isinstance(stage, Stage)
    assert stage.join(timeout=2) is out
    assert sorted(out) == [x * x for x in range(10)]


def test_writer_callable_output():
    got = []
    stage = pipe("abc", got.append, num_threads=2, processor=str.upper, ordered=True)
    stage.join(timeout=2)
    assert got == ["A", "B", "C"]


def test_lazy_reader_with_no_threads():
    calls = []

    def square(x):
        calls.append(x)
        return x * x

    reader = pipe(range(5), num_threads=0, processor=square)
    assert isinstance(reader, ProcessingReader)
    assert calls == [] and not _pipe_threads()
    assert list(reader) == [0, 1, 4, 9, 16]
    assert list(pipe(reader, processor=lambda x: x + 1)) == [1, 2, 5, 10, 17]


def test_none_drops_records():
    q = pipe(range(20), processor=lambda x: x if x % 2 else None, num_threads=3, ordered=True)
    assert drain(q) == list(range(1, 20, 2))


@pytest.mark.parametrize("ordered", [True, False])
def test_stop_ends_stream_early(ordered):
    seen = []

    def until_five(x):
        seen.append(x)
        return STOP if x == 5 else x

    q = pipe(itertools.count(), processor=until_five, num_threads=1 if not ordered else 3,
             ordered=ordered)
    out = drain(q)
    assert all(x < 5 for x in out) and len(seen) < 50
    if ordered:
        assert out == [0, 1, 2, 3, 4]


def test_stop_in_lazy_reader_closes_upstream():
    upstream = pipe(itertools.count(), capacity=3)
    reader = pipe(upstream, num_threads=0, processor=lambda x: STOP if x == 3 else x)
    assert list(reader) == [0, 1, 2]
    assert upstream.closed


def test_consumer_close_stops_producers():
    upstream = pipe(itertools.count(), num_threads=2, capacity=4, name="source")
    q = pipe(upstream, processor=lambda x: x + 1, num_threads=3, capacity=4)
    assert q.get(timeout=2) >= 1
    q.close()
    assert upstream.closed  # closing propagates upstream; the fixture checks the threads exit


def failing(x):
    if x == 7:
        raise KeyError("bad record")
    return x


@pytest.mark.parametrize("ordered", [True, False])
def test_processor_error_reaches_consumer(ordered):
    q = pipe(pipe(range(100), processor=failing, num_threads=3, name="parse", capacity=2,
                  ordered=ordered), name="after")
    with pytest.raises(PipelineError) as info:
        drain(q)
    err = info.value
    assert err.where["stage"] == "parse" and err.where["record"] == 7
    assert err.original_type == "KeyError" and "bad record" in err.original_message
    assert "stage 'parse'" in str(err) and "record 7" in str(err)
    assert "raise KeyError" in err.remote_traceback
    with pytest.raises(PipelineError):  # it stays failed
        q.get(timeout=2)


def test_error_in_lazy_reader_and_writer():
    with pytest.raises(PipelineError) as info:
        list(pipe(range(10), num_threads=0, processor=failing, name="lazy"))
    assert info.value.where == {"stage": "lazy", "record": 7}

    def writer(record):
        raise ValueError("disk full")

    stage = pipe(range(5), writer, num_threads=2, name="sink")
    with pytest.raises(PipelineError, match="disk full"):
        stage.join(timeout=2)


def test_error_with_unread_full_queue_does_not_hang():
    q = pipe(range(100), processor=failing, num_threads=4, capacity=1)
    _, final = pipe_and_output(q, [], name="collect")
    with pytest.raises(PipelineError):
        final.result(timeout=2)


def test_pipe_and_output_final_values():
    q, final = pipe_and_output(range(1, 11), num_threads=3, processor=lambda x: x if x != 4 else None,
                               final_outputs={"total": (0, lambda a, r: a + r),
                                              "largest": lambda a, r: r if a is None else max(a, r),
                                              "kinds": (None, lambda a, r: (a or collections.Counter())
                                                        + collections.Counter([r % 2]))})
    assert sorted(drain(q)) == [1, 2, 3, 5, 6, 7, 8, 9, 10]
    result = final.result(timeout=2)
    assert result["count"] == 9 and result["total"] == 51 and result["largest"] == 10
    assert result["kinds"] == {0: 4, 1: 5}


def test_final_result_times_out_while_running():
    gate = threading.Event()
    q, final = pipe_and_output(range(3), processor=lambda x: gate.wait(2) and x)
    with pytest.raises(TimeoutError):
        final.result(timeout=0.05)
    gate.set()
    drain(q)
    assert final.result(timeout=2)["count"] == 3


def test_stage_stats_events_rate_and_final():
    events = []

    def slow(x):
        time.sleep(0.002)
        return x

    q = pipe(range(300), processor=slow, num_threads=2, on_event=events.append, name="slow")
    start = time.monotonic()
    assert len(drain(q)) == 300
    elapsed = time.monotonic() - start
    assert all(isinstance(e, StageStats) and e.stage == "slow" for e in events)
    assert events[-1].final and events[-1].records == 300
    assert sum(e.final for e in events) == 1
    assert 2 <= len(events) <= elapsed * 10 + 2
    assert events[-1].records_per_s > 0 and events[-1].busy_s > 0
    assert all(0 <= e.queue_fill <= 1 for e in events)
    assert q.stats() == events[-1]


def test_bad_arguments():
    with pytest.raises(lk.InputError):
        pipe(42)
    with pytest.raises(lk.InputError):
        pipe(range(3), output=3)
    with pytest.raises(lk.InputError):
        pipe(range(3), num_threads=-1)
    with pytest.raises(lk.InputError):
        pipe_and_output(range(3), final_outputs={"x": 5})


def test_pipe_feeds_parallel_flow():
    rng = np.random.default_rng(0)
    chunks = [rng.normal(size=(50, 4)) for _ in range(4)]
    piped = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
    with lk.LocalScheduler() as scheduler:
        piped.train([pipe(chunks, processor=lambda c: c * 2, ordered=True)], scheduler=scheduler)
    direct = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
    direct.train([[c * 2 for c in chunks]], scheduler=lk.LocalScheduler())
    x = np.concatenate(chunks)
    np.testing.assert_allclose(np.abs(piped.execute(x)), np.abs(direct.execute(x)), atol=1e-8)


def test_pipe_feeds_train_and_execute_on_dask(dask_scheduler):
    rng = np.random.default_rng(1)
    chunks = [rng.normal(size=(200, 5)) for _ in range(6)]
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=3)])
    flow.train([pipe(chunks, processor=lambda c: c + 1.0, num_threads=2)],
               scheduler=dask_scheduler)
    serial = lk.Flow([lk.nodes.PCA(output_dim=3)])
    serial.train([[c + 1.0 for c in chunks]])
    out = flow.execute(pipe(chunks, processor=lambda c: c + 1.0, num_threads=2, ordered=True),
                       scheduler=dask_scheduler)
    np.testing.assert_allclose(np.abs(out), np.abs(serial.execute(np.concatenate(chunks) + 1.0)),
                               rtol=1e-7, atol=1e-9)


def test_lazy_reader_reports_stats():
    events = []

    def slow(x):
        time.sleep(0.001)
        return x if x % 2 else None

    reader = pipe(range(200), processor=slow, num_threads=0, on_event=events.append)
    assert len(list(reader)) == 100
    assert events[-1].final and events[-1].records == 200 and events[-1].queue_fill is None
    assert events[-1].busy_s >= 0.2 and len(events) >= 2 and reader.stats() == events[-1]


def test_stage_stats_go_to_a_scheduler_and_its_tracker(local_scheduler):
    from labkit.views.tracker import Tracker
    tracker = Tracker()
    local_scheduler.subscribe(tracker)
    first = pipe(range(500), name="parse", on_event=local_scheduler)
    assert len(drain(pipe(first, name="scale", processor=lambda x: x * 2,
                          on_event=local_scheduler))) == 500
    stages = {s.stage: s for s in tracker.snapshot().stages}
    assert set(stages) == {"parse", "scale"}
    assert stages["scale"].final and stages["scale"].records == 500
    with pytest.raises(lk.InputError, match="on_event"):
        pipe(range(3), on_event=42)


def test_a_pipe_fed_phase_has_an_unknown_total_not_the_queue_fill(local_scheduler, recorder):
    local_scheduler.subscribe(recorder)
    chunks = [np.random.default_rng(i).normal(size=(30, 3)) for i in range(5)]
    q = pipe(chunks)
    deadline = time.monotonic() + 2
    while len(q) < 5 and time.monotonic() < deadline:  # every record waits in the queue
        time.sleep(0.01)
    lk.ParallelFlow([lk.nodes.PCA(output_dim=2)]).train([q], scheduler=local_scheduler)
    (started,) = recorder.of(lk.events.PhaseStarted)
    (finished,) = recorder.of(lk.events.PhaseFinished)
    assert started.n_tasks is None and finished.n_tasks == 5
