"""The sweep store: WAL, batched commits within a fraction of a second, checkpoints, errors."""

from __future__ import annotations

import os
import sqlite3
import time

import numpy as np
import pytest

import labkit as lk
from labkit.experiments.store import checkpoints
from labkit.experiments.store.database import COMMIT_EVERY, Store


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "sweeps.db")
    yield s
    s.close()


def test_a_sweep_its_trials_and_reports_read_back_from_another_connection(store, tmp_path):
    store.create_sweep("s", '{"x": 1}', "loss", "min", 7, {"trials": 2})
    store.add_trials("s", [(0, {"x": 0.1}), (1, {"x": 0.2})])
    store.trial_started("s", 0, 1, "tcp://w:1", 100.0)
    store.trial_reports("s", 0, 1, [(0, {"loss": 2.0}, 101.0), (1, {"loss": 1.0}, 102.0)])
    store.trial_finished("s", 0, "completed", {"loss": 1.0}, 1.0, 1.0, 1, ended=103.0)
    store.trial_finished("s", 1, "failed", None, None, None, None, error="ValueError: x",
                         traceback="Traceback ...")
    store.flush()
    other = Store(tmp_path / "sweeps.db", readonly=True)
    try:
        assert other.sweep("s")["settings"] == {"trials": 2} and other.sweep("s")["seed"] == 7
        trials = other.trials("s")
        assert [(t["status"], t["worker"], t["metrics"]) for t in trials] == [
            ("completed", "tcp://w:1", {"loss": 1.0}), ("failed", None, None)]
        assert trials[1]["error"] == "ValueError: x" and trials[1]["traceback"]
        assert other.reports("s") == {0: [(0, {"loss": 2.0}, 101.0), (1, {"loss": 1.0}, 102.0)]}
    finally:
        other.close()


def test_the_store_is_a_wal_database(store):
    conn = sqlite3.connect(store.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_writes_are_committed_within_a_fraction_of_a_second_without_a_flush(store):
    store.create_sweep("s", "{}", "loss", "min", 0, {})
    store.add_trials("s", [(0, {})])
    store.trial_reports("s", 0, 0, [(k, {"loss": float(k)}, 0.0) for k in range(100)])
    time.sleep(COMMIT_EVERY + 0.4)
    assert len(Store(store.path, readonly=True).reports("s")[0]) == 100


def test_many_reports_cost_the_caller_next_to_nothing(store):
    store.create_sweep("s", "{}", "loss", "min", 0, {})
    store.add_trials("s", [(0, {})])
    each = []
    for r in range(5):  # the best of five rounds: one stall of another thread is no verdict
        began = time.perf_counter()
        for k in range(400 * r, 400 * (r + 1)):
            store.trial_reports("s", 0, 0, [(k, {"loss": 1.0}, 0.0)])
        each.append((time.perf_counter() - began) / 400)
    assert min(each) < 2e-4, each   # a queue put, never the disk
    store.flush()
    assert len(store.reports("s")[0]) == 2000


def test_dropped_reports_are_forgotten(store):
    store.create_sweep("s", "{}", "loss", "min", 0, {})
    store.add_trials("s", [(0, {})])
    store.trial_reports("s", 0, 0, [(k, {"loss": 1.0}, 0.0) for k in range(6)])
    store.drop_reports("s", 0, 3)
    store.flush()
    assert [r[0] for r in store.reports("s")[0]] == [0, 1, 2]


def test_the_store_keeps_references_and_a_newer_checkpoint_deletes_the_older(store, tmp_path):
    """Issue 46: the bytes go to the sweep's location; the store keeps where (nothing lost)."""
    import torch
    from labkit.checkpoints import CheckpointLocation
    from labkit.experiments.store.kept import Retained
    from labkit.experiments.trials.checkpoint_place import CheckpointPlace
    place = CheckpointPlace(CheckpointLocation(str(tmp_path / "ck")), "s")
    store.create_sweep("s", "{}", "loss", "min", 0, {})
    store.keep_checkpoints("s", Retained(place, "min", None, "loss"))
    model = torch.nn.Linear(300, 300)   # 360 KiB of weights
    first = place.location.write(place.key(1, 0, 1, 5), checkpoints.encode(
        {"model": model.state_dict(), "epoch": 5}), step=5)
    store.save_checkpoint("s", 1, 1, 5, first)
    store.flush()
    ref, step, seq = store.checkpoint("s", 1)
    assert (ref, step, seq) == (first, 5, 1)
    columns = store.read("SELECT data, path, size, digest FROM checkpoints")[0]
    assert columns["data"] is None and columns["path"] is None     # no bytes in the store
    assert (columns["size"], columns["digest"]) == (first.nbytes, first.digest)
    back = checkpoints.decode(place.location.read(ref))
    assert torch.equal(back["model"]["weight"], model.state_dict()["weight"])
    # a newer checkpoint replaces the row, and the older one is deleted (only the latest kept)
    second = place.location.write(place.key(1, 0, 2, 6), checkpoints.encode({"epoch": 6}), 6)
    store.save_checkpoint("s", 1, 2, 6, second)
    store.flush()
    assert not place.location.exists(first) and place.location.exists(second)
    assert checkpoints.decode(place.location.read(store.checkpoint("s", 1)[0]))["epoch"] == 6


def test_an_old_stores_inline_checkpoint_is_read_and_moved_to_the_location(store, tmp_path):
    """A store written before issue 46 kept small checkpoints inline: a resume still reads them."""
    from labkit.checkpoints import CheckpointLocation
    from labkit.experiments.store.kept import Retained
    from labkit.experiments.trials.checkpoint_place import CheckpointPlace
    store.create_sweep("s", "{}", "loss", "min", 0, {})
    old = checkpoints.encode({"epoch": 3, "w": np.arange(4)})
    store.put("INSERT INTO checkpoints (sweep, trial, seq, step, time, size, data, path) "
              "VALUES ('s', 0, 1, 3, 0.0, ?, ?, NULL)", (len(old), old))
    store.flush()
    place = CheckpointPlace(CheckpointLocation(str(tmp_path / "ck")), "s")
    store.keep_checkpoints("s", Retained(place, "min", None, "loss"))
    ref, step, seq = store.checkpoint("s", 0)
    assert (step, seq) == (3, 1) and place.owns(ref.key, 0)
    assert checkpoints.decode(place.location.read(ref))["w"].tolist() == [0, 1, 2, 3]
    store.flush()
    assert store.checkpoint("s", 0)[0] == ref      # moved once: the row now keeps the reference


def test_checkpoints_load_without_running_code():
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))
    with pytest.raises(lk.InputError, match="trial.checkpoint"):
        checkpoints.encode(Evil())


