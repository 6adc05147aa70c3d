"""The live-view base: one state, a last frame always, and each frame's timing for the lag."""

from __future__ import annotations

import re
import threading
import time

import numpy as np
import pytest

import labkit as lk
from labkit.views.notebook.board import Board
from labkit.views.live import EventClock, Frame, LiveView, State, clock_html

pytestmark = pytest.mark.usefixtures("no_thread_leak")


class Frames(LiveView):
    """Draws nothing; keeps what each draw was given."""

    def draw(self, snapshot):
        self.last = snapshot


def _train(s, n_chunks=4):
    chunks = [np.random.default_rng(i).normal(size=(20, 3)) for i in range(n_chunks)]
    return lk.ParallelFlow([lk.nodes.PCA(output_dim=2)]).train([chunks], scheduler=s)


def test_each_frame_says_which_events_it_first_showed():
    with lk.LocalScheduler() as s:
        view = Frames(s).start()
        before = time.time()
        _train(s)
        view.stop()
    assert view.state is State.STOPPED
    shown = [f for f in view.frames if f.events]
    assert shown, list(view.frames)
    # every event counted once, each frame after the events it shows
    assert all(before <= f.oldest <= f.newest <= f.drawn for f in shown)
    assert all(f.lag == f.drawn - f.oldest >= 0 for f in shown)
    assert sum(f.events for f in view.frames) >= 4 + 2   # tasks, and the run's start and end


def test_a_frame_without_new_events_has_no_lag():
    assert Frame(None, None, 0, time.time()).lag is None


def test_the_clock_stamp_carries_the_frame_for_the_page():
    stamp = clock_html(Frame(10.0, 11.5, 3, 12.25))
    assert 'class="labkit-clock"' in stamp and "display:none" in stamp
    values = dict(re.findall(r'data-(\w+)="([^"]*)"', stamp))
    assert values["oldest"] == "10.000" and values["newest"] == "11.500"
    assert values["events"] == "3" and values["drawn"] == "12.250"
    assert float(values["sent"]) >= 12.25
    assert clock_html(None) == ""


def test_a_board_writes_its_last_frame_into_its_status(comms):
    with lk.LocalScheduler() as s:
        b = Board(s, bokeh=False, lanes=False)
        _train(s)
        b.stop()
    status = comms.state(b.status)["value"]
    drawn = float(re.search(r'data-drawn="([0-9.]+)"', status).group(1))
    assert drawn == pytest.approx(b.frame.drawn, abs=1e-3)
    b.close()


def _writer_ends(view, seconds: float = 30) -> bool:
    """Whether the view's writer thread is gone within ``seconds`` (polled)."""
    deadline = time.monotonic() + seconds
    while view.writer is not None and view.writer.running:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _writer_threads() -> list:
    import threading
    return [t.name for t in threading.enumerate() if t.name.startswith("labkit-writer")]


@pytest.mark.parametrize("make", ["board", "frames", "console"])
def test_a_view_of_a_shut_down_scheduler_draws_its_final_state_once_and_stops(comms, make):
    """``lk.board(s)`` of a scheduler already shut down stayed live with a writer thread."""
    before = _writer_threads()
    s = lk.LocalScheduler()
    _train(s)
    s.shutdown()
    if make == "board":
        view = lk.board(s, bokeh=False, lanes=False)
    elif make == "console":
        import io
        from labkit.views.console.bars import ConsoleProgress
        view = ConsoleProgress(s, stream=io.StringIO()).start()
    else:
        view = Frames(s).start()
    assert _writer_ends(view), f"{view!r}: its writer still runs"
    assert view.state is State.STOPPED and not view.live
    assert len(view.frames) >= 1    # its final state
    assert _writer_threads() == before
    if make == "board":
        view.close()


def test_a_view_of_a_finished_run_draws_it_once_and_stops(comms):
    with lk.LocalScheduler() as s:
        chunks = [np.random.default_rng(i).normal(size=(20, 3)) for i in range(4)]
        run = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)]).train([chunks], scheduler=s,
                                                                  wait=False)
        run.result(60)
        view = lk.board(run, bokeh=False, lanes=False)
        assert _writer_ends(view) and view.state is State.STOPPED
        assert len(view.frames) >= 1
        view.close()


def test_a_view_stopped_before_it_started_draws_once_and_leaves_no_thread():
    with lk.LocalScheduler() as s:
        view = Frames(s)
        view.stop()
        view.start()
        assert _writer_ends(view) and view.state is State.STOPPED and len(view.frames) >= 1


def test_the_event_clock_loses_no_event_to_threads_that_note_without_a_lock():
    clock, seen = EventClock(), []
    go = threading.Barrier(8)

    def note():
        go.wait()
        for i in range(5000):
            clock.note(float(i))

    def take_while_noting():
        for _ in range(200):          # a writer taking frames while the trials note
            clock.take()
            seen.append(clock.taken[2])

    threads = [threading.Thread(target=note) for _ in range(8)]
    taker = threading.Thread(target=take_while_noting)
    for t in [*threads, taker]:
        t.start()
    for t in [*threads, taker]:
        t.join(60)
    clock.take()
    seen.append(clock.taken[2])
    assert sum(seen) == 8 * 5000      # every event counted in exactly one frame
    clock.take()
    assert clock.taken == (None, None, 0)


def test_the_event_clock_says_which_events_a_snapshot_is_the_first_to_show():
    clock = EventClock()
    assert clock.taken == (None, None, 0)
    clock.note(1.0)
    clock.note(2.5)
    clock.take()                                   # the writer, just before a snapshot
    assert clock.taken == (1.0, 2.5, 2)
    clock.note(3.0)
    clock.take()
    assert clock.taken == (3.0, 3.0, 1)
    clock.take()                                   # nothing new: an empty count
    assert clock.taken == (None, None, 0)
