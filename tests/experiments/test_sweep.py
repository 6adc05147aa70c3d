"""Sweeps on real clusters: every trial runs, the best is found, early stopping, events, controls."""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time

import pytest

import labkit as lk
from labkit.events import SweepStarted, TrialFinished, TrialReported, TrialStarted
from labkit.experiments.store.database import Store
from tests.experiments import functions as f
from tests.helpers import until

X = {"x": lk.uniform(0, 1)}


def plain(record):
    """What a record says, without the times."""
    return (record.id, record.config, record.status, record.metrics,
            [(s, m) for s, m, _ in record.history])


def test_a_sweep_on_worker_processes_runs_every_trial_and_finds_the_best(dask_scheduler,
                                                                        tmp_path):
    store = tmp_path / "sweeps.db"
    result = lk.sweep(f.quadratic, X, trials=8, metric="loss", mode="min",
                      scheduler=dask_scheduler, seed=0, store=store, name="quad")
    assert [t.status for t in result.trials] == ["completed"] * 8
    best = result.best
    assert best.value == min(t.value for t in result.trials)
    assert best.config == min((t.config for t in result.trials), key=lambda c: abs(c["x"] - 0.3))
    assert all(len(t.history) == 5 and t.worker.startswith("tcp://") for t in result.trials)
    assert best.metrics == {"loss": pytest.approx((best.config["x"] - 0.3) ** 2)}
    back = lk.load_sweep(store, "quad")
    assert [plain(t) for t in back.trials] == [plain(t) for t in result.trials]
    assert back.best.id == best.id and back.seed == 0
    rows = result.table(sort=True)
    assert rows[0]["trial"] == best.id and set(rows[0]) >= {"x", "loss", "status", "attempts"}
    assert "quad" in repr(result) and "8 completed" in repr(result)


def test_the_same_seed_gives_the_same_configurations(tmp_path):
    space = {"lr": lk.loguniform(1e-4, 1e-1), "width": lk.choice([64, 128, 256]),
             "layers": lk.randint(1, 4)}
    runs = [lk.sweep(f.returns_number, {**space, "x": 1.0}, trials=6, metric="v", mode="max",
                     seed=seed, store=None) for seed in (3, 3, 4)]
    configs = [[t.config for t in r.trials] for r in runs]
    assert configs[0] == configs[1] != configs[2]


def test_a_grid_and_a_list_run_every_point(threads_scheduler):
    grid = lk.sweep(f.quadratic, lk.grid(x=[0.1, 0.3, 0.5], unused=["a", "b"]),
                    metric="loss", mode="min", scheduler=threads_scheduler, store=None)
    assert sorted((t.config["x"], t.config["unused"]) for t in grid.trials) == [
        (x, u) for x in (0.1, 0.3, 0.5) for u in ("a", "b")]
    assert grid.best.config["x"] == 0.3
    listed = lk.sweep(f.quadratic, [{"x": 0.9}, {"x": 0.2}], metric="loss", mode="min",
                      store=None)
    assert [t.config for t in listed.trials] == [{"x": 0.9}, {"x": 0.2}]


def test_asha_stops_poor_trials_early_without_losing_the_best(threads_scheduler):
    space = {"q": lk.uniform(0.1, 1.0), "steps": 27, "pause": 0.005}
    full = lk.sweep(f.curve, space, trials=18, metric="acc", mode="max", seed=1,
                    scheduler=threads_scheduler, store=None)
    early = lk.sweep(f.curve, space, trials=18, metric="acc", mode="max", seed=1,
                     scheduler=threads_scheduler, store=None,
                     early_stop=lk.ASHA(min_steps=1, reduction=3))
    stopped = early.by_status("stopped")
    assert len(stopped) >= 6 and all("ASHA" in t.reason for t in stopped)
    assert all(len(t.history) < 27 for t in stopped)
    assert early.best.config == full.best.config
    assert sum(len(t.history) for t in early.trials) < 0.6 * sum(len(t.history)
                                                               for t in full.trials)


def test_mode_min_and_max_pick_opposite_ends():
    space = [{"x": 0.1}, {"x": 0.9}, {"x": 0.5}]
    low = lk.sweep(f.returns_number, space, metric="x2", mode="min", store=None)
    high = lk.sweep(f.returns_number, space, metric="x2", mode="max", store=None)
    assert (low.best.config["x"], high.best.config["x"]) == (0.1, 0.9)
    assert low.best.metrics == {"x2": 0.2}   # a number returned is the metric's value


def test_a_rule_of_your_own_decides_from_the_history():
    class AfterTwo(lk.experiments.Rule):
        def decide(self, trial, step, value, history):
            if step >= 2 and history.score(value) < history.score(0.45):
                return f"below 0.45 at step {step}"
    space = [{"q": 0.3, "steps": 6}, {"q": 0.9, "steps": 6}]
    result = lk.sweep(f.curve, space, metric="acc", mode="max", early_stop=AfterTwo(),
                      store=None)
    assert [t.status for t in result.trials] == ["stopped", "completed"]
    assert result.trials[0].reason == "below 0.45 at step 2"
    assert [s for s, _, _ in result.trials[0].history] == [0, 1, 2]   # stopped at once here


