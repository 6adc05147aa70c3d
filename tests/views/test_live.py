"""The live-view base: one state, a last frame always, and each frame's timing for the lag."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

import labkit as lk
from labkit.views.board import Board
from labkit.views.live import Frame, LiveView, State, clock_html

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
