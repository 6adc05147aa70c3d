"""The store's schema version: today's stores read back, older ones migrate, newer ones refused."""

from __future__ import annotations

import os
import shutil
import sqlite3

import pytest

import labkit as lk
from labkit.experiments.store.database import SCHEMA_VERSION, Store
from tests.experiments import functions as F

OLD = os.path.join(os.path.dirname(__file__), "data", "store_v0.db")


@pytest.fixture
def old_store(tmp_path):
    """A copy of a store written before the schema had a version (see data/make_store_v0.py)."""
    path = tmp_path / "old.db"
    shutil.copy(OLD, path)
    return path


def _version(path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


def test_the_committed_store_is_version_0_and_reads_back(old_store):
    assert _version(old_store) == 0
    result = lk.load_sweep(old_store, "asha")
    assert result.counts() == {"completed": 5, "stopped": 1}
    assert result.best.id == 4 and round(result.best.value, 6) == 0.854274
    stopped = result.by_status("stopped")[0]
    assert stopped.id == 2 and stopped.reason.startswith("ASHA: at step 1")
    assert all(len(t.history) == 5 for t in result.trials if t.status == "completed")
    assert lk.load_sweep(old_store, "failing").counts() == {"failed": 3, "completed": 1}
    assert _version(old_store) == 0  # reading migrates nothing


def test_a_new_store_carries_the_current_version(tmp_path):
    Store(tmp_path / "new.db").close()
    assert _version(tmp_path / "new.db") == SCHEMA_VERSION == 5  # 5: objectives (issue 48)


def test_an_old_store_opened_to_write_is_migrated_and_resumes(old_store):
    result = lk.sweep(F.curve, {"q": lk.uniform(0.5, 1.0), "steps": 5}, trials=8, metric="acc",
                      mode="max", early_stop=lk.ASHA(min_steps=1, reduction=2),
                      store=old_store, name="asha", resume=True)
    assert _version(old_store) == SCHEMA_VERSION
    assert len(result.trials) == 8 and result.trials[2].status == "stopped"
    assert [t.attempts for t in result.trials[:6]] == [1] * 6     # none of the old ran again
    store = Store(old_store, readonly=True)
    try:
        kept = store.rule_state("asha")   # the rule's records now kept for the next resume
    finally:
        store.close()
    assert kept["rule"] == "ASHA(min_steps=1, reduction=2)"
    assert sorted(int(t) for t in kept["state"]["rungs"][0]) == list(range(8))


def test_a_store_of_a_newer_version_is_an_input_error_naming_the_file(old_store):
    conn = sqlite3.connect(old_store)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    for open_it in (lambda: Store(old_store), lambda: lk.load_sweep(old_store, "asha")):
        with pytest.raises(lk.InputError, match="newer") as info:
            open_it()
        assert str(old_store) in str(info.value)
