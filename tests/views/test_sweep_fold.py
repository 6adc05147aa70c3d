"""The sweep tracker's fold (issue 45): a trial's row changes in place as reports come, and a
reader is handed a frozen record, made when asked, that later reports leave as it was."""

from __future__ import annotations

import dataclasses

import pytest

from labkit.events import SweepStarted, TrialFinished, TrialReported, TrialStarted
from labkit.experiments import TrialRecord
from labkit.views.trackers.sweep_tracker import SweepTracker


def _started() -> SweepTracker:
    t = SweepTracker("r")
    t(SweepStarted("r", "demo", "acc", "max", {}, ({"id": 0, "config": {"x": 1}},), 2))
    t(TrialStarted("r", 0, {"x": 1}, "tcp://w:1 #0"))
    return t


def test_a_reader_gets_a_frozen_record_that_later_reports_leave_alone():
    t = _started()
    t(TrialReported("r", 0, (0,), ({"acc": 0.5},), 0.5, 0.5))
    before = t.state([0]).rows[0]
    t(TrialReported("r", 0, (1, 2), ({"acc": 0.6}, {"acc": 0.7}), 0.7, 0.7))
    after = t.state(None).rows[0]
    assert isinstance(before, TrialRecord) and [s for s, _, _ in before.history] == [0]
    assert [s for s, _, _ in after.history] == [0, 1, 2] and isinstance(after.history, tuple)
    assert (after.status, after.value, after.best, after.step) == ("running", 0.7, 0.7, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        after.value = 1.0  # type: ignore[misc]
    t(TrialFinished("r", after.replace(status="completed")))
    assert t.counts() == {"completed": 1} and t.trials([0])[0].curve[-1] == (2, 0.7)


def test_a_report_makes_no_record(monkeypatch):
    t = _started()
    made = []
    replace, post_init = TrialRecord.replace, TrialRecord.__post_init__
    monkeypatch.setattr(TrialRecord, "replace", lambda r, **c: made.append(c) or replace(r, **c))
    monkeypatch.setattr(TrialRecord, "__post_init__", lambda r: made.append(r) or post_init(r))
    for step in range(200):
        t(TrialReported("r", 0, (step,), ({"acc": step / 200},), step / 200, step / 200))
    assert made == []  # the row changed in place: no record per report
    (row,) = t.state([0]).rows  # a reader asks: one record, frozen now
    assert len(made) == 1 and len(row.history) == 200 and t.best().id == 0


def test_a_trial_that_did_not_change_is_frozen_once():
    t = _started()
    t(SweepStarted("r", "demo", "acc", "max", {}, ({"id": 1, "config": {"x": 2}},), 2))
    first, other = t.state(None).rows
    again, still = t.state(None).rows  # a paint asks for every row: none changed, none made
    assert again is first and still is other
    t(TrialReported("r", 0, (0,), ({"acc": 0.5},), 0.5, 0.5))
    changed, unchanged = t.state(None).rows
    assert changed is not first and changed.value == 0.5 and unchanged is other
