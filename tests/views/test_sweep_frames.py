"""The sweep board's frames: what a paint and a delta carry, their size at 10,000 trials, the
lines and the band, a brush's answer, a seq gap, and the controls acting on a real live sweep.

Most tests feed a synthetic sweep's events straight into a tracker
(:mod:`tests.views.synthetic_sweep`, no cluster) and read the frames a
:class:`~labkit.views.sweep.frames.FrameEncoder` writes, sized as a kernel
serialises them; the last ones run real sweeps and talk to the board's widget
as a page would.
"""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import labkit as lk
from labkit.events import Observable, SweepStarted, TrialFinished, TrialReported, TrialStarted
from labkit.experiments import TrialRecord
from labkit.runs import start
from labkit.views.sweep.board import SweepBoard
from labkit.views.sweep.frames import LEADERS, LINES, FrameEncoder
from labkit.views.trackers.sweep_grid import r6
from labkit.views.trackers.sweep_tracker import SweepTracker
from tests.experiments import functions as F
from tests.views.frames_page import Gap, Page, answers, frames_of, size
from tests.views.synthetic_sweep import synthetic_sweep
from tests.views.test_sweep_board import (
    assert_matches_result,
    assert_one_message_a_frame,
    page_of,
    said,
    tell,
    wait_stopped,
    wait_until,
)

INF, NAN = float("inf"), float("nan")
SPACE = {"x": {"type": "uniform", "lo": 0, "hi": 1}, "act": {"type": "choice",
                                                             "values": ["relu", "tanh"]}}


def small_sweep(tracker: SweepTracker, n: int = 5) -> None:
    tracker(SweepStarted("r", "s", "acc", "max", SPACE, tuple(
        {"id": i, "config": {"x": i / 10, "act": "relu"}} for i in range(n)), 2))


def fed(n: int, every: int, stop_after: int | None = None, **frames_options):
    """A tracker fed ``n`` synthetic trials, an encoder, and its frames (a delta every
    ``every`` events; ``stop_after`` events: the sweep left mid-way)."""
    tracker = SweepTracker("r")
    frames, messages = None, []
    for i, event in enumerate(synthetic_sweep("r", n, end=stop_after is None)):
        if stop_after is not None and i >= stop_after:
            break
        tracker(event)
        if frames is None:
            frames = FrameEncoder(tracker, **frames_options)
            messages.append(frames.paint())
        elif i % every == 0:
            messages.append(frames.delta(tracker.take()))
    messages.append(frames.delta(tracker.take(), final=True))
    return tracker, frames, messages


# -- what a delta carries --------------------------------------------------------------------------


def test_a_delta_carries_only_the_changed_rows_and_the_new_points():
    tracker = SweepTracker("r")
    small_sweep(tracker)
    tracker(TrialStarted("r", 0, {}, "tcp://a:1 #0"))
    tracker(TrialReported("r", 0, (0, 1), ({"acc": 0.1}, {"acc": 0.2}), 0.2, 0.2))
    frames = FrameEncoder(tracker)
    paint = frames.paint()
    assert paint["rows"]["id"] == [0, 1, 2, 3, 4] and paint["curves"]["lines"] == {
        "0": [[0, 0.1], [1, 0.2]]}
    assert paint["meta"]["workers"] == ["tcp://a:1"] and paint["counts"] == {
        "running": 1, "pending": 4}
    tracker(TrialReported("r", 0, (2,), ({"acc": 0.3},), 0.3, 0.3))
    delta = frames.delta(tracker.take())
    assert delta["base"] == paint["seq"] and delta["seq"] == paint["seq"] + 1
    assert delta["rows"]["id"] == [0] and delta["rows"]["latest"] == [0.3]
    assert delta["rows"]["step"] == [2] and delta["rows"]["params"] == {"x": [0.0], "act": [0]}
    assert delta["curves"] == {"lines": {"0": [[2, 0.3]]}}      # the new point only
    assert "meta" not in delta and delta["best"] == 0
    quiet = frames.delta(tracker.take())                         # nothing changed
    assert "rows" not in quiet and "curves" not in quiet and "meta" not in quiet
    tracker(TrialStarted("r", 3, {}, "tcp://b:2 #1"))            # a new worker: meta again
    tracker(TrialReported("r", 3, (0,), ({"acc": 0.9},), 0.9, 0.9))
    delta = frames.delta(tracker.take())
    assert delta["rows"]["id"] == [3] and delta["rows"]["worker"] == [1]
    assert delta["meta"]["workers"] == ["tcp://a:1", "tcp://b:2"]
    assert delta["curves"] == {"lines": {"3": [[0, 0.9]]}} and delta["best"] == 3
    tracker(TrialFinished("r", TrialRecord(id=0, config={}, status="completed", value=0.3,
                                           best=0.3, step=2, worker="tcp://a:1 #0")))
    delta = frames.delta(tracker.take())
    assert delta["rows"]["id"] == [0] and "curves" not in delta
    assert delta["counts"] == {"running": 1, "pending": 3, "completed": 1}


