"""Retention of a sweep's checkpoints (issue 46): each trial's latest, then the best keep_best."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import labkit as lk
from tests.experiments import checkpoint_functions as cf

CONFIGS = [{"x": x, "mb": 1, "epochs": 3} for x in (0.5, 0.1, 0.4, 0.2, 0.3)]


def _files(folder: str) -> dict:
    """``{trial: [file, ...]}`` of the checkpoint files under ``folder``."""
    out: dict = {}
    for where, _, names in os.walk(folder):
        for name in names:
            trial = int(os.path.basename(where).removeprefix("trial-"))
            out.setdefault(trial, []).append(os.path.join(where, name))
    return out


def test_keep_best_keeps_exactly_the_best_trials_last_checkpoints(tmp_path):
    store = tmp_path / "s.db"
    result = lk.sweep(cf.big_state, CONFIGS, metric="loss", mode="min", store=store, name="r",
                      keep_best=2)
    files = _files(f"{store}-checkpoints")
    assert sorted(files) == [1, 3] and all(len(f) == 1 for f in files.values())  # x=0.1, 0.2
    assert result.best.id == 1 and result.best.checkpoint()["epoch"] == 2
    assert result.trials[3].checkpoint()["x"] == 0.2
    with pytest.raises(lk.StorageError) as info:
        result.trials[0].checkpoint()
    assert "not kept" in str(info.value) and "keep_best=2" in str(info.value)
    listed = subprocess.run([sys.executable, "-m", "labkit", "sweeps", str(store), "--json"],
                            capture_output=True, text=True, timeout=60, check=True)
    kept = json.loads(listed.stdout)[0]["checkpoint_bytes"]
    assert kept == sum(os.path.getsize(f[0]) for f in files.values())
    table = subprocess.run([sys.executable, "-m", "labkit", "sweeps", str(store)],
                           capture_output=True, text=True, timeout=60, check=True).stdout
    assert "CHECKPOINTS" in table and "MiB" in table


def test_without_keep_best_each_trial_keeps_its_latest_and_older_ones_are_deleted(tmp_path):
    store = tmp_path / "s.db"
    lk.sweep(cf.big_state, CONFIGS[:3], metric="loss", mode="min", store=store, name="all")
    files = _files(f"{store}-checkpoints")
    assert sorted(files) == [0, 1, 2] and all(len(f) == 1 for f in files.values())
    loaded = lk.load_sweep(store, "all")
    assert [t.checkpoint()["epoch"] for t in loaded.trials] == [2, 2, 2]


def test_a_failed_trial_s_checkpoint_is_not_kept_and_says_why(tmp_path):
    out = tmp_path / "where.txt"
    configs = [{"x": 1.0, "out": str(out)}, {"x": 2.0, "out": str(out), "fail": True}]
    result = lk.sweep(cf.tells_its_location, configs, metric="loss", mode="min",
                      store=tmp_path / "s.db", keep_best=1)
    assert result.trials[0].checkpoint() == {"x": 1.0}
    with pytest.raises(lk.StorageError, match="the trial failed"):
        result.trials[1].checkpoint()


def test_keep_best_is_declared_with_the_sweep_s_other_arguments():
    with pytest.raises(lk.InputError, match="keep_best"):
        lk.sweep(cf.tells_its_location, [{"x": 1}], metric="loss", mode="min", store=None,
                 keep_best=0)
    with pytest.raises(lk.InputError, match="storage_options"):
        lk.sweep(cf.tells_its_location, [{"x": 1}], metric="loss", mode="min", store=None,
                 storage_options="anon")
