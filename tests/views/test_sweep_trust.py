"""Issue 38 on the sweep's views: odd values on the board, boards of stored sweeps, dashboards
of finished ones."""

from __future__ import annotations

import json
import logging
import math
import threading
import time

import pytest

import labkit as lk
from labkit.events import SweepStarted, TrialFinished, TrialReported, TrialStarted
from labkit.experiments import TrialRecord
from labkit.experiments.sweep import finished_run
from labkit.views.sweep import draw as sweep_draw
from labkit.views.notebook.board import board
from labkit.views.bokeh.dashboard import running_url, stop_dashboard
from labkit.views.sweep.board import SweepBoard
from labkit.views.sweep.frames import FrameEncoder
from labkit.views.trackers.sweep_grid import r6
from labkit.views.trackers.sweep_tracker import SweepTracker
from tests.experiments import functions as F
from tests.views.frames_page import Page, answers, frames_of
from tests.views.test_sweep_board import (
    assert_matches_result,
    assert_one_message_a_frame,
    said,
    tell,
    wait_stopped,
)

pytestmark = pytest.mark.usefixtures("no_thread_leak")

INF, NAN = float("inf"), float("nan")
ODD = [INF, -INF, NAN, 1e308, -1e308, 0.25]


@pytest.fixture
def boards():
    made = []
    yield made
    for b in made:
        b.close()


def odd_reports(config, trial):
    """Reports the odd value ``v`` among ordinary ones."""
    trial.report(0, loss=1.0)
    trial.report(1, loss=config["v"])
    trial.report(2, loss=0.5)
    return {"loss": config["v"]}


def _numbers(message) -> list:
    """Every number in a message (bools aside)."""
    if isinstance(message, dict):
        return [n for v in message.values() for n in _numbers(v)]
    if isinstance(message, list):
        return [n for v in message for n in _numbers(v)]
    return [message] if isinstance(message, (int, float)) and not isinstance(message, bool) else []


# -- 12. infinite, NaN and huge values ------------------------------------------------------------


def test_a_trial_reporting_inf_leaves_every_frame_drawn(comms, boards, caplog):
    configs = [{"v": v, "w": w} for v, w in zip(ODD, [INF, 1e308, NAN, -1e308, 2**80, 1.0], strict=True)]
    caplog.set_level(logging.ERROR, logger="labkit")
    run = lk.sweep(odd_reports, configs, metric="loss", mode="min", store=None, wait=False)
    b = board(run)
    boards.append(b)
    result = run.result(timeout=60)
    wait_stopped(b)
    assert not [r for r in caplog.records if r.name.startswith("labkit")], caplog.text
    frames = assert_one_message_a_frame(comms, b)
    for f in frames:                                          # JSON a kernel can send
        json.dumps(f, allow_nan=False)
        assert all(math.isfinite(n) for n in _numbers(f))
    page = Page.of(frames)
    assert len(page.lines) == len(configs)                    # every trial's line
    for t in result.trials:                                   # its odd point a gap (null)
        assert page.lines[t.id] == [[0, 1.0], [1, r6(t.config["v"])], [2, 0.5]]
        assert page.param(t.id, "v") == r6(t.config["v"])     # a parameter's too
    assert page.meta["kinds"] == {"v": "number", "w": "number"}
    assert_matches_result(page, result)                       # non-finite values: null
    assert result.best.config["v"] == -INF                    # as the result ranks it
    assert page.top["best"] == result.best.id


@pytest.mark.parametrize("values", [
    [INF, 1.0], [-INF, 1.0], [NAN, NAN], [1e308, -1e308], [1e-320, 5e-324], [INF, -INF],
    [2**2000, 1.0],
])
def test_the_frames_place_any_values_without_overflow(values):
    space = {"x": {"type": "uniform", "lo": "-inf", "hi": "inf"},
             "c": {"type": "choice", "values": [repr(v) for v in values]}}
    tracker = SweepTracker("r")
    tracker(SweepStarted("r", "s", "loss", "min", space, tuple(
        {"id": i, "config": {"x": v, "c": repr(v)}} for i, v in enumerate(values)), 1))
    frames = FrameEncoder(tracker, lines=1)                   # one line, the rest a band
    messages = [frames.paint()]
    for i, v in enumerate(values):
        tracker(TrialStarted("r", i, {"x": v}, "w #0"))
        tracker(TrialReported("r", i, (0, 1, 1e300), ({"loss": v}, {"loss": 1.0}, {"loss": v}),
                              v, v))
        tracker(TrialFinished("r", TrialRecord(id=i, config={"x": v}, status="completed",
                                               value=v, best=v, step=1e300, worker="w #0")))
        messages.append(frames.delta(tracker.take(), final=True))
    messages += [frames.paint(), frames.brush({"x": [-INF, INF]}), frames.brush({"value": [0, 2]})]
    for m in messages:
        json.dumps(m, allow_nan=False)
        assert all(math.isfinite(n) for n in _numbers(m)), m
    band = messages[-3]["curves"]["band"]
    assert band is None or band["steps"] and all(math.isfinite(s) for s in band["steps"])
    assert sweep_draw.table(tracker.snapshot())               # the dashboard's table too


