"""Quick in-process tasks started together run several to one Dask task (``packing.py``).

Packed or not, every task gives its own result, start and end; slow tasks
stay one to a Dask task; a cancelled batch's tasks still waiting in a pack
never run; an error in a pack fails its own task only, named by its chunk.
"""

from __future__ import annotations

import threading
import time

import pytest
from distributed.diagnostics.plugin import SchedulerPlugin

import labkit as lk
from labkit.events import TaskFinished, TaskStarted
from labkit.scheduling.routes.packing import MIN_PACKS


def _labkit_tasks(dask_scheduler) -> list:
    return [str(k) for k in dask_scheduler.tasks if str(k).startswith("labkit-")]


def _idle(s, timeout: float = 60) -> None:
    """Wait until the Dask scheduler holds none of labkit's tasks: each ended and was released
    (an in-process task delivers its outcome before its Dask task ends, so results come back
    before the scheduler hears of the end)."""
    deadline = time.monotonic() + timeout
    while left := s.client.run_on_scheduler(_labkit_tasks):
        assert time.monotonic() < deadline, left[:5]
        time.sleep(0.02)


class _Dispatched(SchedulerPlugin):
    """Every key the Dask scheduler sends to a worker (a task stream misses tasks released
    while still processing, as an in-process task's may be once its outcome is in)."""

    name = "labkit-test-dispatched"

    def __init__(self):
        self.keys: list[str] = []

    def transition(self, key, start, finish, *args, **kwargs):
        if finish == "processing":
            self.keys.append(str(key))


def _add_dispatched(dask_scheduler) -> None:
    dask_scheduler.add_plugin(_Dispatched(), name=_Dispatched.name)


def _take_dispatched(dask_scheduler) -> list[str]:
    plugin = dask_scheduler.plugins[_Dispatched.name]
    dask_scheduler.remove_plugin(name=_Dispatched.name)
    return plugin.keys


def _dask_keys(s, fn) -> list[str]:
    """The keys of the Dask tasks that ran while ``fn()`` ran."""
    s.client.run_on_scheduler(_add_dispatched)
    try:
        fn()
        _idle(s)  # every task's end has reached the scheduler
    finally:
        keys = s.client.run_on_scheduler(_take_dispatched)
    return keys


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


class Gated(Calls):
    """Quick tasks; once ``gated``, each waits for ``gate`` (it says so by ``started``)."""

    def __init__(self, seconds: float):
        super().__init__(seconds)
        self.gated, self.started, self.gate = False, threading.Event(), threading.Event()

    def __call__(self, x):
        if self.gated:
            self.started.set()
            assert self.gate.wait(60)
        return super().__call__(x)


def test_tasks_of_a_cancelled_batch_left_in_a_pack_never_run(threads):
    s = threads
    quick = Gated(0.0002)
    with s.batch() as b:
        b.add_tasks(range(64), quick, ready=True)
        b.get_results()
    quick.count, quick.gated = 0, True  # packed as quick; now each pack's first task waits
    b = s.batch()
    b.add_tasks(range(64), quick, ready=True)
    assert quick.started.wait(60)
    b.cancel(lk.CancelledError("stop"))
    quick.gate.set()  # the tasks under way end; the rest of their packs is passed over
    _idle(s)
    # a pack at the gate on each of the 2 threads, and under load one more task handed to a
    # thread as the cancel landed; packs that kept running would run up to all 64
    assert quick.count <= 4, f"{quick.count} tasks ran: tasks of a cancelled pack kept running"
    with pytest.raises(lk.CancelledError):
        b.get_results()
    assert s.total_open_tasks == 0


def _fails_on_seven(x):
    if x == 7:
        raise ValueError("seven")
    return x


def test_an_error_in_a_pack_names_its_chunk_and_the_tasks_before_it_finish(threads, recorder):
    s = threads
    # The failure comes out of get_results(), or out of add_tasks() when chunk 7 failed
    # while later chunks were still being added (the batch says so at once): a CI run
    # under load saw the second.
    with s.batch() as b, pytest.raises(lk.TaskError) as caught:
        b.add_tasks(range(64), _fails_on_seven, ready=True)
        b.get_results()
    assert "chunk 7" in str(caught.value) and "seven" in str(caught.value)
    with s.batch() as b:  # timed: quick
        b.add_tasks(range(100, 164), _fails_on_seven, ready=True)
        b.get_results()
    s.subscribe(recorder)

    def run():
        with s.batch() as b, pytest.raises(lk.TaskError, match="chunk 7"):
            b.add_tasks(range(64), _fails_on_seven, ready=True)
            b.get_results()

    assert any(k.endswith("-pack") for k in _dask_keys(s, run))
    done = {e.info.chunk for e in recorder.of(TaskFinished)}
    assert 7 not in done and set(range(7)) <= done   # its pack ran the ones before it
    assert s.total_open_tasks == 0
