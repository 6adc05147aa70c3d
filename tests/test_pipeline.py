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
    from labkit.views.trackers.tracker import Tracker
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


# -- what a stream delivers when it ends early ------------------------------------------------

def fails_on_7(record):
    """Raise on record 7 (an int, or a chunk whose first value is 7)."""
    if (record if isinstance(record, int) else record[0, 0]) == 7:
        raise ValueError("record seven is bad")
    return record


def read_slowly(queue, pause):
    """Every record of ``queue`` (sleeping ``pause`` s after each), then its error or None."""
    got = []
    try:
        for record in queue:
            got.append(record)
            time.sleep(pause)
    except lk.LabkitError as err:
        return got, err
    return got, None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_threads", [1, 2, 4, 8])
@pytest.mark.parametrize("pause", [0.0, 0.02])
@pytest.mark.parametrize("capacity", [1, 100])
def test_ordered_error_delivers_every_record_before_it(num_threads, pause, capacity):
    q = pipe(range(20), processor=fails_on_7, num_threads=num_threads, ordered=True,
             capacity=capacity, name="parse")
    got, err = read_slowly(q, pause)
    assert got == list(range(7))
    assert isinstance(err, PipelineError) and err.where == {"stage": "parse", "record": 7}
    assert isinstance(err.__cause__, ValueError)  # the processor's own exception


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_threads", [1, 3, 8])
@pytest.mark.parametrize("pause", [0.0, 0.01])
def test_unordered_error_delivers_every_record_processed_before_it(num_threads, pause):
    processed = []

    def slow_fails_on_7(record):
        time.sleep((record * 7 % 5) * 0.002)
        result = fails_on_7(record)
        processed.append(result)  # only records the processor finished
        return result

    q = pipe(range(40), processor=slow_fails_on_7, num_threads=num_threads, capacity=2)
    got, err = read_slowly(q, pause)
    assert err.where["record"] == 7
    assert sorted(got) == sorted(processed)  # none dropped, none twice
    assert set(range(7)) <= set(got) and 7 not in got


@pytest.mark.timeout(30)
@pytest.mark.parametrize("ordered", [True, False])
def test_every_thread_failing_at_once_neither_hangs_nor_loses_the_error(ordered):
    q = pipe(range(200), processor=lambda r: 1 / 0, num_threads=8, ordered=ordered, capacity=1,
             name="invert")
    got, err = read_slowly(q, 0.0)
    assert got == [] and err.original_type == "ZeroDivisionError"
    assert err.where["stage"] == "invert"
    if ordered:
        assert err.where["record"] == 0  # the earliest record's error, as if run one by one


def fail_fast_or_stop_late(fail, stop):
    """A processor: record ``fail`` raises at once, record ``stop`` returns STOP after 50 ms."""
    def process(record):
        if record == stop:
            time.sleep(0.05)
            return STOP
        if record == fail:
            raise ValueError(f"record {record}")
        return record
    return process


@pytest.mark.timeout(30)
@pytest.mark.parametrize("fail, stop, delivered, error_at", [
    (9, 7, list(range(7)), None),  # the STOP comes first in input order: 9 never failed
    (7, 9, list(range(7)), 7),     # the error comes first in input order
    (6, 8, list(range(6)), 6),
])
def test_ordered_stream_ends_where_one_by_one_it_would(fail, stop, delivered, error_at):
    q = pipe(range(30), processor=fail_fast_or_stop_late(fail, stop), num_threads=4,
             ordered=True)
    got, err = read_slowly(q, 0.0)
    assert got == delivered
    assert (err and err.where["record"]) == error_at


@pytest.mark.timeout(30)
def test_ordered_error_keeps_the_earliest_failing_record():
    def process(record):
        if record == 7:
            time.sleep(0.05)  # fails after record 9 did
            raise ValueError("seven")
        if record == 9:
            raise ValueError("nine")
        return record

    got, err = read_slowly(pipe(range(30), processor=process, num_threads=4, ordered=True), 0)
    assert got == list(range(7)) and err.where["record"] == 7 and "seven" in str(err)


