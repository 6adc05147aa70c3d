"""The views see a cluster whose workers come and go (issue 47): a sweep that waits for workers
says so, a trial that moved is marked, and the dashboard draws the workers over time.

Folded from real events (``SweepWaiting``, ``TrialMoved``, a record's ``moves``), then
on real worker processes: ``client.retire_workers`` under a checkpointing trial, a
cluster with no worker that then scales up, a cluster that grows and shrinks.
"""

from __future__ import annotations

import contextlib

import pytest

import labkit as lk
from labkit.events import (
    SweepStarted,
    SweepWaiting,
    TrialFinished,
    TrialMoved,
    TrialReported,
    TrialStarted,
)
from labkit.experiments import TrialRecord
from labkit.views.bokeh.sweep_plots import _status
from labkit.views.bokeh.sweep_table import SweepTable
from labkit.views.bokeh.worker_count import WorkerCount
from labkit.views.sweep.frames import FrameEncoder
from labkit.views.trackers.cluster_sampler import ClusterSampler
from labkit.views.trackers.sweep_tracker import SweepTracker
from tests.browser import chromium
from tests.conftest import ROOT
from tests.helpers import until
from tests.scheduling import elastic_functions as ef
from tests.views.sweep_page_harness import Board, served_harness

X = {"x": lk.uniform(0, 1)}
SPACE = {"x": {"type": "uniform", "lo": 0, "hi": 1}}


def _running_on(run) -> dict:
    """Running trials that reported, by worker."""
    return {r["worker"]: r["id"] for r in run.sweep.snapshot()
            if r["status"] == "running" and r["step"] is not None and r["worker"]}


def _moves(frame) -> dict:
    """Trial id -> moves, as a frame's rows say."""
    rows = frame["rows"]
    return dict(zip(rows["id"], rows["moves"], strict=True))


def _started(tracker: SweepTracker) -> None:
    rows = [{"id": i, "config": {"x": i / 10}, "status": "pending"} for i in range(3)]
    tracker(SweepStarted("r", "elastic", "loss", "min", SPACE, tuple(rows), 2))


def test_the_fold_marks_a_moved_trial_and_says_the_sweep_waits_in_its_frames():
    tracker = SweepTracker("r")
    _started(tracker)
    tracker(TrialStarted("r", 0, {"x": 0.0}, "tcp://a:1 #0"))
    tracker(TrialReported("r", 0, (0, 1), ({"loss": 0.5}, {"loss": 0.4}), 0.4, 0.4))
    frames = FrameEncoder(tracker)
    paint = frames.paint()
    assert paint["waiting"] is False and _moves(paint) == {0: 0, 1: 0, 2: 0}

    tracker(TrialMoved("r", 0, "tcp://a:1 #0", "worker retired", moves=1))
    tracker(SweepWaiting("r", "elastic", True, pending=3))
    delta = frames.delta(tracker.take())
    assert delta["waiting"] is True
    assert _moves(delta) == {0: 1}                       # the moved trial, marked
    assert delta["counts"] == {"pending": 3}             # it waits to go on: no failure
    assert tracker.trial(0).moves == 1 and tracker.waiting
    table = SweepTable()
    table.paint(["x"], tracker.trials(), None)
    assert table.source.data["moves"] == ["moved ×1", "", ""]
    assert "waiting for workers" in _status(tracker, tracker.best())

    tracker(SweepWaiting("r", "elastic", False))         # workers joined
    tracker(TrialStarted("r", 0, {"x": 0.0}, "tcp://b:2 #0", attempt=1, step=1))
    delta = frames.delta(tracker.take())
    assert delta["waiting"] is False and _moves(delta) == {0: 1}
    assert "waiting for workers" not in _status(tracker, tracker.best())

    # the record's count wins where it says more (a move told before the view began)
    record = TrialRecord(id=0, config={"x": 0.0}, status="completed", value=0.3, best=0.3,
                         step=2, attempts=3, moves=2)
    tracker(TrialFinished("r", record))
    tracker.merge({"id": 1, "config": {"x": 0.1}, "status": "running", "moves": 1})
    assert _moves(frames.delta(tracker.take())) == {0: 2, 1: 1}
    assert frames.paint()["rows"]["moves"] == [2, 1, 0]
    assert [t.moves for t in tracker.snapshot().trials] == [2, 1, 0]


