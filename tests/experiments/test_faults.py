"""Faults: failing trials are recorded, not fatal; a worker killed under a trial costs a restart."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import labkit as lk
from tests.experiments import closing_functions as cf
from tests.experiments import functions as f


def test_trials_that_raise_are_failed_with_their_error_and_the_sweep_goes_on(dask_scheduler,
                                                                             tmp_path):
    result = lk.sweep(f.failing, {"x": lk.uniform(0, 1)}, trials=10, metric="loss", mode="min",
                      scheduler=dask_scheduler, seed=4, store=tmp_path / "s.db", name="f")
    failed = result.by_status("failed")
    assert failed and result.by_status("completed")
    assert len(failed) + len(result.by_status("completed")) == 10
    for t in failed:
        assert t.config["x"] > 0.5 and t.error.startswith("ValueError: x=")
        assert "in failing" in t.traceback and "raise ValueError" in t.traceback
        assert "labkit/experiments" not in t.traceback   # the user's own frames
        assert [s for s, _, _ in t.history] == [0]       # its reports are kept
    stored = {t.id: t for t in lk.load_sweep(tmp_path / "s.db", "f").trials}
    assert all(stored[t.id].error == t.error and stored[t.id].traceback == t.traceback
               for t in failed)
    assert result.best.status == "completed"


def test_a_sweep_none_of_whose_trials_completed_raises_the_first_failure(tmp_path):
    with pytest.raises(lk.TaskError) as info:
        lk.sweep(f.always_fails, {"x": lk.uniform(0, 1)}, trials=3, metric="loss",
                 mode="min", store=tmp_path / "s.db", name="broken")
    message = str(info.value)
    assert "no trial of sweep 'broken' completed: 3 failed" in message
    assert "RuntimeError: broken on purpose" in message
    assert info.value.result.counts() == {"failed": 3}
    assert lk.load_sweep(tmp_path / "s.db").counts() == {"failed": 3}


def test_a_metric_the_function_never_reports_fails_its_trials_with_a_clear_message():
    with pytest.raises(lk.TaskError) as info:
        lk.sweep(f.no_metric, {"x": lk.uniform(0, 1)}, trials=2, metric="accuracy",
                 mode="max", store=None)
    record = info.value.result.trials[0]
    assert record.status == "failed"
    # issue 38: the first report without the metric fails the trial (not its end)
    assert "the metric 'accuracy'" in record.error and "first report (step 0)" in record.error
    assert "holds 'loss'" in record.error and "trial.report(step, accuracy=...)" in \
        record.error


def test_trial_report_refuses_metrics_that_are_not_numbers():
    def bad(config, trial):
        trial.report(0, acc="high")
    with pytest.raises(lk.TaskError) as info:
        lk.sweep(bad, [{"a": 1}], metric="acc", mode="max", store=None)
    assert "metric 'acc' must be a number, got str 'high'" in str(info.value)


@pytest.fixture
def killable():
    """Two worker processes of its own (nannies restart a killed one)."""
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        yield s


def _kill_when(run, step: int, trial: int = 0) -> dict:
    """SIGKILL the worker process running ``trial`` once it reported ``step``; what was done."""
    killed = {}

    def watch():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not run.done():
            rows = run.sweep.snapshot(history=True)
            history = rows[trial]["history"]
            if history and history[-1][0] >= step:
                killed["pid"] = int(history[-1][1]["pid"])
                killed["step"] = history[-1][0]
                os.kill(killed["pid"], signal.SIGKILL)
                return
            time.sleep(0.02)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return killed


@pytest.mark.soak
def test_a_worker_killed_under_a_trial_restarts_it_elsewhere_from_its_checkpoint(killable,
                                                                                tmp_path):
    run = lk.sweep(f.pid_and_steps, {"steps": 14, "pause": 0.1}, trials=1, metric="score",
                   mode="max", scheduler=killable, store=tmp_path / "s.db", name="k",
                   wait=False)
    killed = _kill_when(run, 4)
    result = run.result(timeout=120)
    trial = result.trials[0]
    assert killed and trial.status == "completed" and trial.attempts == 2
    steps = [s for s, _, _ in trial.history]
    assert steps == list(range(14))                     # every step once, in order
    after = [m for _, m, _ in trial.history if m["pid"] != killed["pid"]]
    assert after and all(m["started"] >= killed["step"] - 1 for m in after)   # from its checkpoint
    assert after[0]["started"] > 0
    stored = lk.load_sweep(tmp_path / "s.db", "k").trials[0]
    assert [s for s, _, _ in stored.history] == steps and stored.attempts == 2


@pytest.mark.soak
def test_a_trial_whose_workers_keep_dying_fails_after_max_failures(killable):
    run = lk.sweep(f.pid_and_steps, {"steps": 30, "pause": 0.1}, trials=1, metric="score",
                   mode="max", scheduler=killable, store=None, max_failures=0, wait=False)
    killed = _kill_when(run, 2)
    with pytest.raises(lk.TaskError) as info:
        run.result(timeout=120)
    trial = info.value.result.trials[0]
    assert killed and trial.status == "failed"
    assert "WorkerLostError" in trial.error and "max_failures=0" in trial.error


@pytest.mark.soak
def test_a_process_killed_under_a_gil_holding_trial_restarts_it_from_its_checkpoint():
    with lk.DaskScheduler(mode="auto", n_workers=1, threads_per_worker=1) as s:
        fn = lk.FunctionCallable(f.pid_and_steps, holds_gil=True)
        run = lk.sweep(fn, {"steps": 12, "pause": 0.1}, trials=1, metric="score", mode="max",
                       scheduler=s, store=None, wait=False)
        killed = _kill_when(run, 3)
        trial = run.result(timeout=120).trials[0]
    assert killed and trial.status == "completed" and trial.attempts == 2
    assert [s for s, _, _ in trial.history] == list(range(12))
    assert trial.history[-1][1]["started"] >= 3


@pytest.mark.parametrize("placement", ["inline", "threads", "offload"])
def test_an_error_whose_str_raises_fails_its_trial_once_naming_its_type(placement,
                                                                        threads_scheduler):
    fn = cf.unprintable
    if placement == "offload":    # a GIL-holding trial runs in the offload pool's processes
        fn = lk.FunctionCallable(cf.unprintable, holds_gil=True)
    scheduler = None if placement == "inline" else threads_scheduler
    with pytest.raises(lk.TaskError) as info:
        lk.sweep(fn, {"x": lk.uniform(0, 1)}, trials=2, metric="loss", mode="min",
                 scheduler=scheduler, store=None, seed=0)
    assert "Unprintable: Unprintable(" in str(info.value)
    for t in info.value.result.trials:
        assert t.status == "failed" and t.attempts == 1, (t.status, t.attempts, t.error)
        assert t.error.startswith("Unprintable: Unprintable(") and "lost" not in t.error
        assert "raise Unprintable" in t.traceback