@pytest.mark.timeout(30)
def test_unordered_stop_writes_the_records_already_processed():
    processed = []

    def process(record):
        if record == 5:
            return STOP
        time.sleep(0.01)
        processed.append(record)
        return record

    got = drain(pipe(range(100), processor=process, num_threads=4))
    assert sorted(got) == sorted(processed) and len(got) < 20


@pytest.mark.timeout(30)
def test_stop_writes_records_already_read_to_a_list():
    started = threading.Event()
    out = []

    def slow(record):
        started.set()
        time.sleep(0.02)
        return record

    stage = pipe(itertools.count(), out, num_threads=3, processor=slow, ordered=True)
    started.wait(2)
    stage.stop()
    stage.join(timeout=5)
    assert out == list(range(len(out))) and len(out) == stage.stats().records >= 1


@pytest.mark.timeout(30)
@pytest.mark.parametrize("ordered", [True, False])
def test_writer_and_reducer_errors_come_after_the_records_before_them(ordered):
    written = []

    def writer(record):
        if record == 7:
            raise OSError("disk full")
        written.append(record)

    stage = pipe(range(20), writer, num_threads=3, ordered=ordered, name="sink")
    with pytest.raises(PipelineError, match="disk full") as info:
        stage.join(timeout=5)
    assert info.value.where == {"stage": "sink", "record": 7}
    if ordered:
        assert written == list(range(7))
    q, final = pipe_and_output(range(20), ordered=True, num_threads=3,
                               final_outputs={"x": lambda a, r: 1 / (r - 5)})
    got, err = read_slowly(q, 0)
    assert got == list(range(6)) and err.where["record"] == 5
    with pytest.raises(PipelineError):
        final.result(timeout=5)


@pytest.mark.timeout(30)
def test_an_error_upstream_reaches_the_end_of_a_chain_after_every_record():
    first = pipe(range(20), processor=fails_on_7, num_threads=3, ordered=True, name="parse")
    second = pipe(first, processor=lambda r: r * 10, num_threads=2, ordered=True, name="scale")
    lazy = pipe(second, num_threads=0, processor=lambda r: r + 1, name="lazy")
    got, err = read_slowly(lazy, 0.001)
    assert got == [10 * r + 1 for r in range(7)]
    assert err.where == {"stage": "parse", "record": 7}  # the stage that failed, not the last


@pytest.mark.timeout(30)
def test_two_stages_into_one_queue_deliver_both_streams():
    out = Queue(3)
    pipe(range(0, 50), out, num_threads=2, name="evens", processor=lambda r: 2 * r)
    pipe(range(0, 50), out, num_threads=3, name="odds", processor=lambda r: 2 * r + 1)
    assert sorted(drain(out)) == list(range(100))  # the first to finish does not end it


class BrokenSource:
    """An iterable whose iterator raises OSError at record ``at`` (or in ``iter()``: -1)."""

    def __init__(self, at):
        self.at = at

    def __iter__(self):
        if self.at < 0:
            raise OSError("cannot open")
        return self._records()

    def _records(self):
        for i in range(20):
            if i == self.at:
                raise OSError("the disk went away")
            yield i


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_threads", [0, 1, 3])
@pytest.mark.parametrize("at", [0, 4])
def test_a_source_that_raises_is_an_input_error_naming_stage_and_record(num_threads, at):
    q = pipe(BrokenSource(at), num_threads=num_threads, ordered=True, name="read")
    got, err = read_slowly(q, 0)
    assert got == list(range(at))
    assert isinstance(err, lk.InputError) and err.where == {"stage": "read", "record": at}
    assert "OSError: the disk went away" in str(err) and "record " + str(at) in str(err)
    assert isinstance(err.__cause__, OSError)


@pytest.mark.timeout(30)
def test_a_source_whose_iter_raises_names_the_stage():
    with pytest.raises(lk.InputError, match="cannot open") as info:
        pipe(BrokenSource(-1), num_threads=2, name="open")
    assert info.value.where == {"stage": "open", "record": 0}
    with pytest.raises(lk.InputError, match="cannot open"):
        list(pipe(BrokenSource(-1), num_threads=0, name="open"))


@pytest.mark.timeout(30)
def test_a_processor_raising_system_exit_names_its_record():
    def leave(record):
        if record == 3:
            raise SystemExit(2)
        return record

    got, err = read_slowly(pipe(range(10), processor=leave, num_threads=2, ordered=True), 0)
    assert got == [0, 1, 2] and err.where["record"] == 3 and err.original_type == "SystemExit"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("lazy", [False, True])