# -- 15. a stored sweep, and a finished run, have a board -------------------------------------------


def _wait_frames_out(b, timeout: float = 60.0) -> None:
    """Until the board's writer thread has ended: ``live`` turns false at its ending draw,
    and the writer's last draw (a delta, nothing new) may still be on its way, so a page
    read before it would be one seq short."""
    deadline = time.monotonic() + timeout
    while b.writer is not None and b.writer.running and time.monotonic() < deadline:
        time.sleep(0.02)
    assert b.writer is None or not b.writer.running, "the board's writer did not end"


def _check_finished_board(comms, b, result):
    wait_stopped(b)
    _wait_frames_out(b)  # every frame of the ended board sent: the page below is the last
    assert isinstance(b, SweepBoard)
    page = Page.of(frames_of(comms, b.widget))
    assert_matches_result(page, result)
    assert page.meta["name"] == result.name and page.top["status"] == "finished"
    assert page.top["counts"] == result.counts() and page.top["ended"] is True
    assert sorted(page.lines) == [t.id for t in result.trials if t.curve(result.metric)[0]]
    tell(b, {"kind": "stop", "trials": [result.trials[0].id]})   # nothing runs: said so
    assert said(comms, b) == "the sweep has ended: nothing to stop"
    tell(b, {"kind": "show", "trial": result.trials[-1].id})     # a stored history reads too
    shown = answers(comms, b.widget, "history")[-1]["html"]
    assert f"trial {result.trials[-1].id}</b>" in shown
    tell(b, {"kind": "hello"})                                    # a page opened later
    again = frames_of(comms, b.widget)[-1]
    assert again["kind"] == "paint" and again["seq"] == page.seq + 1
    assert Page.of([again]).table() == page.table()
    return page


def test_a_stored_sweep_has_a_board_with_the_result_s_numbers(comms, boards, tmp_path):
    result = lk.sweep(F.failing, {"x": lk.uniform(0, 1)}, trials=6, metric="loss", mode="min",
                      seed=3, store=tmp_path / "s.db", name="kept",
                      early_stop=lk.ASHA(min_steps=1, reduction=2))
    loaded = lk.load_sweep(tmp_path / "s.db", "kept")
    pages = []
    for shown in (loaded, result):
        b = board(shown)
        boards.append(b)
        pages.append(_check_finished_board(comms, b, shown))
    assert "ASHA" in pages[0].meta["rule"]
    tell(boards[0], {"kind": "add", "n": 3})                   # refused, and adds nothing
    assert "has ended" in said(comms, boards[0])
    assert len(lk.load_sweep(tmp_path / "s.db", "kept").trials) == 6


def test_a_finished_sweep_run_has_a_board(comms, boards, local_scheduler):
    run = lk.sweep(F.curve, {"q": lk.uniform(0, 1), "steps": 4}, trials=4, metric="acc",
                   mode="max", scheduler=local_scheduler, store=None, wait=False)
    result = run.result(timeout=60)
    b = board(run)
    boards.append(b)
    _check_finished_board(comms, b, result)


# -- 9. a dashboard of a finished sweep does not listen forever -------------------------------------


def _dashboard_threads() -> list:
    return [t for t in threading.enumerate() if t.name == "labkit-dashboard-bokeh"]


def test_a_dashboard_of_a_finished_sweep_whose_scheduler_shut_down_is_refused(tmp_path):
    run = lk.sweep(F.quadratic, {"x": lk.uniform(0, 1)}, trials=2, metric="loss", mode="min",
                   store=None, wait=False)                  # its own LocalScheduler, shut down
    result = run.result(timeout=60)
    before = len(_dashboard_threads())
    for source in (run, finished_run(result)):
        with pytest.raises(lk.SchedulerError) as info:
            lk.dashboard(source)
        assert "lk.board(run)" in str(info.value)
        assert running_url(source) is None
    assert len(_dashboard_threads()) == before               # nothing left listening


def test_a_dashboard_of_a_sweep_run_stops_with_stop_dashboard(local_scheduler):
    run = lk.sweep(F.quadratic, {"x": lk.uniform(0, 1)}, trials=2, metric="loss", mode="min",
                   scheduler=local_scheduler, store=None, wait=False)
    run.result(timeout=60)
    before = len(_dashboard_threads())
    url = lk.dashboard(run)
    assert url and running_url(run) == url
    assert stop_dashboard(run) is True
    assert running_url(run) is None and len(_dashboard_threads()) == before
