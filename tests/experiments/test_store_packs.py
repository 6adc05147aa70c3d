"""Reports packed a trial to a row (schema 2): every field reads back, old stores migrate equal.

Real sweeps write the stores; the committed ``data/store_v1.db`` (schema 1,
a JSON row a report: see ``data/make_store_v1.py``) and ``data/store_v0.db``
are read as they are and again after their migration, and must read the same.
"""

from __future__ import annotations

import math
import os
import shutil
import sqlite3
import threading
import time

import numpy as np
import pytest

import labkit as lk
from labkit.experiments.store import report_pack
from labkit.experiments.trials.record import TrialRecord
from labkit.experiments.store.report_pack import pack, unpack
from labkit.experiments.store.database import SCHEMA_VERSION, Store
from labkit.experiments.store.values import plain, to_json
from tests.experiments import functions as F

DATA = os.path.join(os.path.dirname(__file__), "data")


def uneven(config, trial):
    """Metrics that change from report to report, a NaN, half steps; x > 0.8 fails."""
    for k in range(4):
        step = k / 2 if config["x"] < 0.5 else k
        metrics = {"loss": config["x"] / (k + 1), "epoch": k}
        if k == 2:
            metrics["loss"] = float("nan")
        if k == 3:
            metrics.update(acc=np.float32(0.5), grad=1e300)
        trial.report(step, **metrics)
        trial.checkpoint(k)
    if config["x"] > 0.8:
        raise ValueError(f"x={config['x']:.2f} is too large")
    return {"loss": config["x"], "epoch": 4}


