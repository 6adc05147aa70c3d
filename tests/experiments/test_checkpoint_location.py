"""Checkpoints written where the trial runs (issue 46): only a reference reaches the client.

Real worker processes (slots, and a Dask task a trial), a worker SIGKILLed under its trial,
a sweep killed and resumed in a new process, the temporary folder of ``store=None``, a
location a worker cannot use, and population-based training by reference.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import labkit as lk
from labkit.checkpoints import CheckpointRef
from labkit.experiments import launch
from labkit.experiments.engine import SweepEngine
from labkit.experiments.search.exploits import Turns
from tests.experiments import checkpoint_functions as cf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def two():
    """Two worker processes of its own (nannies restart a killed one)."""
    with lk.DaskScheduler(mode="processes", n_workers=2, threads_per_worker=1) as s:
        yield s


def _seen_by_engine(monkeypatch) -> list:
    """What the client's engine is handed for each checkpoint (spied, then passed on)."""
    seen: list = []
    checkpointed = SweepEngine.checkpointed

    def spy(self, trial, execution, step, ref):
        seen.append(ref)
        return checkpointed(self, trial, execution, step, ref)

    monkeypatch.setattr(SweepEngine, "checkpointed", spy)
    return seen


@pytest.mark.parametrize("slots", [True, False], ids=["slots", "tasks"])
def test_a_checkpoint_is_written_on_the_worker_and_only_its_reference_reaches_the_client(
    two, tmp_path, monkeypatch, slots
):
    monkeypatch.setattr(launch, "SLOTS", slots)  # False: a Dask task a trial (RemoteLauncher)
    seen = _seen_by_engine(monkeypatch)
    store = tmp_path / "s.db"
    result = lk.sweep(cf.big_state, [{"x": 0.1, "mb": 4, "epochs": 3}, {"x": 0.2, "mb": 4,
                      "epochs": 3}], metric="loss", mode="min", scheduler=two, store=store,
                      name="big")
    assert result.counts() == {"completed": 2}
    assert len(seen) == 6 and not any(isinstance(r, (bytes, bytearray)) for r in seen)
    refs = [r if isinstance(r, CheckpointRef) else CheckpointRef(**r) for r in seen]
    assert all(r.nbytes > 4 * 1024 * 1024 for r in refs)     # the state's size, not sent
    with sqlite3.connect(store) as conn:
        rows = conn.execute("SELECT data, path, key, size FROM checkpoints").fetchall()
    assert len(rows) == 2 and all(d is None and p is None for d, p, _, _ in rows)
    folder = f"{store}-checkpoints"
    files = [os.path.join(d, n) for d, _, names in os.walk(folder) for n in names]
    assert len(files) == 2                                    # each trial's latest alone
    assert sorted(os.path.getsize(f) for f in files) == sorted(size for *_, size in rows)
    best = result.best.checkpoint()
    assert best["epoch"] == 2 and best["x"] == 0.1 and best["w"].nbytes == 4 * 1024 * 1024


def _kill_when(run, step: int) -> dict:
    """SIGKILL the worker process running trial 0 once it reported ``step``; what was done."""
    killed: dict = {}

    def watch():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not run.done():
            history = run.sweep.snapshot(history=True)[0]["history"]
            if history and history[-1][0] >= step:
                killed.update(pid=int(history[-1][1]["pid"]), step=history[-1][0])
                os.kill(killed["pid"], signal.SIGKILL)
                return
            time.sleep(0.02)

    threading.Thread(target=watch, daemon=True).start()
    return killed


@pytest.mark.parametrize("slots", [True, False], ids=["slots", "tasks"])
def test_a_sigkilled_worker_s_trial_restores_from_the_location_where_it_runs_next(
    two, tmp_path, monkeypatch, slots
):
    monkeypatch.setattr(launch, "SLOTS", slots)
    seen = _seen_by_engine(monkeypatch)
    run = lk.sweep(cf.stepper, {"steps": 12, "pause": 0.1}, trials=1, metric="score",
                   mode="max", scheduler=two, store=tmp_path / "s.db", name="k", wait=False)
    killed = _kill_when(run, 3)
    trial = run.result(timeout=180).trials[0]
    assert killed and trial.status == "completed" and trial.attempts == 2
    assert [s for s, _, _ in trial.history] == list(range(12))
    after = [m for _, m, _ in trial.history if m["pid"] != killed["pid"]]
    assert after and after[0]["started"] >= killed["step"] - 1 and after[0]["started"] > 0
    assert not any(isinstance(r, (bytes, bytearray)) for r in seen)


