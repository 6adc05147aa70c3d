"""``labkit sweeps STORE``: a store's sweeps listed from the command line, read-only.

Run as the user runs it (``python -m labkit sweeps ...``, a subprocess) on
stores written by real sweeps: one that ended, one a sweep in another
process is writing, one on a read-only mount; and on files that are no store.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

import labkit as lk
from labkit.experiments.store.database import Store
from tests.conftest import ROOT
from tests.experiments import functions as F

LABKIT = [sys.executable, "-m", "labkit"]
ENV = {**os.environ, "PYTHONPATH": ROOT}


def sweeps(*args, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([*LABKIT, "sweeps", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=ENV)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A store with an ASHA sweep and a sweep whose trials partly fail; and their results."""
    path = tmp_path_factory.mktemp("cli-sweeps") / "experiments.db"
    asha = lk.sweep(F.curve, {"q": lk.uniform(0.5, 1.0), "steps": 9}, trials=9, metric="acc",
                    mode="max", seed=3, early_stop=lk.ASHA(min_steps=1, reduction=3),
                    store=path, name="asha-search")
    failing = lk.sweep(F.failing, {"x": lk.uniform(0, 1)}, trials=6, metric="loss", mode="min",
                       seed=5, store=path, name="failing")
    return path, {"asha-search": asha, "failing": failing}