def test_a_restart_that_takes_back_points_is_answered_by_a_paint():
    tracker = SweepTracker("r")
    small_sweep(tracker)
    tracker(TrialStarted("r", 1, {}, "w #0"))
    tracker(TrialReported("r", 1, (0, 1, 2), ({"acc": 0.1}, {"acc": 0.2}, {"acc": 0.3}), 0.3,
                          0.3))
    frames = FrameEncoder(tracker)
    page = Page.of([frames.paint()])
    tracker(TrialStarted("r", 1, {}, "w #1", attempt=1, step=1))  # from its checkpoint
    tracker(TrialReported("r", 1, (2,), ({"acc": 0.25},), 0.25, 0.25))
    again = frames.delta(tracker.take())
    assert again["kind"] == "paint"                                 # not an append of step 2
    page.apply(again)
    assert page.lines[1] == [[0, 0.1], [1, 0.2], [2, 0.25]]


def test_a_delta_that_gives_way_to_a_paint_loses_none_of_its_changes():
    tracker = SweepTracker("r", leaders=1)
    frames = FrameEncoder(tracker, lines=1)
    assert frames.paint()["total"] == 0                           # a board before its sweep
    small_sweep(tracker, 3)
    for i in range(3):
        tracker(TrialStarted("r", i, {}, "w #0"))
        tracker(TrialReported("r", i, (0, 1), ({"acc": i / 10}, {"acc": i / 5}), i / 5, i / 5))
        tracker(TrialFinished("r", TrialRecord(id=i, config={}, status="completed",
                                               value=i / 5, best=i / 5, step=1)))
    frame = frames.delta(tracker.take())                          # the sweep's words: a paint
    assert frame["kind"] == "paint" and frame["total"] == 3
    assert list(frame["curves"]["lines"]) == ["2"]                # the best one
    band = frame["curves"]["band"]
    assert band["n"] == 2 and band["q50"] == [0.05, 0.1]          # trials 0 and 1, both steps
    tracker(SweepStarted("r", "s", "acc", "min", SPACE, (), 2, "ASHA"))  # resumed, new words
    frame = frames.delta(tracker.take())
    assert frame["kind"] == "paint" and frame["meta"]["rule"] == "ASHA"
    assert frame["meta"]["mode"] == "min" and list(frame["curves"]["lines"]) == ["0"]


def test_non_finite_values_become_null():
    tracker = SweepTracker("r")
    small_sweep(tracker)
    frames = FrameEncoder(tracker)
    frames.paint()
    tracker(TrialStarted("r", 2, {}, "w #0"))
    tracker(TrialReported("r", 2, (0, 1, 2, NAN), ({"acc": INF}, {"acc": NAN}, {"acc": -INF},
                                                   {"acc": 1e-7}), NAN, INF))
    delta = frames.delta(tracker.take())
    json.dumps(delta, allow_nan=False)
    assert size(delta) > 0                                        # a kernel sends it as is
    assert delta["rows"]["latest"] == [None] and delta["rows"]["best"] == [None]
    assert delta["rows"]["step"] == [None]
    assert delta["curves"]["lines"]["2"] == [[0, None], [1, None], [2, None], [None, 1e-7]]
    assert delta["best"] == 2                     # its best, inf, ranks (as the result ranks it)


