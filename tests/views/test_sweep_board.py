"""The sweep's live comparison board after real sweeps, seen through the messages it sends.

Real sweeps on a LocalScheduler and on a Dask LocalCluster (worker
processes); the board's messages are recorded by a comm stand-in (as a
kernel would send them) and applied as a page applies them
(:class:`tests.views.frames_page.Page`): the table and curves grow while
trials report, one message a frame; the final table holds the result's
numbers; "stop" stops a trial, "add" adds some, a failed trial's history
shows, the rows carry the parameters the page sorts by.  The dashboard's
sweep plots are checked in Chromium.
"""

from __future__ import annotations

import re
import time

import pytest

import labkit as lk
from labkit.views.notebook.board import board
from labkit.views.sweep.board import SweepBoard
from labkit.views.trackers.sweep_grid import r6
from labkit.views.sweep.widget import SweepBoardWidget
from tests.experiments import functions as F
from tests.views.frames_page import Page, answers, frames_of

pytestmark = pytest.mark.usefixtures("no_thread_leak")


def wait_stopped(b: SweepBoard, timeout: float = 20.0) -> None:
    deadline = time.time() + timeout
    while b.live and time.time() < deadline:
        time.sleep(0.02)
    assert not b.live, "the board did not stop at the end of its sweep"


