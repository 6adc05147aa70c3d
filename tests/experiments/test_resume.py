"""Resuming: a kernel SIGKILLed mid-sweep loses nothing that completed; sweeps grow; load_sweep."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import labkit as lk
from labkit.checkpoints import CheckpointLocation
from labkit.experiments.store.checkpoints import decode
from labkit.experiments.store.database import Store
from tests.experiments import functions as f

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SWEEP = """
import labkit as lk
from tests.experiments import functions as f

def space(folder):
    return {{"x": lk.uniform(0.5, 1.5), "steps": 6, "pause": 0.08, "folder": folder}}

if __name__ == "__main__":
    with lk.DaskScheduler(mode="auto", n_workers=1, threads_per_worker=2) as s:
        lk.sweep(f.marked, space({folder!r}), trials=8, metric="score", mode="max", seed=11,
                 scheduler=s, store={store!r}, name="killed")
"""


def space(folder):
    return {"x": lk.uniform(0.5, 1.5), "steps": 6, "pause": 0.08, "folder": folder}


def runs(folder) -> dict:
    """``{trial: [first step of each run]}`` from the marks ``marked`` leaves."""
    out: dict = {}
    for name in sorted(os.listdir(folder), key=lambda n: int(n.split("-")[4])):
        _, trial, step, _, _ = name.split("-")
        out.setdefault(int(trial), []).append(int(step))
    return out


def plain(result):
    return [(t.id, t.config, t.status, t.metrics, [(s, m) for s, m, _ in t.history])
            for t in result.trials]


def test_a_kernel_killed_mid_sweep_resumes_without_running_a_completed_trial_again(tmp_path):
    folder, store = tmp_path / "marks", str(tmp_path / "sweeps.db")
    folder.mkdir()
    script = tmp_path / "sweep.py"
    script.write_text(textwrap.dedent(SWEEP.format(folder=str(folder), store=store)))
    env = dict(os.environ, PYTHONPATH=ROOT)
    child = subprocess.Popen([sys.executable, str(script)], env=env, cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        before, killed_at = _kill_mid_sweep(child, store)
    finally:
        child.kill()
        child.wait()
    with _reading(store) as read:   # at most the last second of reports was lost
        last = read.last_report_time("killed")
    assert killed_at - last < 1.0
    completed = {t["id"] for t in before if t["status"] == "completed"}
    interrupted = {t["id"] for t in before if t["status"] == "running"}
    with _reading(store) as read:
        # the step each goes on from, read where the trial wrote it (the store keeps a reference)
        location = CheckpointLocation(store + "-checkpoints")
        checkpointed = {t: decode(location.read(read.checkpoint("killed", t)[0]))
                        for t in interrupted}
    assert completed and interrupted and all(checkpointed.values())

    with lk.DaskScheduler(mode="auto", n_workers=1, threads_per_worker=2) as s:
        resumed = lk.sweep(f.marked, space(str(folder)), trials=8, metric="score", mode="max",
                           seed=11, scheduler=s, store=store, name="killed", resume=True)
        marks = runs(folder)
        assert all(len(marks[t]) == 1 for t in completed)          # no completed trial ran again
        for t in interrupted:                                      # each went on from its checkpoint
            assert len(marks[t]) == 2 and marks[t][1] == checkpointed[t] > 0
        assert resumed.counts() == {"completed": 8}

        whole = lk.sweep(f.marked, space(str(folder)), trials=8, metric="score", mode="max",
                         seed=11, scheduler=s, store=store, name="whole")
    assert plain(resumed) == plain(whole)                           # as if never interrupted
    assert plain(lk.load_sweep(store, "killed")) == plain(whole)


def _kill_mid_sweep(child, store: str) -> list:
    """SIGKILL ``child`` once 3 trials completed and 2 run with a checkpoint; the trials then."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert child.poll() is None, "the sweep ended before it could be killed"
        if os.path.exists(store):
            try:
                with _reading(store) as read:
                    trials = read.trials("killed")
                    held = read.read("SELECT trial FROM checkpoints WHERE sweep = 'killed'")
            except lk.StorageError:   # the tables are being made
                trials, held = [], []
            done = [t for t in trials if t["status"] == "completed"]
            running = [t for t in trials if t["status"] == "running"
                       and t["id"] in {h["trial"] for h in held}]
            if len(done) >= 3 and len(running) == 2:
                os.kill(child.pid, signal.SIGKILL)
                killed_at = time.time()
                child.wait()
                with _reading(store) as read:
                    return read.trials("killed"), killed_at
        time.sleep(0.05)
    raise AssertionError("the sweep never reached the moment to kill it")