# -- the whole sweep, frame by frame -------------------------------------------------------------


@pytest.mark.parametrize("n", [1000, 10_000])
def test_frames_at_scale_stay_small_and_add_up_to_a_fresh_paint(n):
    tracker, frames, messages = fed(n, every=500)
    deltas = [size(m) for m in messages[1:]]
    assert all(m["kind"] == "delta" for m in messages[1:])
    assert max(deltas) <= 100_000, max(deltas)                    # after the first paint
    page = Page.of(messages)                                      # as a page applies them
    fresh = frames.paint()                                        # the board of the stored sweep
    assert size(fresh) <= 1_000_000, size(fresh)
    assert size(messages[0]) <= 1_000_000
    again = Page.of([fresh])
    assert page.rows == again.rows and page.lines == again.lines and page.band == again.band
    snap = tracker.snapshot()                                     # one of 10,000 rows: once
    assert page.top["counts"] == again.top["counts"] == snap.counts
    assert page.top["best"] == snap.best.id and page.top["total"] == n
    assert len(page.rows) == n and len(page.lines) == LEADERS     # all ended: the best 10
    assert page.band["n"] == n - LEADERS


def test_lines_are_the_running_and_the_best_and_the_band_holds_the_others():
    tracker, frames, messages = fed(1000, every=300, stop_after=6000)
    page = Page.of(messages)
    snap = tracker.snapshot()
    running = {t.id for t in snap.trials if t.status == "running"}
    ranked = sorted((t for t in snap.trials if t.status in ("completed", "stopped")),
                    key=lambda t: (-t.value, t.id))
    drawn = running | {t.id for t in ranked[:LEADERS]}
    assert running and len(ranked) > LEADERS and set(page.lines) == drawn
    for t in snap.trials:
        if t.id in drawn:
            assert page.lines[t.id] == [[r6(s), r6(v)] for s, v in t.curve]
    others = [t for t in snap.trials if t.id not in drawn and t.curve]
    band = page.band
    assert band["n"] == len(others)
    for i, step in enumerate(band["steps"]):
        values = [v for t in others for s, v in t.curve if s == step]
        for name, q in (("q10", 0.1), ("q25", 0.25), ("q50", 0.5), ("q75", 0.75), ("q90", 0.9)):
            assert band[name][i] == pytest.approx(np.quantile([r6(v) for v in values], q),
                                                  rel=1e-5), (name, step)


def test_the_band_is_recomputed_when_its_trials_change_and_at_most_every_two_seconds():
    now = [0.0]
    tracker = SweepTracker("r")
    events = synthetic_sweep("r", LINES + 50, slots=2, end=False)
    tracker(next(events))
    frames = FrameEncoder(tracker, clock=lambda: now[0])
    frames.paint()

    def until(kind):  # feed events up to the next one of this kind
        for event in events:
            tracker(event)
            if isinstance(event, kind):
                return event

    for _ in range(LEADERS + 5):                                  # trials leave the lines...
        until(TrialFinished)
    now[0] = 0.5
    assert "band" not in frames.delta(tracker.take()).get("curves", {})   # not yet: 0.5 s
    now[0] = 2.5
    band = frames.delta(tracker.take())["curves"]["band"]         # 2 s on: the new band
    assert band["n"] == 5
    until(TrialReported)                                          # a line grows, no band moves
    now[0] = 10.0
    assert "band" not in frames.delta(tracker.take()).get("curves", {})


# -- a brush -----------------------------------------------------------------------------------


def _brushed(snap, width_index: int, lo: float, hi: float) -> set[int]:
    labels = ["64", "128", "256"]
    return {t.id for t in snap.trials if labels.index(str(t.config["width"])) == width_index
            and t.value is not None and lo <= t.value <= hi}