def test_leaving_a_with_block_early_stops_the_producers(lazy):
    upstream = pipe(itertools.count(), num_threads=2, capacity=2)
    stream = pipe(upstream, num_threads=0) if lazy else upstream
    with stream as records:
        for record in records:
            if record >= 3:
                break
    assert upstream.closed  # the fixture checks that the threads exit


@pytest.mark.timeout(60)
def test_a_flow_fed_by_a_failing_pipe_names_the_chunk_and_the_record():
    rng = np.random.default_rng(3)
    chunks = [np.column_stack([np.full(20, float(i)), rng.normal(size=(20, 3))])
              for i in range(12)]
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
    with pytest.raises(lk.InputError) as info:
        flow.train([pipe(chunks, processor=fails_on_7, num_threads=2, ordered=True)],
                   scheduler=lk.LocalScheduler())
    err = info.value
    assert err.where["chunk"] == 7 and err.where["record"] == 7
    assert err.where["stage"] == "fails_on_7" and err.where["phase"] == 0
    assert "chunk source raised" in str(err) and "record seven is bad" in str(err)
    assert isinstance(err.__cause__, PipelineError)
    assert isinstance(err.__cause__.__cause__, ValueError)
    flow.train([chunks[:7]], scheduler=lk.LocalScheduler())  # the flow works right after
    assert flow.execute(chunks[0]).shape == (20, 2)


# -- wrong arguments --------------------------------------------------------------------------

BAD_ARGUMENTS = {
    "num_threads -1": (dict(num_threads=-1), ("num_threads", "-1")),
    "num_threads True": (dict(num_threads=True), ("num_threads", "True")),
    "num_threads False": (dict(num_threads=False), ("num_threads", "False")),
    "num_threads 2.5": (dict(num_threads=2.5), ("num_threads", "2.5")),
    "num_threads '2'": (dict(num_threads="2"), ("num_threads", "'2'")),
    "num_threads None": (dict(num_threads=None), ("num_threads", "None")),
    "capacity 0": (dict(capacity=0), ("capacity", "0")),
    "capacity -3": (dict(capacity=-3), ("capacity", "-3")),
    "capacity True": (dict(capacity=True), ("capacity", "True")),
    "capacity 1.5": (dict(capacity=1.5), ("capacity", "1.5")),
    "capacity of a lazy reader": (dict(num_threads=0, capacity=0), ("capacity", "0")),
    "capacity of a list output": (dict(output=[], capacity="10"), ("capacity", "'10'")),
    "processor 5": (dict(processor=5), ("processor", "int")),
    "processor of a lazy reader": (dict(processor="f", num_threads=0), ("processor", "str")),
    "name 5": (dict(name=5), ("name", "5")),
    "ordered 'yes'": (dict(ordered="yes"), ("ordered", "'yes'")),
    "ordered None": (dict(ordered=None), ("ordered", "None")),
    "output 3": (dict(output=3), ("output", "int")),
    "output of a lazy reader": (dict(num_threads=0, output=[]), ("lazy reader", "output")),
    "on_event 5": (dict(on_event=5), ("on_event", "5")),
}


@pytest.mark.parametrize("case", BAD_ARGUMENTS)
def test_bad_arguments_are_input_errors_naming_argument_and_stage(case):
    kwargs, names = BAD_ARGUMENTS[case]
    kwargs = dict(kwargs)
    output = kwargs.pop("output", None)
    with pytest.raises(lk.InputError) as info:
        pipe(range(3), output, name=kwargs.pop("name", "check"), **kwargs)
    message = str(info.value)
    assert all(name in message for name in names), message
    if case != "name 5":
        assert info.value.where["stage"] == "check"
    assert not _pipe_threads()
    assert drain(pipe(range(3), name="check")) == [0, 1, 2]  # pipes work right after


BAD_FINAL_OUTPUTS = {
    "a list": ([("total", lambda a, r: r)], ("final_outputs", "list")),
    "count taken": ({"count": lambda a, r: r}, ("'count'", "taken")),
    "not a reducer": ({"total": 5}, ("final output 'total'",)),
    "threads 0": (None, ("needs threads",)),
}


