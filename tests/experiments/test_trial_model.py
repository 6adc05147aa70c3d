"""One trial model: a Status enum and one frozen, keyword-built TrialRecord shared by everybody."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

import labkit as lk
from labkit.events import TrialFinished
from labkit.experiments import Status, TrialRecord
from labkit.experiments.store.database import Store
from tests.experiments import functions as F


def test_a_status_is_its_word():
    assert Status.COMPLETED == "completed" and f"{Status.STOPPED}" == "stopped"
    assert {Status.FAILED: 1} == {"failed": 1} and repr({Status.FAILED: 1}) == "{'failed': 1}"
    assert Status("cancelled") is Status.CANCELLED and Status.CANCELLED.ended
    assert not Status.CANCELLED.terminal and Status.FAILED.terminal
    with pytest.raises(ValueError):
        Status("done")


def test_the_record_is_frozen_and_built_by_keyword():
    with pytest.raises(TypeError):
        TrialRecord(0, {"x": 1})                                 # positional: refused
    r = TrialRecord(id=0, config={"x": 1}, status="running")
    assert r.status is Status.RUNNING                           # a word becomes the enum
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.status = Status.FAILED
    done = r.replace(status="completed", value=0.5)
    assert (r.status, done.status, done.value) == ("running", "completed", 0.5)
    assert TrialRecord.of(done.row()) == done                   # a row and back


def test_engine_store_events_result_and_views_share_the_record(tmp_path):
    seen = []
    run = lk.sweep(F.quadratic, {"x": lk.uniform(0, 1)}, trials=3, metric="loss", mode="min",
                   store=tmp_path / "s.db", name="m", wait=False)
    run.subscribe(seen.append)
    result = run.result(timeout=60)
    finished = [e for e in seen if isinstance(e, TrialFinished)]
    assert len(finished) == 3 and all(isinstance(e.record, TrialRecord) for e in finished)
    by_id = {e.trial: e for e in finished}
    for t in result.trials:
        assert isinstance(t, TrialRecord) and t.status is Status.COMPLETED
        e = by_id[t.id]
        assert (e.status, e.value, e.best, e.step, e.attempts) == (
            t.status, t.value, t.best, t.step, t.attempts)
        assert e.record.history == t.history
    assert pickle.loads(pickle.dumps(finished[0])).record == finished[0].record
    store = Store(tmp_path / "s.db", readonly=True)
    try:
        stored = store.records("m")
    finally:
        store.close()
    assert [dataclasses.replace(t, history=[(s, m) for s, m, _ in t.history]) for t in stored] == [
        dataclasses.replace(t, history=[(s, m) for s, m, _ in t.history]) for t in result.trials]
    rows = run.sweep.snapshot(history=True)
    assert [TrialRecord.of(row) for row in rows] == result.trials


def test_a_live_and_a_stored_sweep_honour_the_sweep_source_protocol(tmp_path):
    from labkit.experiments.live import SweepSource
    from labkit.experiments.sweep import finished_run

    with lk.LocalScheduler() as scheduler:
        run = lk.sweep(F.quadratic, {"x": lk.uniform(0, 1)}, trials=2, metric="loss",
                       mode="min", store=None, scheduler=scheduler, wait=False)
        result = run.result(timeout=60)
        stored = finished_run(result).sweep
        for source in (run.sweep, stored):
            assert isinstance(source, SweepSource)
            assert lk.experiments.live_sweep(run) is run.sweep
            rows = source.snapshot(history=True)
            assert [TrialRecord.of(r) for r in rows] == result.trials
            assert source.result().counts() == {"completed": 2}
        # by id, for views that see only ids: through the scheduler the sweep ran on
        assert lk.experiments.live_sweep(run.id, scheduler) is run.sweep


def back_and_forth(config, trial):
    """Reports at steps 3, 6, 3, 6, 9, ...: out of order after the second."""
    for step in (3, 6, 3, 6, 9, 12, 15, 18, 21):
        trial.report(step, score=config["lr"] * step)


def twice_at_a_step(config, trial):
    trial.report(1, score=config["lr"])
    trial.report(1, score=config["lr"])


@pytest.mark.parametrize("search", ["random", "pbt"])
@pytest.mark.parametrize("fn", [back_and_forth, twice_at_a_step])
def test_a_report_at_a_step_not_after_the_last_fails_its_trial_under_every_search(fn, search):
    chosen = "random" if search == "random" else lk.PBT(
        interval=3, quantile=0.25, mutations={"lr": lk.uniform(0, 1)}, seed=0)
    with pytest.raises(lk.TaskError) as info:  # no trial completed: the first failure
        lk.sweep(fn, {"lr": lk.uniform(0, 1)}, trials=4, metric="score", mode="max", seed=0,
                 store=None, search=chosen)
    result = info.value.result
    for t in result.trials:
        assert t.status is Status.FAILED, (t.status, t.error)
        last, step = (6, 3) if fn is back_and_forth else (1, 1)
        assert "InputError" in t.error and f"trial {t.id}:" in t.error, t.error
        assert f"at step {step} after a report at step {last}" in t.error, t.error
        # nothing refused is kept: the reports before the bad one, in order
        assert [s for s, _, _ in t.history] == ([3, 6] if fn is back_and_forth else [1])