def test_a_store_in_memory_works_and_keeps_nothing(tmp_path):
    s = Store(None)
    s.create_sweep("m", "{}", "x", "max", 0, {})
    s.add_trials("m", [(0, {"a": 1})])
    s.flush()
    assert s.trials("m")[0]["config"] == {"a": 1} and s.path is None
    s.close()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("where", ["missing/dir/x.db", "."])
def test_a_store_that_cannot_be_written_is_a_storage_error_naming_the_path(tmp_path, where):
    path = tmp_path / where
    with pytest.raises(lk.StorageError) as info:
        Store(path)
    assert str(tmp_path) in str(info.value)


def test_a_full_disk_is_a_storage_error_at_once():
    from tests.disk import fill, tiny_disk
    with tiny_disk(256) as folder:
        filler = fill(folder)
        try:
            with pytest.raises(lk.StorageError):
                Store(os.path.join(folder, "sweeps.db"))
        finally:
            os.unlink(filler)


def test_a_store_on_a_read_only_disk_is_a_storage_error_at_once():
    import subprocess
    from tests.disk import tiny_disk
    with tiny_disk(512) as folder:
        path = os.path.join(folder, "sweeps.db")
        Store(path).close()
        done = subprocess.run(["mount", "-o", "remount,ro", folder], capture_output=True,
                              text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot remount read-only here ({done.stderr.strip()})")
        try:
            with pytest.raises(lk.StorageError, match="cannot be written") as info:
                Store(path)
            assert path in str(info.value)
            with pytest.raises(lk.StorageError):
                lk.sweep(lambda c, t: 1.0, [{"a": 1}], metric="m", mode="max", store=path)
        finally:
            subprocess.run(["mount", "-o", "remount,rw", folder], check=False)


def test_stores_opened_at_once_on_a_new_file_all_open(tmp_path):
    import threading
    for k in range(20):   # the switch to WAL raced ("database is locked") now and then
        path, barrier, errors = tmp_path / f"s{k}.db", threading.Barrier(4), []

        def open_it():
            barrier.wait()
            try:
                Store(path).close()
            except Exception as err:  # noqa: BLE001 - any is the failure shown
                errors.append(err)
        threads = [threading.Thread(target=open_it) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []


def test_a_sweeps_worker_names_are_kept_with_it_and_new_settings_keep_them(store, tmp_path):
    store.create_sweep("s", "{}", "loss", "min", 0, {"trials": 2})
    learned = iter([{"tcp://w:1": {"name": 0, "nthreads": 1}}, None,
                    {"tcp://w:2": {"name": "gpu-a", "nthreads": 2}}])
    store.keep_worker_names("s", lambda: next(learned, None))
    store.flush()
    store.update_sweep("s", {"trials": 3})  # add(n), a resume: new settings, the names kept
    store.flush()
    store.flush()
    other = Store(tmp_path / "sweeps.db", readonly=True)
    try:
        assert other.sweep("s")["settings"]["trials"] == 3
        assert other.workers("s") == {"tcp://w:1": {"name": 0, "nthreads": 1},
                                      "tcp://w:2": {"name": "gpu-a", "nthreads": 2}}
        assert other.workers() == {"s": other.workers("s")}
    finally:
        other.close()
    store.close()
    result = lk.load_sweep(tmp_path / "sweeps.db", "s")
    assert result.worker_names == {"tcp://w:1": 0, "tcp://w:2": "gpu-a"}
