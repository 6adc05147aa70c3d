"""``labkit dashboard --store STORE`` on stores it cannot serve: one line naming why, as ``labkit sweeps``.

Run as the user runs it (``python -m labkit ...``, a subprocess): a folder, a
missing file, a store holding a trial of a status this labkit does not know,
a port another program holds.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys

import pytest

import labkit as lk
from tests.conftest import ROOT
from tests.experiments import functions as F

LABKIT = [sys.executable, "-m", "labkit"]
ENV = {**os.environ, "PYTHONPATH": ROOT}


def labkit(*args) -> subprocess.CompletedProcess:
    return subprocess.run([*LABKIT, *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=ENV)


def _one_line(done: subprocess.CompletedProcess, prefix: str, *words: str) -> None:
    assert done.stdout == "" and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(prefix) and done.stderr.count("\n") == 1, done.stderr
    for word in words:
        assert word in done.stderr, (word, done.stderr)


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "s.db"
    lk.sweep(F.quadratic, {"x": lk.uniform(0, 1)}, trials=2, metric="loss", mode="min", seed=1,
             store=path, name="odd")
    return path


@pytest.mark.parametrize("what, words", [("folder", "a folder, not a sweep store"),
                                          ("missing", "the file does not exist")])
def test_a_folder_or_a_missing_store_is_one_line_and_status_1_as_labkit_sweeps_says(
        tmp_path, what, words):
    path = tmp_path / "sweeps.db"
    if what == "folder":
        path.mkdir()
    served = labkit("dashboard", "--store", path)
    listed = labkit("sweeps", path)
    assert served.returncode == listed.returncode == 1
    _one_line(served, "labkit dashboard: --store: ", words, str(path))
    _one_line(listed, "labkit sweeps: ", words, str(path))


def test_a_trial_of_an_unknown_status_is_a_storage_error_naming_it_not_a_traceback(store):
    with sqlite3.connect(store) as conn:
        conn.execute("UPDATE trials SET status = 'zombie' WHERE id = 1")
    conn.close()
    with pytest.raises(lk.StorageError) as info:
        lk.load_sweep(store, "odd")
    assert info.value.where == {"sweep": "odd", "trial": 1, "path": str(store)}
    assert "'zombie'" in str(info.value)
    served = labkit("dashboard", "--store", store)
    assert served.returncode == 1
    _one_line(served, "labkit dashboard: --store: ", "'zombie'", "trial 1", "'odd'", str(store))


def test_a_port_in_use_is_said_of_port_not_of_the_store(store):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        served = labkit("dashboard", "--store", store, "--port", port)
    assert served.returncode != 0
    _one_line(served, "labkit dashboard: --port: ", str(port))
