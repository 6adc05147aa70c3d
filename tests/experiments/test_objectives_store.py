"""Several objectives in the store: kept, read back, resumed; stores of versions 3 and 4 migrate."""

from __future__ import annotations

import os
import shutil
import time
import sqlite3

import pytest

import labkit as lk
from labkit.errors import InputError
from labkit.experiments.store.database import SCHEMA_VERSION, Store
from tests.experiments import functions as G
from tests.experiments import objective_functions as F

XY = {"x": lk.uniform(0, 1), "y": lk.uniform(0, 1)}
TWO = dict(metric=("loss", "latency_ms"), mode=("min", "max"))
DATA = os.path.join(os.path.dirname(__file__), "data")


def _version(path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


def _kept(result):
    return [(t.id, t.status, t.objectives) for t in result.trials]


def test_load_sweep_keeps_the_objectives_the_records_and_the_front(tmp_path):
    store = tmp_path / "s.db"
    ran = lk.sweep(F.two_objectives, XY, trials=12, seed=4, store=store, name="two", **TWO)
    back = lk.load_sweep(store, "two")
    assert (back.objectives, back.modes) == (("loss", "latency_ms"), ("min", "max"))
    assert back.metric == "loss" and back.mode == "min"
    assert _kept(back) == _kept(ran) and all(t.objectives for t in back.trials)
    assert [t.id for t in back.pareto] == [t.id for t in ran.pareto] and back.pareto
    with pytest.raises(InputError, match="result.pareto"):
        _ = back.best


def test_a_resumed_sweep_keeps_its_objectives_and_refuses_others(tmp_path):
    store = tmp_path / "s.db"
    first = lk.sweep(F.two_objectives, XY, trials=4, seed=4, store=store, name="two", **TWO)
    more = lk.sweep(F.two_objectives, XY, trials=8, seed=4, store=store, name="two",
                    resume=True, **TWO)
    assert _kept(more)[:4] == _kept(first) and len(more.trials) == 8
    assert all(t.objectives for t in more.trials) and more.objectives == first.objectives
    extended = lk.load_sweep(store, "two").extend(2, F.two_objectives)
    assert len(extended.trials) == 10 and extended.modes == ("min", "max")
    assert all(t.objectives for t in extended.trials)
    for metric, mode, argument in [
        ("loss", "min", "metric"),
        (("loss", "latency_ms"), ("min", "min"), "mode"),
        (("latency_ms", "loss"), ("max", "min"), "metric"),
    ]:
        with pytest.raises(InputError) as info:
            lk.sweep(F.two_objectives, XY, trials=12, seed=4, store=store, name="two",
                     resume=True, metric=metric, mode=mode)
        assert info.value.where["argument"] == argument


@pytest.mark.parametrize("version", [3, 4])
def test_a_store_written_by_older_labkit_migrates_and_resumes(tmp_path, version):
    path = tmp_path / "old.db"
    shutil.copy(os.path.join(DATA, f"store_v{version}.db"), path)
    assert _version(path) == version
    read = lk.load_sweep(path, "bowl")  # read as written (read-only: no migration)
    assert _version(path) == version and read.objectives == ("loss",)
    assert read.best is not None and [t.objectives for t in read.trials] == [None] * 5
    Store(path).close()  # a writable open migrates
    assert _version(path) == SCHEMA_VERSION == 5
    migrated = lk.load_sweep(path, "bowl")
    assert _kept(migrated) == _kept(read) and migrated.best.id == read.best.id
    more = lk.sweep(G.quadratic, {"x": lk.uniform(0, 1)}, trials=7, metric="loss", mode="min",
                    seed=3, store=path, name="bowl", resume=True)
    assert [t.objectives for t in more.trials[5:]] == [{"loss": t.value} for t in more.trials[5:]]
    assert more.best.value <= read.best.value and len(more.trials) == 7
    with pytest.raises(InputError) as info:
        lk.sweep(G.quadratic, {"x": lk.uniform(0, 1)}, trials=8, metric=("loss", "x"),
                 mode=("min", "min"), seed=3, store=path, name="bowl", resume=True)
    assert info.value.where["argument"] == "metric"


def test_a_store_followed_gives_each_changed_trial_its_objectives_and_constraints(tmp_path):
    from labkit.experiments.store.changes import StoreChanges
    from labkit.experiments.trials.record import TrialRecord

    path = str(tmp_path / "s.db")
    writer = Store(path)
    writer.create_sweep("s", '{"space": {}}', "loss", "min", 0, {}, now=False,
                        objectives=[["loss", "min"], ["latency_ms", "max"]])
    writer.add_trials("s", [(0, {"x": 0})])
    writer.flush()
    reader = Store(path, readonly=True)
    try:
        changes = StoreChanges(reader)
        changes.look()
        values = {"loss": 0.5, "latency_ms": 3.0}
        writer.trial_finished("s", 0, "completed", values, 0.5, 0.5, 1, ended=time.time(),
                              objectives=values, constraints=(-1.0, 0.0))
        writer.flush()
        (row,) = changes.look().trials
        assert row["objectives"] == values and row["constraints"] == [-1.0, 0.0]
        record = TrialRecord.of(row)
        assert record.objectives == values and record.constraints == (-1.0, 0.0)
        assert reader.sweep("s")["objectives"] == [("loss", "min"), ("latency_ms", "max")]
    finally:
        reader.close()
        writer.close()


def test_keep_best_of_several_objectives_keeps_by_dominance_and_never_the_infeasible(tmp_path):
    points = [(0.1, 0.9), (0.5, 0.5), (0.9, 0.1), (0.6, 0.6), (0.95, 0.95)]
    configs = [{"a": a, "b": b} for a, b in points]
    two = dict(metric=("loss", "latency_ms"), mode=("min", "min"), keep_best=3)
    plain = lk.sweep(F.checkpoints_both, configs, store=tmp_path / "p.db", name="p", **two)
    assert [t.id for t in plain.pareto] == [0, 1, 2]
    assert [t.id for t in plain.trials if _has_checkpoint(t)] == [0, 1, 2]
    bounded = lk.sweep(F.checkpoints_both, configs, store=tmp_path / "c.db", name="c",
                       constraints=lambda m: [m["loss"] - 0.8], **two)
    assert [t.id for t in bounded.pareto] == [0, 1]  # 2 and 4 are infeasible
    assert [t.id for t in bounded.trials if _has_checkpoint(t)] == [0, 1, 3]
    assert bounded.trials[3].checkpoint() == {"a": 0.6, "b": 0.6}


def _has_checkpoint(record) -> bool:
    try:
        record.checkpoint()
    except lk.StorageError as err:
        assert "dominance over loss, latency_ms" in str(err)
        return False
    return True
