"""A store's changes of one trial's row in a commit are one UPDATE (issue 48, the cost of a trial).

A trial's configuration, start and end reached the store as three UPDATEs; the writer now merges
those one commit carries into one, leaving the row as the three in turn would.
"""

from __future__ import annotations


import pytest

import labkit as lk
from labkit.experiments.store import write_queue
from labkit.experiments.store.database import Store
from labkit.experiments.store.row_updates import RowUpdate, merge_rows

SPACE = {"x": lk.uniform(0, 1)}


def _updates(seen: list[str]) -> list[str]:
    return [s for s in seen if s.lstrip().startswith("UPDATE trials")]


def _row(store: Store, trial: int) -> dict:
    return store.read("SELECT status, attempts, worker, moves, started, ended, config, value, "
                      "metrics FROM trials WHERE sweep = 's' AND id = ?", (trial,))[0]


def _sweep(store: Store, n: int) -> None:
    store.create_sweep("s", "{}", "loss", "min", 0, {}, now=False)
    store.add_trials("s", [(i, {}) for i in range(n)])
    store.flush()


def test_a_trial_s_config_start_and_end_in_one_commit_are_one_update(statements, tmp_path):
    store = Store(tmp_path / "s.db")
    try:
        _sweep(store, 2)
        statements.clear()
        for trial in (0, 1):
            store.trial_config("s", trial, {"x": trial})
            store.trial_started("s", trial, 1, "w", 10.0 + trial)
            store.trial_finished("s", trial, "completed", {"loss": 0.5}, 0.5, 0.5, None,
                                 ended=20.0, reported=False)
        store.flush()
        assert len(_updates(statements)) == 2          # today: 3 a trial
        assert not [s for s in statements if "report_packs" in s]  # it never reported
        assert _row(store, 1) == {"status": "completed", "attempts": 1, "worker": "w",
                                  "moves": 0, "started": 11.0, "ended": 20.0,
                                  "config": '{"x": 1}', "value": 0.5,
                                  "metrics": '{"loss": 0.5}'}
    finally:
        store.close()


def test_merged_updates_leave_the_row_as_the_updates_in_turn_would(tmp_path):
    store = Store(tmp_path / "s.db")
    try:
        _sweep(store, 1)
        store.trial_started("s", 0, 1, "w1", 1.0)
        store.flush()                                       # another commit: started is kept
        store.trial_started("s", 0, 2, "w2", 5.0, moves=1)  # a rerun: started stays the first
        store.trial_reports("s", 0, 2, [(0, {"loss": 2.0}, 6.0)], (2.0, 2.0, 0))
        store.trial_finished("s", 0, "completed", None, 1.0, 1.0, 0, ended=9.0)
        store.flush()
        row = _row(store, 0)
        assert (row["started"], row["attempts"], row["worker"], row["moves"]) == (1.0, 2, "w2", 1)
        assert (row["status"], row["value"], row["ended"]) == ("completed", 1.0, 9.0)
        assert store.reports("s") == {0: [(0, {"loss": 2.0}, 6.0)]}
    finally:
        store.close()


def test_merging_keeps_a_null_then_a_first_value_and_the_order_against_progress():
    a = RowUpdate("s", 0, {"ended": None}, first={"started": 1.0})
    b = RowUpdate("s", 0, {"started": None})
    c = RowUpdate("s", 0, {}, first={"started": 2.0})
    assert a.merged(b).merged(c).values == {"ended": None, "started": 2.0}
    assert a.merged(c).first == {"started": 1.0}
    from labkit.experiments.store.report_ops import Reports

    end = RowUpdate("s", 0, {"value": 1.0})
    progress = Reports("s", 0, 1, [], (3.0, 3.0, 1))
    # an end, then progress, then another change: the end is not moved past the progress
    assert len(merge_rows([end, progress, RowUpdate("s", 0, {"worker": "w"})])) == 3
    assert len(merge_rows([RowUpdate("s", 0, {"worker": "w"}), progress, end])) == 2


def test_a_stored_sweep_commits_each_trial_s_row_once(statements, tmp_path, monkeypatch):
    # every write in one commit (the last, as the store closes): one UPDATE a trial
    monkeypatch.setattr(write_queue, "COMMIT_EVERY", 600.0)
    result = lk.sweep(lambda config, trial: {"loss": config["x"]}, SPACE, trials=20,
                      metric="loss", mode="min", seed=0, store=tmp_path / "s.db", name="one")
    assert len(_updates(statements)) == 20                 # today: 40 (a start and an end)
    loaded = lk.load_sweep(tmp_path / "s.db", "one")
    assert [(t.config, str(t.status), t.value, t.started, t.ended, t.attempts, t.worker)
            for t in loaded.trials] == \
        [(t.config, str(t.status), t.value, t.started, t.ended, t.attempts, t.worker)
         for t in result.trials]
