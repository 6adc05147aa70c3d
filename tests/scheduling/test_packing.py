"""Quick in-process tasks started together run several to one Dask task (``packing.py``).

Packed or not, every task gives its own result, start and end; slow tasks
stay one to a Dask task; a cancelled batch's tasks still waiting in a pack
never run; an error in a pack fails its own task only, named by its chunk.
"""

from __future__ import annotations

import threading
import time

import pytest
from distributed import get_task_stream

import labkit as lk
from labkit.events import TaskFinished, TaskStarted
from labkit.scheduling.packing import MIN_PACKS


def _dask_keys(s, fn) -> list[str]:
    """The keys of the Dask tasks that ran while ``fn()`` ran."""
    with get_task_stream(client=s.client) as stream:
        fn()
        time.sleep(0.3)  # the stream's last records reach the client
    return [str(t["key"]) for t in stream.data]


def _square(x):
    return x * x


class Calls:
    """A task that counts its calls, taking ``seconds`` each."""

    def __init__(self, seconds: float):
        self.seconds, self.count, self._lock = seconds, 0, threading.Lock()

    def __call__(self, x):
        time.sleep(self.seconds)
        with self._lock:
            self.count += 1
        return x


@pytest.fixture
def threads():
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        yield s


def test_quick_tasks_run_several_to_a_dask_task_and_each_gives_its_own_events(threads, recorder):
    s = threads
    with s.batch() as b:  # first group: measured, not packed
        b.add_tasks(range(64), _square, ready=True)
        b.get_results()
    s.subscribe(recorder)

    def run():
        with s.batch() as b:
            b.add_tasks(range(640), _square, ready=True)
            assert sorted(b.get_results()) == [v * v for v in range(640)]

    keys = _dask_keys(s, run)
    packs = [k for k in keys if k.endswith("-pack")]
    assert packs and len(keys) <= 640 // 4, f"{len(keys)} Dask tasks for 640 quick ones"
    assert len(set(keys)) == len(keys)
    finished = recorder.of(TaskFinished)
    assert len(finished) == 640 and len({e.info.task for e in finished}) == 640
    assert all(e.end >= e.start for e in finished)
    # A start travels through the Dask scheduler; a quick task may be done before it
    # arrives, and is then not reported: never a start of a task that did not run.
    assert {e.info.task for e in recorder.of(TaskStarted)} <= {e.info.task for e in finished}


def test_slow_tasks_stay_one_to_a_dask_task(threads):
    s = threads
    slow = Calls(0.02)

    def run():
        for _ in range(2):
            with s.batch() as b:
                b.add_tasks(range(16), slow, ready=True)
                b.get_results()

    keys = _dask_keys(s, run)
    assert keys and not [k for k in keys if k.endswith("-pack")]
    assert slow.count == 32


def test_a_group_makes_enough_dask_tasks_for_every_thread(threads):
    s = threads
    with s.batch() as b:
        b.add_tasks(range(64), _square, ready=True)
        b.get_results()

    def run():
        with s.batch() as b:
            b.add_tasks(range(64), _square, ready=True)
            b.get_results()

    assert len(_dask_keys(s, run)) >= MIN_PACKS


def test_tasks_of_a_cancelled_batch_left_in_a_pack_never_run(threads):
    s = threads
    quick = Calls(0.0002)
    with s.batch() as b:
        b.add_tasks(range(64), quick, ready=True)
        b.get_results()
    quick.count, quick.seconds = 0, 0.002  # packed as quick, now 2 ms each
    b = s.batch()
    b.add_tasks(range(64), quick, ready=True)
    time.sleep(0.02)
    b.cancel(lk.CancelledError("stop"))
    time.sleep(0.05)
    ran = quick.count
    time.sleep(0.3)
    assert quick.count <= ran + 2, "tasks of a cancelled pack kept running"
    assert quick.count < 64
    with pytest.raises(lk.CancelledError):
        b.get_results()
    assert s.total_open_tasks == 0


def _fails_on_seven(x):
    if x == 7:
        raise ValueError("seven")
    return x


def test_an_error_in_a_pack_names_its_chunk_and_the_tasks_before_it_finish(threads, recorder):
    s = threads
    with s.batch() as b:
        b.add_tasks(range(64), _fails_on_seven, ready=True)
        with pytest.raises(lk.TaskError) as caught:
            b.get_results()
    assert "chunk 7" in str(caught.value) and "seven" in str(caught.value)
    with s.batch() as b:  # timed: quick
        b.add_tasks(range(100, 164), _fails_on_seven, ready=True)
        b.get_results()
    s.subscribe(recorder)

    def run():
        with s.batch() as b:
            b.add_tasks(range(64), _fails_on_seven, ready=True)
            with pytest.raises(lk.TaskError, match="chunk 7"):
                b.get_results()

    assert any(k.endswith("-pack") for k in _dask_keys(s, run))
    done = {e.info.chunk for e in recorder.of(TaskFinished)}
    assert 7 not in done and set(range(7)) <= done   # its pack ran the ones before it
    assert s.total_open_tasks == 0