def test_a_retired_worker_under_a_checkpointing_trial_marks_it_moved_on_the_board():
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        tracker = SweepTracker()
        unsubscribe = s.subscribe(tracker)
        try:
            run = lk.sweep(ef.epochs, {**X, "pause": 0.4}, trials=3, metric="loss", mode="min",
                           scheduler=s, store=None, wait=False, max_failures=0, seed=0)
            frames = FrameEncoder(tracker)
            until(lambda: len(_running_on(run)) == 2, 180, "two trials on two workers")
            leaving = sorted(_running_on(run))[0]
            moved = _running_on(run)[leaving]
            s.client.retire_workers([leaving])  # its nanny closes: the trial moves
            until(lambda: tracker.trial(moved).moves >= 1, 180, "the board to hear of the move")
            assert _moves(frames.delta(tracker.take())).get(moved, 0) >= 1
            result = run.result(timeout=300)
        finally:
            unsubscribe()
    assert result.counts() == {"completed": 3}
    paint = frames.paint()
    assert _moves(paint) == {t.id: t.moves for t in result.trials}
    assert _moves(paint)[moved] >= 1 and paint["waiting"] is False


def test_a_sweep_on_a_cluster_with_no_worker_shows_waiting_for_workers_until_one_joins():
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, lk.DaskScheduler(cluster=cluster) as s:
        tracker = SweepTracker()
        unsubscribe = s.subscribe(tracker)
        try:
            run = lk.sweep(ef.square, X, trials=2, metric="loss", mode="min", scheduler=s,
                           store=None, wait=False, seed=0)
            frames = FrameEncoder(tracker)
            until(lambda: tracker.waiting, 120, "the board to say it waits")
            assert frames.paint()["waiting"] is True
            assert "waiting for workers" in _status(tracker, tracker.best())
            cluster.scale(1)
            result = run.result(timeout=300)
            until(lambda: not tracker.waiting, 120, "the board to stop saying it waits")
        finally:
            unsubscribe()
    assert result.counts() == {"completed": 2}
    assert frames.paint()["waiting"] is False and not tracker.waiting


def test_the_dashboard_draws_the_workers_leaving_and_joining():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        sampler = ClusterSampler(client, lambda e: None)
        count = WorkerCount(sampler)
        sampler.sample()
        cluster.scale(2)
        client.wait_for_workers(2, timeout=120)
        sampler.sample()
        client.retire_workers([sorted(client.nthreads())[0]])
        until(lambda: len(client.nthreads()) == 1, 120, "a worker to leave")
        sampler.sample()
        count.update()
    assert [n for _, n in sampler.workers_over_time()] == [1, 2, 1]
    assert count.source.data["workers"] == [1, 2, 1, 1]  # held flat until now
    times = count.source.data["time"]
    assert times == sorted(times) and count.layout.name == "labkit-worker-count"


@pytest.mark.needs("chromium")
def test_the_board_page_says_it_waits_and_marks_the_moved_trial_in_chromium():
    tracker = SweepTracker("r")
    _started(tracker)
    tracker(TrialStarted("r", 0, {"x": 0.0}, "tcp://a:1 #0"))
    tracker(TrialMoved("r", 0, "tcp://a:1 #0", "worker retired", moves=1))
    tracker(SweepWaiting("r", "elastic", True, pending=3))
    frames = FrameEncoder(tracker)
    with served_harness(ROOT, "elastic-page-http") as url, chromium() as browser:
        ctx = browser.new_context(viewport={"width": 900, "height": 1000})
        try:
            board = Board(ctx.new_page())
            board.load(url)
            assert board.page.evaluate("lkTest.error || null") is None
            board.deliver({**frames.paint(), "status": "running", "ended": False, "clock": None})
            assert "waiting for workers" in board.text(".labkit-sweep-status")
            moved = board.page.evaluate(
                """() => [...document.querySelectorAll('.labkit-sweep-table tr[data-moves]')]
                     .map(tr => [+tr.dataset.trial, tr.dataset.moves,
                                 tr.querySelector('.labkit-sweep-moved').textContent])""")
            assert moved == [[0, "1", " moved ×1"]]
            tracker(SweepWaiting("r", "elastic", False))
            board.deliver({**frames.delta(tracker.take()), "status": "running", "ended": False,
                           "clock": None})
            assert "waiting for workers" not in board.text(".labkit-sweep-status")
            assert board.errors == []
        finally:
            with contextlib.suppress(Exception):
                ctx.close()