def test_a_brush_answers_with_the_brushed_trials_only():
    tracker, frames, messages = fed(2000, every=1000)
    snap = tracker.snapshot()
    narrow = frames.brush({"width": [0, 0], "value": [0.8, 0.9]})
    expected = _brushed(snap, 0, 0.8, 0.9)
    assert 0 < len(expected) <= LINES
    assert {int(t) for t in narrow["lines"]} == expected and narrow["band"] is None
    broad = frames.brush({"width": [1, 1]})
    expected = _brushed(snap, 1, -INF, INF)
    assert len(expected) > LINES
    drawn = {int(t) for t in broad["lines"]}
    best = sorted((t for t in snap.trials if t.id in expected), key=lambda t: (-t.value, t.id))
    assert drawn == {t.id for t in best[:LEADERS]}                # all ended: the best 10
    assert broad["band"]["n"] == len(expected) - LEADERS
    unbrushed, page = frames.brush({}), Page.of(messages)         # back to the frames' curves
    assert {int(t): p for t, p in unbrushed["lines"].items()} == page.lines
    assert unbrushed["band"] == page.band
    with pytest.raises(lk.InputError, match="no such axis"):
        frames.brush({"depth": [0, 1]})


# -- the board and its widget ----------------------------------------------------------------


@pytest.mark.usefixtures("no_thread_leak")
def test_a_board_of_10000_trials_sends_one_small_message_a_frame(comms):
    """A run that emits a synthetic 10,000-trial sweep, 1/60 of it between two frames
    (each 1/60 in, its frame drawn at once, as a control's poke draws, and waited on):
    each frame one message, each delta under 100 KB."""
    board_made, chunk = threading.Event(), []

    def job(scope):
        board_made.wait(30)
        events = list(synthetic_sweep(scope.id, 10_000, end=False))
        every = len(events) // 60
        for i, event in enumerate(events):
            scope.emit(event)
            if i % every == every - 1:                            # a frame's worth: drawn
                drawn = chunk[0].sent
                # now, not after the pacing's wait (0.5 s a frame, 30 s a test): the frame
                # holds this 1/60 whatever the pace
                chunk[0].writer.poke(force=True)
                wait_until("the board's next frame", lambda d=drawn: chunk[0].sent > d, 30)

    run = start("sweep", [Observable()], job, wait=False, detail={"name": "synthetic"})
    b = SweepBoard(run, max_rate=20)
    chunk.append(b)
    board_made.set()
    try:
        run.result(timeout=300)
        wait_stopped(b)
        # the board came before the sweep's start: a paint of nothing, then of the sweep
        frames = assert_one_message_a_frame(comms, b, paints=2)
    finally:
        b.close()
    assert [f["total"] for f in frames if f["kind"] == "paint"] == [0, 10_000]
    paints = [size(f) for f in frames if f["kind"] == "paint"]
    deltas = [size(f) for f in frames if f["kind"] == "delta"]
    assert len(deltas) >= 60 and max(paints) <= 1_000_000 and max(deltas) <= 100_000, (
        len(deltas), paints, max(deltas))
    page = Page.of(frames)
    assert page.top["total"] == 10_000 and page.top["ended"] and page.band["n"] == 10_000 - LEADERS


# -- the board and its widget on real sweeps ------------------------------------------------------


@pytest.fixture
def board_of():
    made = []

    def make(run):
        made.append(SweepBoard(run))
        return made[-1]
    yield make
    for b in made:
        b.close()


@pytest.mark.usefixtures("no_thread_leak")
def test_a_page_that_misses_a_frame_says_hello_and_is_painted_again(comms, local_scheduler,
                                                                     board_of):
    run = lk.sweep(F.curve, {"q": lk.uniform(0.5, 1), "pause": 0.05}, trials=3, metric="acc",
                   mode="max", scheduler=local_scheduler, seed=2, store=None, wait=False)
    b = board_of(run)
    frames = wait_until("three frames", lambda: len(frames_of(comms, b.widget)) >= 3 and
                        frames_of(comms, b.widget))
    page = Page.of(frames[:1])
    with pytest.raises(Gap):                                      # frame 2 was lost
        page.apply(frames[2])
    seen = len(comms)
    tell(b, {"kind": "hello"})
    answer = next(m for m in comms.customs(b.widget, seen) if m["kind"] == "paint")
    assert answer["seq"] > frames[2]["seq"]                       # answered before it returned
    page.apply(answer)
    result = run.result(timeout=60)
    wait_stopped(b)
    for f in frames_of(comms, b.widget):
        if f["seq"] > answer["seq"]:
            page.apply(f)                                         # no gap after the paint
    assert_matches_result(page, result)
    assert page.top["status"] == "finished"


