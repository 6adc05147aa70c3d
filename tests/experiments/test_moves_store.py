"""The store keeps a trial's moves (executions that ended as their worker left gracefully).

A sweep whose worker retires under a running trial (real worker processes)
stores the move: ``lk.load_sweep`` shows it, ``labkit sweeps`` counts it beside
the failures, a reader that follows the store sees it, and a resumed sweep
goes on counting from it.  A store written before ``moves`` joined schema
version 5 gains the column when opened to write and reads 0 when opened to read.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time

import pytest

import labkit as lk
from labkit.experiments.store.catalog import format_summaries, summaries
from labkit.experiments.store.changes import StoreChanges
from labkit.experiments.store.database import SCHEMA_VERSION, Store
from labkit.experiments.trials.record import TrialRecord
from tests.helpers import until
from tests.scheduling import elastic_functions as ef

X = {"x": lk.uniform(0, 1), "pause": 0.4}
DATA = os.path.join(os.path.dirname(__file__), "data")


def _running_on(run) -> dict:
    """Running trials that reported, by worker."""
    return {r["worker"]: r["id"] for r in run.sweep.snapshot()
            if r["status"] == "running" and r["step"] is not None and r["worker"]}


def _moves(result) -> dict:
    return {t.id: t.moves for t in result.trials}


def _columns(path) -> set:
    conn = sqlite3.connect(path)
    try:
        return {r[1] for r in conn.execute("PRAGMA table_info(trials)")}
    finally:
        conn.close()


def _drop_moves(path) -> None:
    """Make the file a version-5 store as written before ``moves`` joined version 5."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("ALTER TABLE trials DROP COLUMN moves")
        conn.commit()
    finally:
        conn.close()


def _follow(changes: StoreChanges, seen: dict) -> dict:
    """``seen`` updated with the moves of each trial a look at the store gives."""
    look = changes.look()
    for row in [*look.trials, *(r for rows in look.loaded.values() for r in rows)]:
        seen[row["id"]] = row["moves"]
    return seen


def test_the_store_keeps_moves_at_a_start_and_an_end_and_reads_them_back(tmp_path):
    path = str(tmp_path / "s.db")
    store = Store(path)
    try:
        store.create_sweep("s", '{"space": {}}', "loss", "min", 0, {}, now=False)
        store.add_trials("s", [(0, {"x": 0}), (1, {"x": 1})])
        store.trial_started("s", 0, 3, "w1", time.time(), moves=2)
        store.trial_ended("s", TrialRecord(id=1, config={"x": 1}, status="completed",
                                           value=0.5, attempts=2, moves=1, ended=time.time()))
        store.flush()
        assert [r.moves for r in store.records("s")] == [2, 1]
        store.trial_finished("s", 0, "completed", {"loss": 1.0}, 1.0, 1.0, 3)  # moves: as stored
        store.flush()
        assert [t["moves"] for t in store.trials("s")] == [2, 1]
    finally:
        store.close()


def test_a_version_5_store_without_moves_reads_zero_and_gains_the_column_to_write(tmp_path):
    path = str(tmp_path / "s.db")
    store = Store(path)
    store.create_sweep("s", '{"space": {}}', "loss", "min", 0, {}, now=False)
    store.add_trials("s", [(0, {"x": 0})])
    store.close()
    _drop_moves(path)
    assert "moves" not in _columns(path)
    reader = Store(path, readonly=True)
    try:
        assert [r.moves for r in reader.records("s")] == [0]   # read as written: none
        assert summaries(path)[0]["moves"] == 0
    finally:
        reader.close()
    writer = Store(path)  # a writable open adds the column (the version stays 5)
    try:
        assert "moves" in _columns(path) and SCHEMA_VERSION == 5
        writer.trial_started("s", 0, 1, "w1", time.time(), moves=1)
        writer.flush()
        assert [r.moves for r in writer.records("s")] == [1]
    finally:
        writer.close()


@pytest.mark.parametrize("version", [3, 4])
def test_an_older_store_migrates_with_no_moves(tmp_path, version):
    path = str(tmp_path / "old.db")
    shutil.copy(os.path.join(DATA, f"store_v{version}.db"), path)
    assert [t.moves for t in lk.load_sweep(path, "bowl").trials] == [0] * 5  # read only
    Store(path).close()
    assert "moves" in _columns(path)
    assert [t.moves for t in lk.load_sweep(path, "bowl").trials] == [0] * 5


def test_a_moved_trial_is_stored_loaded_listed_followed_and_counted_on_after_a_resume(tmp_path):
    path = str(tmp_path / "s.db")
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        run = lk.sweep(ef.epochs, X, trials=3, metric="loss", mode="min", scheduler=s,
                       store=path, name="m", wait=False, max_failures=0, seed=0)
        until(lambda: len(_running_on(run)) == 2, 180, "two trials running on two workers")
        reader = Store(path, readonly=True)  # as the dashboard follows a store
        changes, followed = StoreChanges(reader), {}
        _follow(changes, followed)
        leaving = sorted(_running_on(run))[0]
        moved = _running_on(run)[leaving]
        s.client.retire_workers([leaving])
        until(lambda: run.sweep.snapshot()[moved]["moves"] == 1, 120, "the trial to move")
        until(lambda: _follow(changes, followed).get(moved) == 1, 60, "the follower's move")
        run.cancel()  # the moved trial has not ended: a resume runs it again
        with pytest.raises(lk.CancelledError):
            run.result(timeout=60)
    loaded = lk.load_sweep(path, "m")
    assert loaded.trials[moved].moves == 1 and loaded.trials[moved].status != "completed"
    assert sum(_moves(loaded).values()) >= 1
    listed = summaries(path)[0]
    assert listed["moves"] == sum(_moves(loaded).values())
    table = format_summaries([listed]).splitlines()
    assert "MOVES" in table[0].split()
    reader.close()

    with lk.DaskScheduler(mode="processes", n_workers=2) as s:  # resumed: it counts on
        run = lk.sweep(ef.epochs, X, trials=3, metric="loss", mode="min", scheduler=s,
                       store=path, name="m", wait=False, max_failures=0, seed=0, resume=True)
        until(lambda: moved in _running_on(run).values(), 180, "the moved trial running again")
        assert run.sweep.snapshot()[moved]["moves"] == 1  # its stored moves, known again
        leaving = next(w for w, t in _running_on(run).items() if t == moved)
        s.client.retire_workers([leaving])
        result = run.result(timeout=300)
    assert result.counts() == {"completed": 3}, [(t.status, t.error) for t in result.trials]
    assert result.trials[moved].moves == 2
    steps = [step for step, _, _ in result.trials[moved].history]
    assert steps == list(range(8)), steps  # it went on from its checkpoint each time
    assert _moves(lk.load_sweep(path, "m")) == _moves(result)
