"""The writer: one thread, at most max_rate draws a second, a final draw at stop."""

import threading
import time

import pytest

from labkit.events import TaskFinished, TaskInfo
from labkit.views.trackers.tracker import Tracker
from labkit.views.writer import Writer

#: Whether threads have a priority of their own here (Linux).
HAS_PRIORITIES = hasattr(threading, "get_native_id") and hasattr(__import__("os"), "getpriority")

pytestmark = pytest.mark.usefixtures("no_thread_leak")


def _finished(i):
    return TaskFinished(TaskInfo("r", i, i, "train", 0, "PCA", 0), "tcp://w1", i, i + 0.5, 10)


def test_many_events_are_drawn_at_most_max_rate_times_a_second():
    tracker, draws = Tracker(), []
    writer = Writer(tracker, lambda snap: draws.append((time.monotonic(), snap.version)))
    start = time.monotonic()
    for i in range(2000):  # far faster than 10 a second
        tracker(_finished(i))
        writer.poke()
        if i % 100 == 0:
            time.sleep(0.02)  # spread the events over a while
    elapsed = time.monotonic() - start
    writer.stop()
    assert not writer.running
    assert draws[-1][1] == tracker.version          # the final draw has everything
    times = [t for t, _ in draws]
    assert len(draws) <= elapsed * 10 + 2            # + the first and the final draw
    gaps = [b - a for a, b in zip(times[:-1], times[1:-1])]  # the final draw may come early
    assert all(g >= 0.09 for g in gaps), gaps
    assert len(draws) < 2000 / 20


def _cpu_seconds(writer):
    """CPU time the writer's thread used so far."""
    import psutil
    native = writer._thread.native_id
    (t,) = [t for t in psutil.Process().threads() if t.id == native]
    return t.user_time + t.system_time


def test_no_change_no_draw_and_no_busy_loop():
    tracker, draws = Tracker(), []
    writer = Writer(tracker, draws.append)
    writer.poke()
    time.sleep(0.3)
    assert len(draws) == 1          # the first draw; the version never changed since
    for _ in range(5):
        writer.poke()               # pokes without changes draw nothing
    time.sleep(0.3)
    assert len(draws) == 1
    cpu = _cpu_seconds(writer)
    time.sleep(0.5)
    assert _cpu_seconds(writer) - cpu < 0.02  # asleep on its event: no spinning
    writer.poke(force=True)
    time.sleep(0.2)
    assert len(draws) == 2          # forced
    writer.stop()
    assert len(draws) == 3 and writer.draws == 3  # once more at stop


def test_draw_errors_are_logged_and_the_writer_goes_on(caplog):
    tracker, calls = Tracker(), []

    def draw(snap):
        calls.append(snap.version)
        if len(calls) == 1:
            raise RuntimeError("bad frame")

    writer = Writer(tracker, draw, max_rate=50)
    tracker(_finished(0)); writer.poke()
    time.sleep(0.1)
    tracker(_finished(1)); writer.poke()
    time.sleep(0.1)
    writer.stop()
    assert len(calls) >= 2 and "bad frame" in caplog.text


def test_heartbeat_draws_without_events_and_stop_from_the_thread_itself():
    tracker, draws = Tracker(), []
    writer = None

    def draw(snap):
        draws.append(threading.current_thread().name)
        if len(draws) == 3:
            writer.stop()   # from the writer's own thread: no join, no deadlock

    writer = Writer(tracker, draw, heartbeat=0.05)
    deadline = time.time() + 5
    while writer.running and time.time() < deadline:
        time.sleep(0.02)
    assert not writer.running and len(draws) == 4   # 3 beats and the final draw
    assert all(name.startswith("labkit-writer") for name in draws)


def test_max_rate_must_be_positive():
    with pytest.raises(ValueError):
        Writer(Tracker(), print, max_rate=0)