def same(a, b) -> bool:
    """Equal, NaN equal to NaN, through tuples, lists and dicts (and exactly the same types)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


FIELDS = [f for f in TrialRecord.__dataclass_fields__]


def assert_same_records(got: list, expected: list) -> None:
    """Every field of every trial, its history included, the same."""
    assert [r.id for r in got] == [r.id for r in expected]
    for g, e in zip(got, expected, strict=True):
        for name in FIELDS:
            assert same(getattr(g, name), getattr(e, name)), (g.id, name, getattr(g, name),
                                                              getattr(e, name))


def _records(path, name: str) -> list:
    store = Store(path, readonly=True)
    try:
        return store.records(name)
    finally:
        store.close()


# -- a real sweep reads back as it ran ------------------------------------------------------------


def test_a_sweep_reads_back_every_field_of_every_trial_as_it_ran(tmp_path):
    path = tmp_path / "s.db"
    with pytest.raises(lk.TaskError):   # every trial failing would raise: not so here
        lk.sweep(F.always_fails, [{"a": 1}], metric="loss", mode="min", store=path, name="bad")
    asha = lk.sweep(F.curve, {"q": lk.uniform(0.5, 1.0), "steps": 9}, trials=12, metric="acc",
                    mode="max", seed=4, early_stop=lk.ASHA(min_steps=1, reduction=3),
                    store=path, name="asha")
    mixed = lk.sweep(uneven, {"x": lk.uniform(0, 1)}, trials=8, metric="loss", mode="min",
                     seed=2, store=path, name="uneven")
    assert asha.counts()["stopped"] and mixed.counts()["failed"] and mixed.counts()["completed"]
    for result in (asha, mixed):
        back = lk.load_sweep(path, result.name)
        assert_same_records(back.trials, result.trials)
        assert back.best.id == result.best.id
    # kinds kept: an int step stays an int, a half step a float, a numpy number a float
    history = lk.load_sweep(path, "uneven").trials[0].history
    assert [type(s) for s, _, _ in history] in ([int] * 4, [float, float, float, float])
    assert all(type(v) is float for _, m, _ in history for v in m.values())
    # an ended trial is one row of packed reports
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT sweep, trial, COUNT(*) FROM report_packs "
                            "GROUP BY sweep, trial").fetchall()
    conn.close()
    assert rows and all(n == 1 for _, _, n in rows)


# -- older stores: the same read before and after the migration -----------------------------------


@pytest.mark.parametrize("version, names", [(1, ["asha", "mixed"]), (0, ["asha", "failing"])])
def test_an_old_store_reads_the_same_before_and_after_its_migration(tmp_path, version, names):
    path = tmp_path / "old.db"
    shutil.copy(os.path.join(DATA, f"store_v{version}.db"), path)
    before = {name: _records(path, name) for name in names}   # read-only: not migrated
    with sqlite3.connect(path) as conn:
        legacy = conn.execute("SELECT COUNT(*) FROM reports").fetchone()[0]
    conn.close()
    assert legacy and all(before.values())
    Store(path).close()   # opened to write: migrated
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
        assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'reports'").fetchall()
        packed = conn.execute("SELECT SUM(n) FROM report_packs").fetchone()[0]
    finally:
        conn.close()
    assert packed == legacy
    for name in names:
        assert_same_records(_records(path, name), before[name])
        # and as the version 1 code read it: a JSON document a report
    assert sum(len(r.history) for rs in before.values() for r in rs) == legacy


def test_a_version_1_store_read_as_it_was_written(tmp_path):
    """The legacy read is the JSON of each row: checked against the rows themselves."""
    path = tmp_path / "old.db"
    shutil.copy(os.path.join(DATA, "store_v1.db"), path)
    import json
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT trial, step, metrics, time FROM reports "
                            "WHERE sweep = 'mixed' ORDER BY rowid").fetchall()
    conn.close()
    Store(path).close()
    history = {r.id: list(r.history) for r in _records(path, "mixed")}
    expected: dict = {}
    for trial, step, metrics, t in rows:
        expected.setdefault(trial, []).append((step, json.loads(metrics), t))
    assert same(history, expected)
    assert any(isinstance(s, float) for h in history.values() for s, _, _ in h)
    assert any(math.isnan(m["loss"]) for h in history.values() for _, m, _ in h)


def test_a_reader_of_an_old_store_goes_on_reading_once_another_opener_migrated_it(tmp_path):
    path = tmp_path / "old.db"
    shutil.copy(os.path.join(DATA, "store_v1.db"), path)
    reader = Store(path, readonly=True)   # a dashboard watching the store, say
    try:
        before = reader.records("asha")
        Store(path).close()               # a resumed sweep opens it to write: migrated
        assert_same_records(reader.records("asha"), before)
        assert reader.last_report_time("asha") == max(t for r in before for _, _, t in r.history)
    finally:
        reader.close()


def test_a_migrated_store_resumes_running_only_new_trials(tmp_path):
    path = tmp_path / "old.db"
    shutil.copy(os.path.join(DATA, "store_v1.db"), path)
    before = _records(path, "asha")
    result = lk.sweep(F.curve, {"q": lk.uniform(0.5, 1.0), "steps": 5}, trials=8, metric="acc",
                      mode="max", early_stop=lk.ASHA(min_steps=1, reduction=2), store=path,
                      name="asha", resume=True)
    assert [t.attempts for t in result.trials] == [1] * 8
    assert_same_records(_records(path, "asha")[:6], before)   # the old six untouched
    assert [len(t.history) for t in _records(path, "asha")[6:]] == [
        len(t.history) for t in result.trials[6:]]


# -- the writer: a row a trial and commit, one a trial once it ended ------------------------------


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "w.db")
    s.create_sweep("s", "{}", "loss", "min", 0, {})
    s.add_trials("s", [(0, {}), (1, {})])
    yield s
    s.close()


def _packs(store) -> dict:
    out: dict = {}
    for row in store.read("SELECT trial, n, data FROM report_packs ORDER BY rowid"):
        out.setdefault(row["trial"], []).append(row["n"])
    return out


def test_a_commit_packs_each_trials_reports_into_one_row_and_an_end_into_one(store):
    given = []
    for k in range(50):   # one report a call, two trials interleaved, as slots report
        for trial in (0, 1):
            given.append([(k, {"loss": 1.0 / (k + 1)}, float(k))])
            store.trial_reports("s", trial, 1, given[-1], (1.0 / (k + 1), 1.0 / (k + 1), k))
    store.flush()
    assert _packs(store) == {0: [50], 1: [50]}
    assert all(len(reports) == 1 for reports in given)   # the callers' lists left alone
    store.trial_reports("s", 0, 1, [(50, {"loss": 0.01}, 50.0)], (0.01, 0.01, 50))
    store.flush()
    assert _packs(store) == {0: [50, 1], 1: [50]}
    store.trial_finished("s", 0, "completed", {"loss": 0.01}, 0.01, 0.01, 50, ended=51.0)
    store.flush()
    assert _packs(store) == {1: [50], 0: [51]}
    reports = store.reports("s")
    assert [s for s, _, _ in reports[0]] == list(range(51))
    assert reports[1][-1] == (49, {"loss": 0.02}, 49.0)
    trial = store.trials("s")[0]
    assert (trial["value"], trial["step"], trial["status"]) == (0.01, 50, "completed")


def test_reports_of_two_attempts_keep_their_attempt(store):
    store.trial_reports("s", 0, 1, [(0, {"loss": 1.0}, 0.0)])
    store.trial_reports("s", 0, 2, [(1, {"loss": 0.5}, 1.0)])   # a restart, same commit
    store.flush()
    assert _packs(store) == {0: [1, 1]}
    store.trial_finished("s", 0, "completed", None, 0.5, 0.5, 1)
    store.flush()
    data = store.read("SELECT data FROM report_packs WHERE trial = 0")[0]["data"]
    assert unpack(data, attempts=True) == ([(0, {"loss": 1.0}, 0.0), (1, {"loss": 0.5}, 1.0)],
                                           [1, 2])


def test_dropped_reports_are_forgotten_across_packs_and_new_ones_follow(store):
    store.trial_reports("s", 0, 1, [(k, {"loss": 1.0}, 0.0) for k in range(6)])
    store.flush()
    store.trial_reports("s", 0, 1, [(k, {"loss": 1.0}, 0.0) for k in range(6, 10)])
    store.drop_reports("s", 0, 4)   # in the same commit as the reports it drops
    store.trial_reports("s", 0, 2, [(k, {"loss": 2.0}, 1.0) for k in range(4, 7)])
    store.flush()
    assert [(s, m["loss"]) for s, m, _ in store.reports("s")[0]] == [
        (0, 1.0), (1, 1.0), (2, 1.0), (3, 1.0), (4, 2.0), (5, 2.0), (6, 2.0)]
    store.drop_reports("s", 0, 0)
    store.flush()
    assert store.reports("s") == {} and _packs(store) == {}


def test_a_rule_state_is_taken_once_a_commit_and_a_last_time_at_close(tmp_path):
    store = Store(tmp_path / "r.db")
    store.create_sweep("s", "{}", "loss", "min", 0, {})
    state, taken, lock = {"n": 0}, [], threading.Lock()

    def take():
        with lock:
            taken.append(state["n"])
            return {"n": state["n"]} if state["n"] != (taken[-2] if len(taken) > 1 else None) \
                else None
    store.keep_rule_state("s", take)
    began = time.monotonic()
    while time.monotonic() - began < 0.6:   # a thousand changes between a few commits
        with lock:
            state["n"] += 1
    with lock:
        final = state["n"]
    store.close()
    assert final > 1000 and len(taken) < 20
    assert Store(tmp_path / "r.db", readonly=True).rule_state("s") == {"n": final}


def test_close_lets_a_slow_commit_end_before_the_connection_closes(tmp_path):
    store = Store(tmp_path / "slow.db")
    store.create_sweep("s", "{}", "loss", "min", 0, {})

    def slow(conn):
        time.sleep(0.5)
        conn.execute("UPDATE sweeps SET seed = 9")
    store.call(slow)
    store.close()
    store.check()
    assert Store(tmp_path / "slow.db", readonly=True).sweep("s")["seed"] == 9


# -- the pack format -----------------------------------------------------------------------------


def _json_round_trip(reports):
    """What a JSON row a report (schema 1) gave back."""
    import json
    return [(s, json.loads(to_json(m)), t) for s, m, t in reports]


@pytest.mark.parametrize("reports", [
    [(k, {"loss": 1 / (k + 1)}, 1e9 + k / 7) for k in range(30)],
    [(0, {"a": 1, "b": -(2 ** 40)}, 0), (1, {"a": 2 ** 70, "b": 3}, 1.5)],   # big ints: JSON
    [(0.5, {"x": float("nan"), "y": float("inf"), "z": -0.0}, 1.0), (1, {"x": -1.0}, 2.0)],
    [(0, {"flag": True, "name": "a", "none": None, "list": [1, 2]}, 0.0)],
    [(0, {"f32": np.float32(0.25), "i64": np.int64(7), "f64": np.float64(0.1)}, 0.0)],
    [(0, {}, 0.0), (1, {"loss": 1.0}, 1.0), (2, {"loss": 0.5, "acc": 0.9}, 2.0)],
    [(k, {"b": 1.0, "a": 2.0}, 0.0) for k in range(-200, 200, 7)],   # key order, negative steps
])
def test_packed_reports_read_back_as_json_gave_them(reports):
    blob = pack(reports, [1] * len(reports), plain)
    assert same(unpack(blob), _json_round_trip(reports))
    assert unpack(blob, attempts=True)[1] == [1] * len(reports)
    assert same(unpack(blob), unpack(blob))   # read twice (a header kept): the same


def test_a_float_report_costs_about_seventeen_bytes_packed():
    reports = [(k, {"loss": 1 / (k + 1)}, 1.7e9 + k) for k in range(30)]
    blob = pack(reports, [1] * 30, plain)
    assert 30 * 17 <= len(blob) <= 30 * 17 + 120   # step 1 byte, time and value 8 each
    with pytest.raises(ValueError, match="not a packed"):
        unpack(b"\x02" + blob[1:])
    assert blob[:1] == report_pack.FORMAT