@contextlib.contextmanager
def _reading(path):
    store = Store(path, readonly=True)
    try:
        yield store
    finally:
        store.close()


def test_a_resumed_sweep_with_more_trials_runs_only_the_new_ones(tmp_path):
    store, folder = tmp_path / "s.db", tmp_path / "marks"
    folder.mkdir()
    kw = dict(metric="score", mode="max", seed=5, store=store, name="grow")
    space_ = {"x": lk.uniform(0, 1), "steps": 2, "pause": 0.0, "folder": str(folder)}
    first = lk.sweep(f.marked, space_, trials=3, **kw)
    grown = lk.sweep(f.marked, space_, trials=5, resume=True, **kw)
    assert [t.config for t in grown.trials[:3]] == [t.config for t in first.trials]
    assert sorted(runs(folder)) == [0, 1, 2, 3, 4] and all(len(v) == 1
                                                           for v in runs(folder).values())
    more = grown.extend(2)
    assert len(more.trials) == 7 and more.counts() == {"completed": 7}
    again = lk.load_sweep(store, "grow").extend(1, f.marked)   # a new kernel: give fn
    assert len(again.trials) == 8 and all(len(v) == 1 for v in runs(folder).values())
    # the configurations are those a sweep of 8 trials would have drawn from the start
    assert [t.config for t in again.trials] == [t.config for t in lk.sweep(
        f.marked, space_, trials=8, metric="score", mode="max", seed=5, store=None).trials]


def test_a_name_in_the_store_needs_resume_and_the_same_space(tmp_path):
    store = tmp_path / "s.db"
    lk.sweep(f.quadratic, {"x": lk.uniform(0, 1)}, trials=2, metric="loss", mode="min",
             store=store, name="n")
    with pytest.raises(lk.InputError, match="resume=True") as info:
        lk.sweep(f.quadratic, {"x": lk.uniform(0, 1)}, trials=2, metric="loss", mode="min",
                 store=store, name="n")
    assert info.value.where["argument"] == "name"
    with pytest.raises(lk.InputError, match="another space") as info:
        lk.sweep(f.quadratic, {"x": lk.uniform(0, 2)}, trials=2, metric="loss", mode="min",
                 store=store, name="n", resume=True)
    assert info.value.where["argument"] == "space"
    with pytest.raises(lk.InputError, match="mode='min'"):
        lk.sweep(f.quadratic, {"x": lk.uniform(0, 1)}, trials=2, metric="loss", mode="max",
                 store=store, name="n", resume=True)
    again = lk.sweep(f.quadratic, {"x": lk.uniform(0, 1)}, trials=2, metric="loss", mode="min",
                     store=store, name="n", resume=True)
    assert again.counts() == {"completed": 2}


def test_load_sweep_in_a_new_kernel_reads_the_same_result(tmp_path):
    store = tmp_path / "s.db"
    result = lk.sweep(f.failing, {"x": lk.uniform(0, 1)}, trials=6, metric="loss", mode="min",
                      seed=1, store=store, name="read")
    code = ("import labkit as lk, json, sys\n"
            f"r = lk.load_sweep({str(store)!r}, 'read')\n"
            "print(json.dumps([r.best.id, r.table(sort=True), r.counts()]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    assert out.returncode == 0, out.stderr
    import json
    best, table, counts = json.loads(out.stdout)
    assert best == result.best.id and counts == result.counts()
    assert table == json.loads(json.dumps(result.table(sort=True)))


def test_load_sweep_refuses_what_is_not_there(tmp_path):
    with pytest.raises(lk.InputError, match="no sweep store"):
        lk.load_sweep(tmp_path / "none.db")
    lk.sweep(f.quadratic, [{"x": 0.1}], metric="loss", mode="min", store=tmp_path / "s.db",
             name="only")
    with pytest.raises(lk.InputError, match="holds no sweep named 'other'.*'only'"):
        lk.load_sweep(tmp_path / "s.db", "other")
    assert lk.load_sweep(tmp_path / "s.db").name == "only"