def test_events_tell_views_everything_a_board_draws(threads_scheduler, recorder):
    run = lk.sweep(f.quadratic, X, trials=6, metric="loss", mode="min",
                   scheduler=threads_scheduler, store=None, wait=False)
    run.subscribe(recorder)   # replays what came before
    result = asyncio.run(_awaited(run))
    started = recorder.of(SweepStarted)
    assert len(started) == 1 and started[0].space == {"x": {"type": "uniform", "lo": 0.0,
                                                            "hi": 1.0}}
    assert started[0].metric == "loss" and started[0].mode == "min" and started[0].slots == 2
    assert [row["status"] for row in started[0].trials] == ["pending"] * 6
    assert sorted(e.trial for e in recorder.of(TrialStarted)) == list(range(6))
    reported = recorder.of(TrialReported)
    assert sum(len(e.steps) for e in reported) == 30
    assert all(e.value is not None and e.best <= e.value for e in reported)
    finished = {e.trial: e for e in recorder.of(TrialFinished)}
    assert {e.status for e in finished.values()} == {"completed"}
    assert finished[result.best.id].value == result.best.value
    assert run.sweep.snapshot(history=True)[0]["history"][0][0] == 0


async def _awaited(run):
    return await run


def test_a_trial_stopped_by_hand_and_trials_added_to_a_running_sweep(threads_scheduler, tmp_path):
    run = lk.sweep(f.slow_steps, {"steps": 60, "x": lk.uniform(0, 1)}, trials=2,
                   metric="loss", mode="min", scheduler=threads_scheduler,
                   store=tmp_path / "s.db", name="live", wait=False)
    until(lambda: any(r["step"] is not None and r["step"] >= 3
                      for r in run.sweep.snapshot() if r["id"] == 0))
    assert run.sweep.stop(0) is True
    assert run.sweep.add(2) == [2, 3]
    result = run.result(timeout=60)
    assert result.trials[0].status == "stopped" and result.trials[0].reason == "stopped by hand"
    assert [t.status for t in result.trials[1:]] == ["completed"] * 3
    assert lk.load_sweep(tmp_path / "s.db", "live").counts() == {"completed": 3, "stopped": 1}


@pytest.mark.parametrize("where", ["processes", "threads"])
def test_a_cancel_stops_every_trial_and_leaves_the_store_consistent(where, dask_scheduler,
                                                                    threads_scheduler, tmp_path):
    scheduler = dask_scheduler if where == "processes" else threads_scheduler
    run = lk.sweep(f.slow_steps, {"x": lk.uniform(0, 1)}, trials=6, metric="loss", mode="min",
                   scheduler=scheduler, store=tmp_path / "s.db", name="c", wait=False)
    until(lambda: sum(r["status"] == "running" for r in run.sweep.snapshot()) == 2)
    began = time.monotonic()
    run.cancel()
    with pytest.raises(lk.CancelledError):
        run.result(timeout=30)
    assert time.monotonic() - began < 5
    statuses = [t["status"] for t in Store(tmp_path / "s.db", readonly=True).trials("c")]
    assert "running" not in statuses and statuses[:2] == ["cancelled", "cancelled"]
    assert set(statuses) <= {"cancelled", "pending"}
    assert scheduler.total_open_tasks == 0


def test_gil_holding_trials_run_in_processes_beside_an_in_process_cluster(threads_scheduler):
    fn = lk.FunctionCallable(f.torch_state, holds_gil=True)
    result = lk.sweep(fn, {"steps": 3}, trials=2, metric="w", mode="max",
                      scheduler=threads_scheduler, store=None)
    assert [t.status for t in result.trials] == ["completed"] * 2
    assert all("(process" in t.worker for t in result.trials)
    pids = {int(t.worker.rsplit(" ", 1)[-1].rstrip(")")) for t in result.trials}
    assert os.getpid() not in pids


def test_trials_on_threads_of_an_in_process_cluster_report_directly(threads_scheduler):
    result = lk.sweep(f.quadratic, X, trials=10, metric="loss", mode="min",
                      scheduler=threads_scheduler, store=None, seed=2)
    assert result.counts() == {"completed": 10}
    assert {t.worker.split(" #")[0] for t in result.trials} == set(
        threads_scheduler.client.nthreads())


@pytest.mark.parametrize("limit", [dict(max_concurrent=1), dict(workers_per_trial=2)])
def test_trials_at_once_are_bounded_by_max_concurrent_and_workers_per_trial(threads_scheduler,
                                                                           limit):
    result = lk.sweep(f.curve, {"q": lk.uniform(0, 1), "steps": 3, "pause": 0.02}, trials=4,
                      metric="acc", mode="max", scheduler=threads_scheduler, store=None,
                      **limit)
    spans = sorted((t.started, t.ended) for t in result.trials)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))   # one at a time
    RUNNING.update(now=0, most=0)
    free = lk.sweep(meeting_trial, {"q": lk.uniform(0, 1)}, trials=4, metric="acc", mode="max",
                    scheduler=threads_scheduler, store=None)
    assert free.counts() == {"completed": 4}
    assert RUNNING["most"] == 2  # two at a time: each trial waited for another to run beside it


RUNNING = {"now": 0, "most": 0}  # trials running at once in this process (in-process threads)
_RUNNING = threading.Condition()


def meeting_trial(config, trial):
    """A trial that waits (up to 20 s, woken by the others) until another one runs beside it."""
    with _RUNNING:
        RUNNING["now"] += 1
        RUNNING["most"] = max(RUNNING["most"], RUNNING["now"])
        _RUNNING.notify_all()
        _RUNNING.wait_for(lambda: RUNNING["most"] >= 2, timeout=20)
    try:
        trial.report(1, acc=config["q"])
    finally:
        with _RUNNING:
            RUNNING["now"] -= 1
