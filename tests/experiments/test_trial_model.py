"""One trial model: a Status enum and one frozen, keyword-built TrialRecord shared by everybody."""

from __future__ import annotations

import dataclasses
import pickle
import typing

import pytest

import labkit as lk
from labkit.events import TrialFinished
from labkit.experiments import Status, TrialRecord
from labkit.experiments.store.database import Store
from labkit.experiments.trials.state import TrialState
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


def test_the_record_is_truly_frozen_its_history_a_tuple_and_replace_a_real_copy():
    reports = [(0, {"loss": 0.5}, 0.0)]
    r = TrialRecord(id=0, config={}, history=reports)
    reports.append((1, {"loss": 0.4}, 1.0))                 # the caller's list is not the record's
    assert r.history == ((0, {"loss": 0.5}, 0.0),)
    grown = r.replace(history=reports)                      # through __init__: a tuple again
    assert isinstance(grown.history, tuple) and len(grown.history) == 2 and len(r.history) == 1
    assert grown.replace(value=0.4).history is grown.history   # a tuple is shared, not copied
    with pytest.raises(ValueError):
        r.replace(status="done")                            # checked as any record is
    with pytest.raises(TypeError):
        r.replace(colour="red")


def test_the_engine_holds_the_live_reports_and_hands_out_frozen_records():
    stored = TrialRecord(id=0, config={}, status="running", history=[(0, {"loss": 1.0}, 0.0)])
    state = TrialState.of(stored)                           # a resumed trial: its reports go on
    state.history.append((1, {"loss": 0.5}, 1.0))
    assert state.record.history == () and len(stored.history) == 1
    frozen = state.frozen()
    state.history.append((2, {"loss": 0.25}, 2.0))
    assert [s for s, _, _ in frozen.history] == [0, 1] and isinstance(frozen.history, tuple)
    with pytest.raises(TypeError):
        state.update(history=[])                            # one place holds them: the list


def test_every_record_a_sweep_hands_out_is_frozen_with_its_reports(tmp_path):
    seen = []
    run = lk.sweep(F.quadratic, {"x": lk.uniform(0, 1)}, trials=2, metric="loss", mode="min",
                   store=tmp_path / "s.db", name="f", wait=False)
    run.subscribe(seen.append)
    result = run.result(timeout=60)
    finished = [e.record for e in seen if isinstance(e, TrialFinished)]
    for record in [*result.trials, *finished, *run.sweep.result().trials]:
        assert isinstance(record.history, tuple) and len(record.history) == 5
    store = Store(tmp_path / "s.db", readonly=True)
    try:
        assert all(isinstance(t.history, tuple) and t.history for t in store.records("f"))
    finally:
        store.close()


def test_trial_finished_carries_a_typed_record():
    hints = typing.get_type_hints(TrialFinished, localns={"TrialRecord": TrialRecord,
                                                          "Status": Status})
    assert hints["record"] is TrialRecord                   # not Any: mypy reads its fields
    event = TrialFinished("r", TrialRecord(id=4, config={}, status="stopped", reason="ASHA"))
    assert (event.trial, event.status, event.record.reason) == (4, "stopped", "ASHA")