def test_the_table_lists_each_sweep_with_its_counts_best_and_times(written):
    path, results = written
    done = sweeps(path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = done.stdout.rstrip("\n").split("\n")
    assert len(lines) == 3, done.stdout
    head = lines[0]
    for word in ("SWEEP", "METRIC", "TRIALS", "COMPLETED", "STOPPED", "FAILED", "BEST (TRIAL)",
                 "STARTED", "LAST WRITTEN"):
        assert word in head
    # aligned: every column starts where its header does (dates, best) or ends there (counts)
    for line in lines[1:]:
        assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", line[head.index("STARTED"):])
        assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", line[head.index("LAST WRITTEN"):])
        assert line[head.index("BEST (TRIAL)") - 1] == " "
        end = head.index("TRIALS") + len("TRIALS")
        assert line[end - 1].isdigit() and line[end] == " "
    for line, (name, result) in zip(lines[1:], results.items(), strict=True):
        cells = re.split(r"\s{2,}", line)
        counts = result.counts()
        assert cells[0] == name and cells[1] == f"{result.metric} ({result.mode})"
        assert int(cells[2]) == len(result.trials)
        for status in ("completed", "stopped", "failed"):
            assert int(cells[3 + ["completed", "stopped", "failed"].index(status)]) == \
                counts.get(status, 0)
        assert cells[6] == f"{result.best.value:.6g} ({result.best.id})"


def test_json_says_the_same_in_full(written):
    path, results = written
    done = sweeps(path, "--json")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert [s["name"] for s in listed] == list(results)
    for summary, result in zip(listed, results.values(), strict=True):
        assert summary["counts"] == result.counts()
        assert summary["trials"] == len(result.trials)
        assert (summary["metric"], summary["mode"]) == (result.metric, result.mode)
        assert summary["best"] == {"trial": result.best.id, "value": result.best.value}
        newest = max(t for r in result.trials for t in (r.started, r.ended) if t is not None)
        assert summary["started"] <= newest <= summary["last_written"] <= time.time()


_WRITER = """
import labkit as lk
from tests.experiments import functions as F

if __name__ == "__main__":
    lk.sweep(F.slow_steps, {{"x": lk.uniform(0, 1), "steps": 3000}}, trials=3, metric="loss",
             mode="min", store={store!r}, name="live")
"""


def test_a_store_a_running_sweep_writes_lists_as_it_is(tmp_path):
    store = tmp_path / "live.db"
    script = tmp_path / "writer.py"
    script.write_text(textwrap.dedent(_WRITER.format(store=str(store))))
    child = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, env=ENV,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, seen = time.monotonic() + 90, None
        while time.monotonic() < deadline and child.poll() is None:
            if store.exists():
                done = sweeps(store, "--json")
                if done.returncode == 0:
                    listed = json.loads(done.stdout)
                    if listed and listed[0]["counts"].get("running") == 1:
                        seen = listed[0]
                        break
                else:   # only while the file is being made: never a traceback
                    assert "Traceback" not in done.stderr, done.stderr
            time.sleep(0.1)
        assert seen is not None, "the running sweep was never listed as running"
        assert seen["name"] == "live" and seen["counts"] == {"running": 1, "pending": 2}
        assert child.poll() is None   # the listing did not stop the writer
        later = json.loads(sweeps(store, "--json").stdout)[0]
        assert later["last_written"] >= seen["last_written"]
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert sweeps(store).returncode == 0   # a killed writer's store (its WAL left) lists too


_READ_ONLY = """
set -e
mount --bind {folder} {folder}
mount -o remount,bind,ro {folder}
{python} -m labkit sweeps {store}
touch {folder}/probe 2>/dev/null && echo writable || echo "read-only folder"
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare for a read-only mount")
def test_a_store_on_a_read_only_folder_lists(tmp_path):
    folder = tmp_path / "archive"
    folder.mkdir()
    lk.sweep(F.quadratic, {"x": lk.uniform(0, 1)}, trials=3, metric="loss", mode="min",
             store=folder / "s.db", name="archived")
    before = sorted(os.listdir(folder))
    if subprocess.run(["unshare", "-rm", "sh", "-c", "true"], capture_output=True).returncode:
        pytest.skip("user namespaces are not allowed here")
    script = _READ_ONLY.format(folder=folder, python=sys.executable, store=folder / "s.db")
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env=ENV)
    assert done.returncode == 0, done.stderr
    assert "archived" in done.stdout and "read-only folder" in done.stdout
    assert re.search(r"archived\s+loss \(min\)\s+3\s+3\s", done.stdout), done.stdout
    assert sorted(os.listdir(folder)) == before


@pytest.mark.parametrize("version", [0, 1])
def test_an_older_store_lists_as_it_is_and_is_not_migrated(tmp_path, version):
    path = tmp_path / "old.db"
    shutil.copy(os.path.join(ROOT, "tests", "experiments", "data", f"store_v{version}.db"), path)
    done = sweeps(path, "--json")
    assert done.returncode == 0, done.stderr
    listed = {s["name"]: s for s in json.loads(done.stdout)}
    assert listed["asha"]["counts"] == {"completed": 5, "stopped": 1}
    assert listed["asha"]["best"]["trial"] == 4
    assert listed["asha"]["last_written"] >= listed["asha"]["started"]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == version
    conn.close()


def _newer(path):
    Store(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    conn.close()


def _foreign(path):
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE runs (x)")
    conn.close()


@pytest.mark.parametrize("kind, words", [
    ("missing", "does not exist"),
    ("folder", "a folder, not a sweep store"),
    ("corrupt", "cannot read the sweep store"),
    ("foreign", "not a labkit sweep store"),
    ("newer", "newer than this labkit reads"),
])
def test_a_store_that_cannot_be_listed_is_one_line_naming_it(tmp_path, kind, words):
    path = tmp_path / "sweeps.db"
    if kind == "folder":
        path.mkdir()
    elif kind == "corrupt":
        path.write_bytes(b"SQLite format 3\0" + os.urandom(8000))
    elif kind == "foreign":
        _foreign(path)
    elif kind == "newer":
        _newer(path)
    done = sweeps(path)
    assert done.returncode == 1 and done.stdout == ""
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("labkit sweeps: ") and words in done.stderr, done.stderr
    assert str(path) in done.stderr
    assert done.stderr.count("\n") == 1


def test_an_empty_store_lists_no_sweeps_and_help_names_the_options(tmp_path):
    path = tmp_path / "empty.db"
    Store(path).close()
    done = sweeps(path)
    assert done.returncode == 0 and done.stdout == f"no sweeps in {path}\n"
    assert json.loads(sweeps(path, "--json").stdout) == []
    helped = sweeps("--help")
    assert helped.returncode == 0 and "STORE" in helped.stdout and "--json" in helped.stdout
    assert "sweeps" in subprocess.run([*LABKIT, "--help"], capture_output=True, text=True,
                                      timeout=60, cwd=ROOT, env=ENV).stdout
    usage = sweeps()
    assert usage.returncode == 2 and "STORE" in usage.stderr


def _store_of_one_sweep(path):
    lk.sweep(F.quadratic, {"x": lk.uniform(0, 1)}, trials=2, metric="loss", mode="min",
             seed=1, store=path, name="older")


def _add_a_sweep(conn, name):
    conn.execute("INSERT INTO sweeps (name, space, metric, mode, seed, settings, created, "
                 "updated) VALUES (?, '{}', 'loss', 'min', 0, '{}', ?, ?)",
                 (name, time.time(), time.time()))


@pytest.mark.parametrize("how", ["rollback journal", "exclusive locking mode"])
def test_a_store_a_writer_holds_locked_is_one_line_saying_so_not_a_partial_list(tmp_path, how):
    path = tmp_path / "locked.db"
    _store_of_one_sweep(path)
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        if how == "rollback journal":
            writer.execute("PRAGMA journal_mode=DELETE").fetchall()
        else:
            writer.execute("PRAGMA locking_mode=EXCLUSIVE").fetchall()
        writer.execute("BEGIN EXCLUSIVE")
        _add_a_sweep(writer, "newer")
        done = sweeps(path)
        assert done.returncode == 1 and done.stdout == "", done.stdout
        assert done.stderr.startswith("labkit sweeps: ") and "Traceback" not in done.stderr
        assert "locked by a writer" in done.stderr and str(path) in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1
        writer.execute("COMMIT")
        writer.execute("PRAGMA locking_mode=NORMAL").fetchall()
        writer.execute("SELECT 1 FROM sweeps").fetchall()  # releases the exclusive lock
    finally:
        writer.close()
    listed = json.loads(sweeps(path, "--json").stdout)
    assert [s["name"] for s in listed] == ["older", "newer"]


def test_a_writer_in_a_transaction_never_blocks_the_listing_of_a_wal_store(tmp_path):
    path = tmp_path / "wal.db"
    _store_of_one_sweep(path)
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        assert writer.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        writer.execute("BEGIN EXCLUSIVE")
        _add_a_sweep(writer, "newer")
        done = sweeps(path, "--json")   # what is committed: the sweep being written is not yet
        assert done.returncode == 0, done.stderr
        assert [s["name"] for s in json.loads(done.stdout)] == ["older"]
        writer.execute("COMMIT")
    finally:
        writer.close()
    assert [s["name"] for s in json.loads(sweeps(path, "--json").stdout)] == ["older", "newer"]


def test_control_characters_in_a_name_are_escaped_one_row_a_sweep(tmp_path):
    path = tmp_path / "names.db"
    evil = "red\x1b[31m\x1b]0;title\x07bell\nsplit\r\tend"
    lk.sweep(F.quadratic, {"x": lk.uniform(0, 1)}, trials=1, metric="loss", mode="min",
             seed=1, store=path, name=evil)
    lk.sweep(F.quadratic, {"x": lk.uniform(0, 1)}, trials=1, metric="loss", mode="min",
             seed=1, store=path, name="plain")
    done = sweeps(path)
    assert done.returncode == 0, done.stderr
    assert not any(c in done.stdout for c in "\x1b\x07\r\t"), repr(done.stdout)
    lines = done.stdout.rstrip("\n").split("\n")
    assert len(lines) == 3, done.stdout   # the head and one row a sweep
    assert lines[1].startswith(r"red\x1b[31m\x1b]0;title\x07bell\nsplit\r\tend  "), lines[1]
    assert lines[2].startswith("plain ")
    listed = json.loads(sweeps(path, "--json").stdout)   # JSON escapes them itself: exact
    assert [s["name"] for s in listed] == [evil, "plain"]