def test_the_writer_thread_runs_at_the_lowest_priority():
    import os
    import sys
    import threading
    from labkit.views.priority import NICENESS
    from labkit.views.trackers.tracker import Tracker
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen = []
    writer = Writer(Tracker(), lambda snap: seen.append(
        os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
    writer.poke(force=True)
    writer.stop()
    assert seen
    if sys.platform.startswith("linux"):
        assert set(seen) == {max(NICENESS, mine)}   # lower, never higher than its maker's
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine  # only its own


@pytest.mark.skipif(not HAS_PRIORITIES, reason="threads have no priority of their own here")
def test_a_thread_already_below_the_views_priority_stays_there():
    """A notebook started with `nice -n 15` (or a test pass run beside others) keeps its
    priority: a view's thread never rises above the work that made it."""
    import os
    from labkit.views.priority import NICENESS, lower_this_thread
    seen = []

    def body():
        me = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, me, NICENESS + 5)   # lowering: always allowed
        seen.append(lower_this_thread())
        seen.append(os.getpriority(os.PRIO_PROCESS, me))

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [True, NICENESS + 5]


def test_settled_waits_until_every_live_writer_drew_the_latest_version():
    """Tests and notebooks wait for this event, not for a time, before reading a view."""
    from labkit.views.writer import settled

    tracker, release, drawn = Tracker(), threading.Event(), []

    def slow_draw(snap):
        assert release.wait(60)  # a loaded machine: the draw takes its time
        drawn.append(snap.version)

    writer = Writer(tracker, slow_draw)
    try:
        tracker(_finished(1))
        writer.poke()
        assert not settled(timeout=0.2)  # still drawing
        release.set()
        assert settled(timeout=60)
        assert drawn[-1] == tracker.version
    finally:
        release.set()
        writer.stop()


class _Behind:
    """A tracker that says how long its oldest change not drawn yet has waited."""

    def __init__(self):
        self.tracker, self.waited = Tracker(), None

    @property
    def version(self):
        return self.tracker.version

    def snapshot(self):
        return self.tracker.snapshot()

    def behind(self):
        return self.waited


def _in_a_thread_at_a_higher_priority(run) -> None:
    """Call ``run()`` in a thread above the views' low priority (0 when this one is at it or
    lower, as in `make test`'s parallel pass, where only root may raise it); raise what
    ``run`` raised."""
    import os
    from labkit.views.priority import NICENESS
    failed: list[BaseException] = []

    def body():
        me = threading.get_native_id()
        try:
            if os.getpriority(os.PRIO_PROCESS, me) >= NICENESS:
                os.setpriority(os.PRIO_PROCESS, me, 0)
            run()
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            failed.append(exc)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    if failed and isinstance(failed[0], PermissionError):
        pytest.skip("this process runs at the views' low priority or lower, and may not raise "
                    "a thread above it")
    if failed:
        raise failed[0]


@pytest.mark.skipif(not HAS_PRIORITIES, reason="threads have no priority of their own here")
def test_a_writer_that_fell_behind_draws_at_its_makers_priority_until_it_caught_up():
    """On a loaded machine the low-priority writer drew a 20 ms frame in 0.8 s and the board
    trailed its run by seconds (issue 44): a view that fell behind catches up at the
    priority of the thread that made it, then goes back to the low one."""
    _in_a_thread_at_a_higher_priority(_falls_behind_and_catches_up)


def _falls_behind_and_catches_up():
    import os
    from labkit.views.priority import NICENESS
    from labkit.views.writer import CATCH_UP
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert mine < NICENESS
    source, seen, drew = _Behind(), [], threading.Event()

    def draw(snap):
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        drew.set()

    writer = Writer(source, draw)
    try:
        for waited, priority in [(CATCH_UP + 4.0, mine), (None, NICENESS),
                                 (CATCH_UP / 4, NICENESS), (CATCH_UP + 0.5, mine)]:
            source.waited = waited
            drew.clear()
            writer.poke(force=True)
            assert drew.wait(30), "no draw"
            assert seen[-1] == priority, (waited, seen)
    finally:
        source.waited = None
        writer.stop()
    assert not writer.running and writer.catch_ups == 2
    assert not [t for t in threading.enumerate() if t.name.endswith("-catch-up")]
