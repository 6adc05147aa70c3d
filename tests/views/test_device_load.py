"""Device load during a fit: each replica is busy for its time in step (issue 38).

The board follows the trainer, the dashboard the scheduler: both must show the
workers (or thread replicas) that train as busy, with their samples per second.
"""

from __future__ import annotations

import time

import dask.array as da
import numpy as np
import pytest
import torch

import labkit as lk
from labkit.data_parallel.reporting import Reporter
from labkit.data_parallel.reports import StepReport
from labkit.events import Observable
from labkit.views.trackers.tracker import Tracker


def test_a_replica_is_busy_for_its_whole_step_not_only_its_forward_and_backward():
    """Steps of 10 ms whose forward and backward took 1 ms: busy is the step, not 10%."""
    bus, tracker = Observable(), Tracker(window=1.0)
    bus.subscribe(tracker, state_every=0.0)
    reporter = Reporter(bus, ["tcp://w0", "tcp://w1"], [None, None], "MLP")
    now = time.time()
    for k in range(100):
        end = now - 1.0 + 0.01 * (k + 1)
        reporter.report(StepReport(0, k, 0.5, (50, 50), (0.001, 0.001), 0.01, end),
                        [0.5, 0.5])
    devices = {d.name: d for d in tracker.snapshot(now=now).devices}
    assert set(devices) == {"tcp://w0", "tcp://w1"}
    for d in devices.values():
        assert d.busy == pytest.approx(1.0, abs=0.02)
        assert d.samples_per_s == pytest.approx(5000, rel=0.02)   # 50 rows every 10 ms
        assert d.step_time == pytest.approx(0.01)


def test_a_fit_run_sees_each_event_once_and_its_scheduler_sees_them_too():
    """The trainer hands its events to its scheduler's views; a run follows the trainer."""
    from labkit.events import TaskFinished
    x, y = torch.randn(64, 6), torch.randn(64, 3)
    with lk.DaskScheduler(n_workers=1, threads_per_worker=2) as s:
        model = torch.nn.Linear(6, 3)
        with lk.DataParallelTrainer(model, torch.nn.functional.mse_loss,
                                    torch.optim.SGD(model.parameters(), lr=0.01),
                                    scheduler=s) as t:
            dashboard = []
            s.subscribe(dashboard.append)       # only the scheduler is watched
            run = t.fit([(x[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)], wait=False)
            followed = []
            run.subscribe(followed.append)      # replays the run's events so far, then live
            run.result(timeout=60)
    steps = [e for e in followed if isinstance(e, TaskFinished)]
    assert len(steps) == 4 * 2                          # 4 steps on 2 replicas, once each
    assert len({id(e) for e in steps}) == len(steps)
    seen = [e for e in dashboard if isinstance(e, TaskFinished)]
    assert [(e.worker, e.start) for e in seen] == [(e.worker, e.start) for e in steps]
    names = [type(e).__name__ for e in dashboard]
    assert names.count("RunStarted") == 1 and names.count("RunFinished") == 1


def _fit_watched(scheduler, rows=40_000, batch_size=100):
    """Fit on ``scheduler`` with a board and a dashboard tracker; the busiest frames seen."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    # made on the cluster, not sent from here
    X = da.random.RandomState(0).random_sample((rows, 64), chunks=(rows // 4, 64))
    X = X.astype(np.float32)
    Y = da.random.RandomState(1).randint(0, 10, rows, chunks=rows // 4)
    board, dashboard = Tracker(window=1.0), Tracker(window=1.0)
    best: dict = {}
    with lk.DataParallelTrainer(model, torch.nn.functional.cross_entropy,
                                torch.optim.SGD(model.parameters(), lr=0.01),
                                scheduler=scheduler) as t:
        t.subscribe(board, state_every=0.2)
        scheduler.subscribe(dashboard, state_every=0.2)
        run = t.fit((X, Y), batch_size=batch_size, epochs=3, wait=False)
        deadline = time.monotonic() + 120
        while not run.done() and time.monotonic() < deadline:
            for name, tracker in (("board", board), ("dashboard", dashboard)):
                for d in tracker.snapshot().devices:
                    seen = best.setdefault((name, d.name), (0.0, 0.0))
                    best[(name, d.name)] = (max(seen[0], d.busy), max(seen[1], d.samples_per_s))
            time.sleep(0.05)
        history = run.result(timeout=60)
        names = list(t.names)
    return names, history, best, board.snapshot(), dashboard.snapshot()


def _check(names, history, best, after_board, after_dashboard):
    assert sum(h["steps"] for h in history) == 3 * 400
    for view in ("board", "dashboard"):
        for name in names:   # every rank was seen busy while it trained
            busy, rate = best[(view, name)]
            assert busy > 0.5, (view, name, busy)
            assert rate > 0, (view, name, rate)
    for snap in (after_board, after_dashboard):
        trained = {d.name: d for d in snap.devices}
        assert all(trained[n].done > 0 for n in names)   # its steps were counted
        assert all(trained[n].busy == 0 for n in names)  # and the fit is over


def test_ranks_on_worker_processes_show_their_load_during_a_fit():
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        _check(*_fit_watched(s))


def test_thread_replicas_of_the_default_cluster_show_their_load_during_a_fit():
    with lk.DaskScheduler(n_workers=1, threads_per_worker=2) as s:
        result = _fit_watched(s)
        assert result[0] == ["cpu:0", "cpu:1"]
        _check(*result)


def test_the_scheduler_board_counts_a_sweeps_running_trials_as_its_workers_tasks(comms):
    """lk.board(s) while two trials run: two tasks running on the worker, done ones counted."""
    import threading

    release = threading.Event()

    def held(config, trial):
        release.wait(60)                    # running until the test has looked
        trial.report(1, acc=config["x"])
        return {"acc": config["x"]}

    with lk.DaskScheduler(mode="auto", n_workers=1, threads_per_worker=2) as s:
        board = lk.board(s)
        started = threading.Semaphore(0)
        s.subscribe(lambda e: started.release() if type(e).__name__ == "TrialStarted" else None)
        run = lk.sweep(held, {"x": lk.uniform(0, 1)}, trials=4, metric="acc", mode="max",
                       scheduler=s, store=None, wait=False)
        try:
            assert started.acquire(timeout=60) and started.acquire(timeout=60)
            running = [d for d in board.tracker.snapshot().devices if d.running]
            assert [d.running for d in running] == [2], board.tracker.snapshot().devices
        finally:
            release.set()
        run.result()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            devices = board.tracker.snapshot().devices
            if sum(d.done for d in devices) == 4 and not any(d.running for d in devices):
                break
            time.sleep(0.05)
        devices = board.tracker.snapshot().devices
        assert sum(d.done for d in devices) == 4 and not any(d.running for d in devices)
        board.close()
