"""Events folded off the engine's threads (issue 44, views at 100 trials).

A view's subscription runs in the thread that emits each event; with many trials
at once, folding there made the trial threads queue on the trackers' locks.  The
board and the dashboard now only queue an event there (:class:`FoldQueue`); their
readers (the board's writer, a dashboard session's tick) fold what waits, in order.
These tests hold that nothing is lost or reordered, that the engine's threads fold
nothing while a reader keeps up, and that nothing waits long with no reader.
"""

from __future__ import annotations

import threading
import time

import pytest

import labkit as lk
from labkit.views.bokeh.dashboard import _Fold
from labkit.views.fold_queue import FoldQueue
from labkit.views.sweep.board import SweepBoard
from labkit.views.trackers.sweep_shelf import SweepShelf
from labkit.views.trackers.tracker import Tracker
from tests.views.frames_page import Page, frames_of
from tests.views.test_sweep_board import assert_matches_result, wait_stopped


def reports(config, trial):
    """``steps`` reports of a loss, ``pause`` seconds apart."""
    for step in range(config["steps"]):
        time.sleep(config["pause"])
        trial.report(step, loss=config["x"] / (step + 1))


class Folded:
    """A fold that records each event and the thread that folded it."""

    def __init__(self):
        self.events: list = []
        self.threads: set[str] = set()

    def __call__(self, event) -> None:
        self.events.append(event)
        self.threads.add(threading.current_thread().name)


def test_events_from_many_threads_are_folded_by_the_reader_in_order_none_lost():
    folded = Folded()
    queue = FoldQueue(folded, every=3600, most=10**9)
    go = threading.Event()

    def emit(k: int) -> None:
        go.wait()
        for i in range(300):
            queue((k, i))

    threads = [threading.Thread(target=emit, args=(k,), name=f"emitter-{k}") for k in range(50)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join()
    assert folded.events == [] and queue.waiting == 50 * 300   # the emitters folded nothing
    queue.drain()
    assert folded.threads == {threading.current_thread().name}
    assert len(folded.events) == 50 * 300 and queue.waiting == 0
    for k in range(50):                                         # each thread's events in order
        assert [i for j, i in folded.events if j == k] == list(range(300))
    assert queue.received == 50 * 300 and queue.batches == 1


def test_with_no_reader_an_event_waits_at_most_every_seconds_or_most_events():
    folded = Folded()
    queue = FoldQueue(folded, every=0.05, most=10**9)
    queue("a")
    assert folded.events == []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not folded.events:
        time.sleep(0.06)
        queue("b")                                              # an event past the deadline
    assert folded.events[:2] == ["a", "b"]
    crowded = Folded()
    queue = FoldQueue(crowded, every=3600, most=10)
    for i in range(25):
        queue(i)
    assert crowded.events == list(range(20)) and queue.waiting == 5


def test_a_fold_that_fails_loses_nothing_after_it(caplog):
    seen = []

    def fold(event):
        if event == 2:
            raise ValueError("bad event")
        seen.append(event)

    queue = FoldQueue(fold, every=3600)
    for i in range(5):
        queue(i)
    queue.drain()
    assert seen == [0, 1, 3, 4] and "could not fold" in caplog.text


@pytest.mark.usefixtures("no_thread_leak")
def test_the_boards_writer_folds_every_event_and_the_last_frame_holds_them_all(comms,
                                                                              local_scheduler):
    run = lk.sweep(reports, {"x": lk.uniform(0, 1), "steps": 8, "pause": 0.01}, trials=24,
                   metric="loss", mode="min", scheduler=local_scheduler, seed=5, store=None,
                   wait=False)
    b = SweepBoard(run)
    try:
        b.tracker.queue.every = 3600                            # only the board's readers fold
        folded = Folded()
        fold = b.tracker.queue.fold
        b.tracker.queue.fold = lambda e: (folded(e), fold(e))
        result = run.result(timeout=120)
        wait_stopped(b)
        assert b.tracker.queue.waiting == 0
        assert folded.events and all(
            n.startswith("labkit-writer") or n == threading.current_thread().name
            for n in folded.threads), folded.threads           # never a trial's thread
        frames = frames_of(comms, b.widget)
        page = Page.of(frames)
        assert_matches_result(page, result)                     # the last frame: every trial
        for t in result.trials:                                 # and every report's point
            assert [s for s, _ in page.lines[t.id]] == list(range(8)), (t.id, page.lines[t.id])
    finally:
        b.close()


def test_the_dashboards_fold_waits_for_its_reader_and_the_reader_sees_every_trial():
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=8) as s:
        tracker = Tracker()
        fold = _Fold(tracker, SweepShelf(s, sink=tracker), every=3600)
        folded = Folded()
        inner = fold.queue.fold
        fold.queue.fold = lambda e: (folded(e), inner(e))
        unsubscribe = s.subscribe(fold)
        try:
            result = lk.sweep(reports, {"x": lk.uniform(0, 1), "steps": 5, "pause": 0.005},
                              trials=16, metric="loss", mode="min", scheduler=s, seed=6,
                              store=None)
        finally:
            unsubscribe()
        assert folded.events == [] and fold.queue.waiting > 16 * 5   # the trials folded nothing
        fold.refresh()                                          # a session about to draw
        [sweep] = fold.feeds()
        assert folded.threads == {threading.current_thread().name}
        assert sweep.counts() == {"completed": 16}
        assert {t.id: len(t.curve) for t in sweep.trials()} == {t.id: 5 for t in result.trials}
        assert fold.snapshot().version == tracker.version