@pytest.mark.usefixtures("no_thread_leak")
def test_stop_cancel_add_show_and_brush_act_on_a_real_live_sweep(comms, local_scheduler,
                                                                 board_of):
    run = lk.sweep(F.slow_steps, {"x": lk.uniform(0, 1), "steps": 400}, trials=4,
                   metric="loss", mode="min", scheduler=local_scheduler, seed=1, store=None,
                   wait=False)
    b = board_of(run)
    page = wait_until("a trial reporting", lambda: (lambda p: any(
        p.status(t) == "running" and (p.rows[t]["step"] or 0) >= 1 for t in p.rows) and p)(
        page_of(comms, b)))
    victim = next(t for t in page.rows if page.status(t) == "running")
    tell(b, {"kind": "stop", "trials": [victim]})
    assert said(comms, b) == f"trial {victim}: stop requested"
    wait_until("the victim stopped on the page", lambda: page_of(comms, b).status(victim)
               == "stopped")
    tell(b, {"kind": "add", "n": 2})
    assert said(comms, b) == "added trials 4–5"
    wait_until("six trials on the page", lambda: page_of(comms, b).top["total"] == 6)
    tell(b, {"kind": "show", "trial": victim})
    shown = answers(comms, b.widget, "history")[-1]
    assert shown["trial"] == victim and "stopped by hand" in shown["html"]
    tell(b, {"kind": "brush", "brush": 7, "ranges": {"x": [0, 1]}})
    curves = answers(comms, b.widget, "curves")[-1]
    assert curves["brush"] == 7 and victim in {int(t) for t in curves["lines"]}
    for bad, words in [({"kind": "add", "n": 0}, "from 1 to"), ({"kind": "nope"}, "does not know"),
                       ({"kind": "stop", "trials": "all"}, "trial ids"),
                       ({"kind": "brush", "ranges": {"y": [0, 1]}}, "no such axis")]:
        tell(b, bad)
        assert words in said(comms, b), bad
    tell(b, {"kind": "cancel"})
    assert said(comms, b) == "cancelling the sweep"
    with pytest.raises(lk.CancelledError):
        run.result(timeout=60)
    wait_stopped(b)
    assert_one_message_a_frame(comms, b)
    page = page_of(comms, b)
    assert page.top["status"] == "cancelled" and page.top["ended"] is True
    assert page.status(victim) == "stopped" and page.top["total"] == 6


def test_a_group_trial_loads_each_worker_of_its_group():
    """A trial on a group (``workers_per_trial=2``) is running, reporting and done on each."""
    tracker = SweepTracker("r")
    small_sweep(tracker, 2)
    tracker(TrialStarted("r", 0, {}, "tcp://a:1, tcp://b:2"))
    tracker(TrialStarted("r", 1, {}, "tcp://c:3, tcp://d:4"))
    tracker(TrialReported("r", 0, (0, 1), ({"acc": 0.1}, {"acc": 0.2}), 0.2, 0.2))
    loads = {w.name: w for w in tracker.snapshot().workers}
    assert sorted(loads) == ["tcp://a:1", "tcp://b:2", "tcp://c:3", "tcp://d:4"]
    assert {w.running for w in loads.values()} == {1}
    assert loads["tcp://a:1"].reports_per_s == loads["tcp://b:2"].reports_per_s > 0
    assert loads["tcp://c:3"].reports_per_s == 0
    tracker(TrialFinished("r", TrialRecord(id=0, config={}, status="completed", step=1,
                                           value=0.2, best=0.2, worker="tcp://a:1, tcp://b:2")))
    loads = {w.name: w for w in tracker.snapshot().workers}
    assert (loads["tcp://a:1"].done, loads["tcp://a:1"].running) == (1, 0)
    assert (loads["tcp://b:2"].done, loads["tcp://c:3"].done) == (1, 0)
    assert loads["tcp://c:3"].running == 1