@pytest.mark.parametrize("case", BAD_FINAL_OUTPUTS)
def test_bad_final_outputs(case):
    final_outputs, names = BAD_FINAL_OUTPUTS[case]
    threads = 0 if case == "threads 0" else 1
    with pytest.raises(lk.InputError) as info:
        pipe_and_output(range(3), final_outputs=final_outputs, num_threads=threads, name="sum")
    assert all(name in str(info.value) for name in names) and info.value.where["stage"] == "sum"


def test_numpy_ints_are_counts():
    q = pipe(range(5), num_threads=np.int64(2), capacity=np.int32(2), ordered=True)
    assert drain(q) == [0, 1, 2, 3, 4]


class ExitingSource:
    """A source that calls ``sys.exit()`` while making record ``at``."""

    def __init__(self, at):
        self.at = at

    def __iter__(self):
        import sys

        for i in range(10):
            if i == self.at:
                sys.exit(2)
            yield i


def _exit_on_7(i):
    import sys

    if i == 7:
        sys.exit(2)
    return i


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_threads", [0, 3])
@pytest.mark.parametrize("where", ["source", "processor", "writer"])
def test_sys_exit_in_user_code_fails_the_stream_at_its_record(num_threads, where):
    """A ``SystemExit`` in a source, processor or writer ends the stream with a located
    error; it neither kills a pipe thread silently (a hang) nor escapes as itself."""
    if where == "source":
        q = pipe(ExitingSource(4), num_threads=num_threads, ordered=True, name="read")
        got, err = read_slowly(q, 0)
        assert got == list(range(4)) and err.where == {"stage": "read", "record": 4}
    elif where == "processor":
        q = pipe(range(20), processor=_exit_on_7, num_threads=num_threads, ordered=True,
                 name="parse")
        got, err = read_slowly(q, 0)
        assert got == list(range(7)) and err.where == {"stage": "parse", "record": 7}
    else:
        if num_threads == 0:
            pytest.skip("a writer needs threads")
        stage = pipe(range(20), _exit_on_7, num_threads=num_threads, name="sink")
        with pytest.raises(lk.LabkitError) as info:
            stage.join(timeout=5)
        err = info.value
        assert err.where == {"stage": "sink", "record": 7}
    assert "SystemExit" in str(err)


# -- the parts' contracts (a stage uses them only through these) ------------------------------


def test_a_queue_ends_when_its_last_producer_ends():
    q, stopped = Queue(4), []
    q.add_producer(lambda: stopped.append("a"))
    q.add_producer(lambda: stopped.append("b"))
    q.put(1)
    q.producer_ended(None)
    assert not q.closed
    q.producer_ended(None)
    assert q.closed and list(q) == [1] and stopped == ["a", "b"]  # closing stops them all


def test_a_failing_producer_fails_the_queue_at_once_and_a_closed_one_stops_a_new_producer():
    q = Queue()
    q.add_producer(lambda: None)
    q.add_producer(lambda: None)
    q.producer_ended(PipelineError("disk full", stage="w"))
    with pytest.raises(PipelineError, match="disk full"):
        q.get(timeout=1)
    stopped = []
    q.add_producer(lambda: stopped.append(True))
    assert stopped == [True]


def test_a_queue_keeps_the_stats_its_stage_sets():
    q = Queue()
    stats = StageStats("s", 3, 30.0, 0.1, 0.5, True)
    q.set_stats(stats)
    assert q.stats() is stats


def test_final_values_are_reduced_record_by_record_and_ready_at_the_end():
    final = lk.pipeline.Final({"total": (0, lambda acc, r: acc + r)})
    assert final.reduces
    for record in (1, 2, 3):
        final.add(record)
    with pytest.raises(TimeoutError):
        final.result(timeout=0.01)
    final.end(None, 3)
    assert final.result(timeout=1) == {"count": 3, "total": 6}


def test_every_argument_a_stage_checks_is_declared_once():
    import inspect

    from labkit.pipeline.pipe import ARGUMENTS

    checked = set(inspect.signature(pipe).parameters) - {"input", "output"}
    assert set(ARGUMENTS) == checked
