"""The board's Pareto view in headless Chromium (issue 48): the harness page
(``tests/views/sweep_page.html``) is sent the frames a real :class:`FrameEncoder` writes for a
two-objective sweep; brushing the parallel coordinates dims the Pareto points outside the
brush, a delta moves the front, a click on a front point asks for that trial, and a board of
one metric draws no Pareto view."""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest

from labkit.events import SweepStarted, TrialFinished
from labkit.experiments import TrialRecord
from labkit.experiments.objectives.dominance import pareto_front
from labkit.views.sweep.frames import FrameEncoder
from labkit.views.sweep.pareto import ParetoFrames
from labkit.views.trackers.sweep_tracker import SweepTracker
from tests.browser import screenshot
from tests.conftest import ROOT
from tests.views.sweep_page_harness import Board, served_harness

pytestmark = pytest.mark.needs("chromium")

N = 400
SPACE = {"x": {"type": "uniform", "lo": 0, "hi": 1}, "y": {"type": "uniform", "lo": 0, "hi": 1}}


@pytest.fixture(scope="module")
def site():
    with served_harness(ROOT, "pareto-page-http") as url:
        yield url


@pytest.fixture
def open_board(browser, site):
    contexts, boards = [], []

    def open_() -> Board:
        ctx = browser.new_context(viewport={"width": 900, "height": 1400})
        contexts.append(ctx)
        board = Board(ctx.new_page())
        boards.append(board)
        board.load(site)
        assert board.page.evaluate("lkTest.error || null") is None
        return board

    yield open_
    for ctx in contexts:
        with contextlib.suppress(Exception):
            ctx.close()
    assert [e for b in boards for e in b.errors] == []


def sweep_frames(several: bool = True):
    """A tracker of N trials (x, y) and an encoder; ``finish(ids)`` ends them (ZDT1)."""
    rng = np.random.default_rng(11)
    x, y = rng.uniform(0, 1, N + 20), rng.uniform(0, 1, N + 20)
    g = 1 + 9 * y
    values = np.column_stack([x, g * (1 - np.sqrt(x / g))])
    tracker = SweepTracker("r")
    trials = tuple({"id": i, "config": {"x": float(x[i]), "y": float(y[i])}} for i in range(N + 20))
    tracker(SweepStarted("r", "zdt", "f1", "min", SPACE, trials, 2))
    encoder = FrameEncoder(tracker)
    if several:
        encoder.pareto = ParetoFrames(("f1", "f2"), ("min", "min"))

    def finish(ids) -> None:
        for i in ids:
            objectives = {"f1": float(values[i, 0]), "f2": float(values[i, 1])}
            tracker(TrialFinished("r", TrialRecord(
                id=i, config={"x": float(x[i]), "y": float(y[i])}, status="completed",
                value=objectives["f1"], best=objectives["f1"], step=1, attempts=1,
                objectives=objectives if several else None)))

    return tracker, encoder, finish, values


def framed(body: dict) -> dict:
    """A frame as the board sends it (status, end and clock added)."""
    return {**body, "status": "running", "ended": False, "clock": None}


def test_brushing_dims_the_pareto_points_a_delta_moves_the_front_a_click_shows_a_trial(
        open_board):
    tracker, encoder, finish, values = sweep_frames()
    finish(range(N))
    board = open_board()
    board.deliver(framed(encoder.paint()))
    board.page.wait_for_function(
        "n => document.querySelector('.labkit-sweep-pareto')?.dataset.points === n", arg=str(N))
    data = board.data(".labkit-sweep-pareto")
    front = set(pareto_front(values[:N], ("min", "min")).tolist())
    assert data["dimmed"] == "0" and data["front"] == str(len(front))
    assert int(data["stairs"]) == len(front)     # two objectives: every front point a step
    assert (data["x"], data["y"]) == ("f1", "f2")
    assert int(board.data(".labkit-sweep-hv")["points"]) >= 1

    # brush x on the parallel coordinates: the points outside are dimmed
    board.drag_axis("x", 0.3, 0.7)
    (brush,) = board.wait_sent("brush")
    lo, hi = brush["ranges"]["x"]
    xs = [tracker.trials([i])[0].config["x"] for i in range(N)]
    outside = sum(not lo <= v <= hi for v in xs)
    assert 0 < outside < N
    board.page.wait_for_function(
        "n => document.querySelector('.labkit-sweep-pareto').dataset.dimmed === n",
        arg=str(outside))
    screenshot(board.page, "pareto-page-brushed")
    board.click_axis("x")                         # cleared: none dimmed
    board.page.wait_for_function(
        "() => document.querySelector('.labkit-sweep-pareto').dataset.dimmed === '0'")

    # a delta: 20 trials end, the front moves as the kernel says
    finish(range(N, N + 20))
    delta = encoder.delta(tracker.take())
    board.deliver(framed(delta))
    front = set(pareto_front(values, ("min", "min")).tolist())
    board.page.wait_for_function(
        "n => document.querySelector('.labkit-sweep-pareto').dataset.front === n",
        arg=str(len(front)))
    assert board.data(".labkit-sweep-pareto")["points"] == str(N + 20)

    # a click on a front point asks the kernel for that trial, as a row's click does
    at = json.loads(board.data(".labkit-sweep-pareto")["frontAt"])
    trial, px, py = at[len(at) // 2]
    board.page.locator(".labkit-sweep-pareto").scroll_into_view_if_needed()
    box = board.page.locator(".labkit-sweep-pareto").bounding_box()
    board.page.mouse.click(box["x"] + px, box["y"] + py)
    shown = board.wait_sent("show")
    assert shown[-1]["trial"] == int(trial) and int(trial) in front

    # the y axis is choosable: the same objective on both axes is one line of points
    board.page.select_option(".labkit-sweep-pareto-y", "0")
    board.page.wait_for_function(
        "() => document.querySelector('.labkit-sweep-pareto').dataset.y === 'f1'")


def test_a_board_of_one_metric_has_no_pareto_view(open_board):
    tracker, encoder, finish, _ = sweep_frames(several=False)
    finish(range(20))
    board = open_board()
    paint = encoder.paint()
    assert "pareto" not in paint
    board.deliver(framed(paint))
    assert board.page.locator(".labkit-sweep-pareto").count() == 0