SWEEP = """
import labkit as lk
from tests.experiments import checkpoint_functions as cf
result = lk.sweep(cf.dies_after_checkpoints, {{"steps": 6}}, trials=1, metric="score",
                  mode="max", store={store!r}, name="dies", resume={resume})
print("started", result.trials[0].history[-1][1]["started"], result.trials[0].status)
"""


def _sweep_in_a_new_process(store: str, resume: bool) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT)
    code = textwrap.dedent(SWEEP.format(store=store, resume=resume))
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_a_sweep_resumed_in_a_new_process_restores_from_the_location(tmp_path):
    store = str(tmp_path / "s.db")
    first = _sweep_in_a_new_process(store, False)
    assert first.returncode == 3, first.stderr[-2000:]     # the process died under its trial
    again = _sweep_in_a_new_process(store, True)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "started 3.0 completed" in again.stdout             # from its checkpoint of step 2
    assert lk.load_sweep(store, "dies").best.checkpoint() == {"step": 6}


def test_a_sweep_without_a_store_checkpoints_to_a_temporary_folder_removed_at_its_end(tmp_path):
    out = tmp_path / "where.txt"
    lk.sweep(cf.tells_its_location, [{"x": 1.0, "out": str(out)}], metric="loss", mode="min",
             store=None)
    where = out.read_text()
    assert where and not os.path.exists(where)
    with pytest.raises(lk.TaskError):   # every trial failed: the sweep raises, and cleans up
        lk.sweep(cf.tells_its_location, [{"x": 1.0, "out": str(out), "fail": True}],
                 metric="loss", mode="min", store=None)
    assert out.read_text() != where and not os.path.exists(out.read_text())


def test_an_unusable_location_fails_before_any_trial_naming_it_and_the_worker(two, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    location = str(blocker / "checkpoints")
    mark = tmp_path / "ran"
    with pytest.raises(lk.StorageError) as info:
        lk.sweep(cf.marks_and_checkpoints, [{"mark": str(mark)}], metric="loss", mode="min",
                 scheduler=two, store=tmp_path / "s.db", checkpoints=location)
    message = str(info.value)
    assert location in message and "worker tcp://" in message
    assert not mark.exists()                                  # no trial ran


def test_pbt_holds_references_only_and_exploits_copy_on_the_storage_side(tmp_path, monkeypatch):
    from tests.experiments.test_pbt import climb, pbt, run

    held: list = []
    exploited: list = []
    checkpointed, exploit = Turns.checkpointed, Turns._exploit

    def spy_checkpointed(self, trial, step, ref):
        held.append(ref)
        return checkpointed(self, trial, step, ref)

    def spy_exploit(self, s, decision, step, ref, donor_step):
        exploited.append((s.id, decision.donor, ref))
        return exploit(self, s, decision, step, ref, donor_step)

    monkeypatch.setattr(Turns, "checkpointed", spy_checkpointed)
    monkeypatch.setattr(Turns, "_exploit", spy_exploit)
    result = run(climb, pbt(), store=tmp_path / "p.db", name="p")
    assert result.exploits and exploited and held
    assert all(isinstance(r, CheckpointRef) for r in held)
    for recipient, _donor, ref in exploited:   # a copy under the recipient's own keys
        assert isinstance(ref, CheckpointRef) and f"/trial-{recipient}/" in ref.key
    assert all(t.status == "completed" for t in result.trials)


RSS = """
import resource, labkit as lk
from tests.experiments import checkpoint_functions as cf
with lk.DaskScheduler(mode="processes", n_workers=2, threads_per_worker=1) as s:
    configs = [{{"x": x, "mb": 50, "epochs": 3}} for x in (0.1, 0.2, 0.3, 0.4)]
    warm = [{{"x": 0.1, "mb": 1, "epochs": 1}}]   # the workers and the code warmed, small
    lk.sweep(cf.big_state, warm, metric="loss", mode="min", scheduler=s, store=None)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = lk.sweep(cf.big_state, configs, metric="loss", mode="min", scheduler=s,
                      store={store!r}, name="rss")
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(result.counts()["completed"], (after - before) // 1024)
"""


def test_the_client_s_memory_does_not_grow_by_the_checkpoints_size(tmp_path):
    """Twelve 50 MB checkpoints on two worker processes: the client's peak grows < 50 MB
    (before issue 46, through the client: +290 MB; now +0 MB, measured on 2 cores)."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    code = textwrap.dedent(RSS.format(store=str(tmp_path / "s.db")))
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    completed, grown_mb = map(int, out.stdout.split()[-2:])
    assert completed == 4 and grown_mb < 50, grown_mb
