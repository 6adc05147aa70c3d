"""The sweep board draws the sweep's usable workers over time (issue 47's "seen").

Folded from ``SweepWorkers`` (the engine's, said when a sweep's usable workers change:
tests/experiments/test_sweep_workers.py on a real cluster): the fold's steps, the
frames' ``workers`` part (a paint's every step, a delta's new ones), a board following
a run that emits them, and the page drawing the steps in Chromium.
"""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from labkit.events import Observable, RunFinished, SweepStarted, SweepWorkers
from labkit.runs import start
from labkit.views.sweep.board import SweepBoard
from labkit.views.sweep.frames import FrameEncoder
from labkit.views.sweep.workers import WorkerSteps
from labkit.views.trackers.sweep_tracker import SweepTracker
from tests.browser import chromium
from tests.conftest import ROOT
from tests.views.frames_page import frames_of
from tests.views.sweep_page_harness import Board, served_harness
from tests.views.test_sweep_board import wait_stopped, wait_until

SPACE = {"x": {"type": "uniform", "lo": 0, "hi": 1}}
ROWS = tuple({"id": i, "config": {"x": i / 10}, "status": "pending"} for i in range(3))


def _counts(part) -> list[int]:
    """The workers of a frame part's steps."""
    return [n for _, n, _ in part["steps"]]


def _fed(*counts: int, t0: float = 1000.0):
    """A tracker, its frames and the workers' steps, told ``counts`` a second apart."""
    tracker, steps = SweepTracker("r"), WorkerSteps("r")
    frames = FrameEncoder(tracker)
    frames.workers = steps
    tracker(SweepStarted("r", "elastic", "loss", "min", SPACE, ROWS, 2))
    for i, n in enumerate(counts):
        steps(SweepWorkers("r", "elastic", n, 2 * n, time=t0 + i))
    return tracker, steps, frames


def test_the_fold_keeps_each_change_and_the_frames_carry_only_the_new_steps():
    tracker, steps, frames = _fed()
    assert "workers" not in frames.paint()                 # no step: no plot, no bytes
    steps(SweepWorkers("r", "elastic", 1, 1, time=10.0))
    steps(SweepWorkers("r", "elastic", 1, 1, time=11.0))   # said again: no step
    steps(SweepWorkers("other", "elastic", 5, 5, time=11.5))   # another run's
    paint = frames.paint()
    assert paint["workers"] == {"steps": [[10.0, 1, 1]], "until": None}
    assert "workers" not in frames.delta(tracker.take())   # nothing new: nothing sent
    steps(SweepWorkers("r", "elastic", 2, 2, time=12.0))
    steps(SweepWorkers("r", "elastic", 1, 1, time=13.0))
    assert frames.delta(tracker.take())["workers"] == {"steps": [[12.0, 2, 2], [13.0, 1, 1]]}
    steps(RunFinished("r", ok=True, time=20.0))
    assert frames.delta(tracker.take(), final=True)["workers"] == {"until": 20.0}
    assert frames.paint()["workers"] == {
        "steps": [[10.0, 1, 1], [12.0, 2, 2], [13.0, 1, 1]], "until": 20.0}
    assert steps.counts() == [1, 2, 1]


def test_a_board_following_a_run_sends_the_workers_in_its_frames(comms):
    board: list[SweepBoard] = []
    made, told = threading.Event(), threading.Event()

    def job(scope):
        made.wait(30)
        scope.emit(SweepStarted(scope.id, "elastic", "loss", "min", SPACE, ROWS, 2))
        for n in (1, 2, 1):
            sent = board[0].sent
            scope.emit(SweepWorkers(scope.id, "elastic", n, n))
            wait_until("the board's next frame", lambda s=sent: board[0].sent > s, 30)
        told.set()

    run = start("sweep", [Observable()], job, wait=False, detail={"name": "elastic"})
    b = SweepBoard(run)
    board.append(b)
    made.set()
    try:
        run.result(timeout=60)
        assert told.is_set()
        wait_stopped(b)
        frames = frames_of(comms, b.widget)
    finally:
        b.close()
    held: list[int] = []
    for f in frames:
        if f["kind"] == "paint":
            held = _counts(f["workers"]) if "workers" in f else []
        elif "steps" in f.get("workers", {}):
            held += _counts(f["workers"])
    assert held == [1, 2, 1]
    deltas = [f for f in frames if f["kind"] == "delta" and "steps" in f.get("workers", {})]
    assert deltas and all(len(f["workers"]["steps"]) == 1 for f in deltas)  # only the new
    last = frames[-1]
    kept = last if "workers" in last and last["kind"] == "paint" else b.encoder.paint(kept=True)
    assert _counts(kept["workers"]) == [1, 2, 1] and kept["workers"]["until"] is not None


@pytest.mark.needs("chromium")
def test_the_board_page_draws_the_workers_as_steps_in_chromium():
    t0 = time.time() - 3  # the last step is held flat until now: times of today
    tracker, steps, frames = _fed(1, 2, 1, t0=t0)
    with served_harness(ROOT, "workers-page-http") as url, chromium() as browser:
        ctx = browser.new_context(viewport={"width": 900, "height": 1000})
        try:
            board = Board(ctx.new_page())
            board.load(url)
            assert board.page.evaluate("lkTest.error || null") is None
            plot = ".labkit-sweep-worker-count"
            board.deliver({**frames.paint(), "status": "running", "ended": False, "clock": None})
            drawn = board.data(plot)
            assert drawn["steps"] == "1,2,1"
            assert _inked(board, plot) == [True, True, True]    # each step's level is drawn
            middles = board.page.evaluate(f"JSON.parse(document.querySelector('{plot}')"
                                          ".dataset.middles)")
            (x1, y1), (x2, y2), (x3, y3) = middles
            assert x1 < x2 < x3 and y2 < y1 == y3                # up one step, then down
            steps(SweepWorkers("r", "elastic", 3, 6, time=t0 + 3))
            board.deliver({**frames.delta(tracker.take()), "status": "running", "ended": False,
                           "clock": None})
            assert board.data(plot)["steps"] == "1,2,1,3"
            assert board.page.evaluate(f"getComputedStyle(document.querySelector('{plot}'))"
                                       ".display") == "block"
            assert board.errors == []
        finally:
            with contextlib.suppress(Exception):
                ctx.close()


def _inked(board: Board, selector: str) -> list[bool]:
    """Whether the canvas holds the line's ink at each step's middle (CSS px, ±2 px)."""
    return board.page.evaluate(
        """s => { const c = document.querySelector(s);
                  const k = c.width / c.clientWidth, ctx = c.getContext('2d');
                  return JSON.parse(c.dataset.middles).map(([x, y]) => {
                    const d = ctx.getImageData(Math.round((x - 2) * k), Math.round((y - 2) * k),
                                               Math.round(4 * k), Math.round(4 * k)).data;
                    for (let i = 3; i < d.length; i += 4) if (d[i] > 128) return true;
                    return false; }); }""", selector)