def wait_until(what: str, check, timeout: float = 20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def tell(b: SweepBoard, content: dict) -> None:
    """A message from the page, delivered to the widget's comm as a kernel delivers it."""
    b.widget.comm.handle_msg({"content": {"data": {"method": "custom", "content": content}},
                              "buffers": []})


def page_of(comms, b: SweepBoard) -> Page:
    return Page.of(frames_of(comms, b.widget))


def said(comms, b: SweepBoard, since: int = 0) -> str:
    return answers(comms, b.widget, "said", since)[-1]["text"]


def assert_matches_result(page: Page, result) -> None:
    """The table holds exactly the result's numbers (to 6 digits); the best is the result's."""
    assert sorted(page.rows) == [t.id for t in result.trials]
    for t in result.trials:
        assert page.table()[t.id] == (str(t.status), r6(t.step), r6(t.value), r6(t.best)), \
            (page.rows[t.id], t)
    assert page.top["best"] == (result.best.id if result.best is not None else None)


def assert_one_message_a_frame(comms, b: SweepBoard, paints: int = 1) -> list[dict]:
    """Every draw sent exactly one message (a paint first, deltas after; ``paints`` in all)."""
    frames = frames_of(comms, b.widget)
    assert len(frames) == b.sent == len(b.frames), (len(frames), b.sent, len(b.frames))
    kinds = [f["kind"] for f in frames]
    assert kinds[0] == "paint" and kinds.count("paint") == paints, kinds[:10]
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    return frames


@pytest.fixture
def boards():
    made = []
    yield made
    for b in made:
        b.close()


def test_the_board_grows_while_trials_report_and_ends_as_the_result(comms, local_scheduler,
                                                                     boards):
    space = {"q": lk.uniform(0.5, 1.0), "lr": lk.loguniform(1e-4, 1e-1),
             "width": lk.choice([64, 128, 256]), "pause": 0.04}
    run = lk.sweep(F.curve, space, trials=4, metric="acc", mode="max", scheduler=local_scheduler,
                   seed=1, store=None, wait=False)
    b = board(run)                                    # lk.board gives a sweep its own board
    boards.append(b)
    assert isinstance(b, SweepBoard) and isinstance(b.widget, SweepBoardWidget)
    data, _ = b._repr_mimebundle_()                  # displayable as the widget
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == b.widget.model_id
    result = run.result()
    wait_stopped(b)
    frames = assert_one_message_a_frame(comms, b)
    # grew: several distinct frames, each with at least the points of the one before
    page, grown = Page(), []
    for f in frames:
        page.apply(f)
        grown.append((sum(len(p) for p in page.lines.values()),
                      sum(r["step"] or 0 for r in page.rows.values())))
    assert len(set(grown)) >= 3 and grown == sorted(grown), grown
    assert_matches_result(page, result)
    assert len(page.lines) == 4                                       # few trials: all lines
    for t in result.trials:
        steps, values = t.curve("acc")
        assert page.lines[t.id] == [[r6(s), r6(v)] for s, v in zip(steps, values, strict=True)]
    assert page.band is None
    meta = page.meta
    assert meta["params"] == ["q", "lr", "width"] and meta["metric"] == "acc"
    assert meta["kinds"] == {"q": "number", "lr": "log", "width": "category"}
    assert meta["categories"]["width"] == ["64", "128", "256"]
    for t in result.trials:
        assert page.param(t.id, "width") == str(t.config["width"])
        assert page.param(t.id, "lr") == r6(t.config["lr"])
    assert page.top["status"] == "finished" and page.top["ended"] is True
    assert page.top["counts"] == {"completed": 4} and page.top["total"] == 4
    tell(b, {"kind": "add", "n": 2})                  # nothing left to act on
    assert "the sweep has ended" in said(comms, b)


def test_stop_and_add_trials_from_the_board_on_a_dask_cluster(comms, dask_scheduler, boards):
    run = lk.sweep(F.slow_steps, {"x": lk.uniform(0, 1), "steps": 150}, trials=3,
                   metric="loss", mode="min", scheduler=dask_scheduler, seed=0, store=None,
                   wait=False)
    b = SweepBoard(run)
    boards.append(b)
    page = wait_until("a trial reporting", lambda: (lambda p: [
        t for t in p.rows if p.status(t) == "running" and (p.rows[t]["step"] or 0) >= 1] and p)(
        page_of(comms, b)))
    victim = next(t for t in page.rows if page.status(t) == "running")
    tell(b, {"kind": "stop", "trials": [victim]})     # "stop these" with the victim brushed
    assert f"trial {victim}: stop requested" == said(comms, b)
    tell(b, {"kind": "add", "n": 2})                  # "add" with 2 in the box
    assert said(comms, b) == "added trials 3–4"
    load = wait_until("the workers' load", lambda: [
        w for w in page_of(comms, b).top.get("load", []) if w["running"]])
    # named as the dashboard names them (DeviceNames): LocalCluster's workers 0 and 1
    assert all(re.fullmatch(r"worker [01]", w["name"]) for w in load), load
    result = run.result(timeout=120)
    wait_stopped(b)
    assert_one_message_a_frame(comms, b)
    stopped = next(t for t in result.trials if t.id == victim)
    assert stopped.status == "stopped" and stopped.reason == "stopped by hand"
    assert stopped.step < 149
    assert len(result.trials) == 5 and result.counts() == {"completed": 4, "stopped": 1}
    page = page_of(comms, b)
    assert_matches_result(page, result)
    assert page.status(victim) == "stopped" and len(page.lines[victim]) == stopped.step + 1
    assert page.meta["workers"] and all(re.fullmatch(r"worker [01]", w)
                                        for w in page.meta["workers"]), page.meta["workers"]


def test_a_failed_trial_shows_its_history_and_the_rows_carry_what_sorting_needs(
        comms, local_scheduler, boards):
    run = lk.sweep(F.failing, {"x": lk.uniform(0, 1)}, trials=6, metric="loss", mode="min",
                   scheduler=local_scheduler, seed=3, store=None, wait=False)
    b = SweepBoard(run)
    boards.append(b)
    result = run.result()
    wait_stopped(b)
    failed = result.by_status("failed")
    assert failed and result.by_status("completed")
    page = page_of(comms, b)
    assert page.top["counts"]["failed"] == len(failed)
    tell(b, {"kind": "show", "trial": failed[0].id})  # still answers after the end
    shown = answers(comms, b.widget, "history")[-1]
    assert shown["trial"] == failed[0].id
    assert "is too large" in shown["html"] and "ValueError" in shown["html"]
    assert "Traceback" in shown["html"] and f"trial {failed[0].id}</b> · failed" in shown["html"]
    # the page sorts by a header: each row carries every column it sorts by, exactly
    xs = {t: page.param(t, "x") for t in page.rows}
    assert xs == {t.id: r6(t.config["x"]) for t in result.trials}
    assert sorted(xs, key=xs.get) == sorted(range(6), key=lambda i: result.trials[i].config["x"])
    assert_matches_result(page, result)
    assert all(page.rows[t.id]["latest"] is None for t in failed if t.value is None)
