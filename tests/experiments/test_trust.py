"""Issue 38 ("Trust, round 4"): sweeps that keep their word under odd input, faults and races."""

from __future__ import annotations

import dataclasses
import gc
import math
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

import labkit as lk
from labkit.experiments.launch import loop
from labkit.experiments.search.rules import Rule

from . import functions as f

INF, NAN = float("inf"), float("nan")


# -- 1. a rule's state belongs to its sweep ------------------------------------------------------


class CountingRule(Rule):
    """Stops every trial after the rule has seen 3 reports in all (state kept in the rule)."""

    def __init__(self):
        self.seen = 0

    def decide(self, trial, step, value, history):
        self.seen += 1
        return "enough" if self.seen > 3 else None


def _decisions(rule, seed=7):
    result = lk.sweep(f.curve, {"q": lk.uniform(0, 1), "steps": 5}, trials=6, metric="acc",
                      mode="max", seed=seed, early_stop=rule, store=None)
    return [(t.status, t.step, t.reason) for t in result.trials]


@pytest.mark.parametrize("make", [
    lambda: lk.ASHA(min_steps=1, reduction=2),
    lambda: lk.Median(min_steps=1, min_trials=1),
    CountingRule,
], ids=["ASHA", "Median", "own rule"])
def test_one_rule_object_given_to_two_sweeps_starts_each_afresh(make):
    fresh = _decisions(make())
    shared = make()
    first = _decisions(shared)
    second = _decisions(shared)
    assert first == fresh and second == fresh       # nothing carried from the first sweep
    assert any(status == "stopped" for status, _, _ in fresh)


# -- 2 and 11. settings: no NaN, infinity, bool, overflowing range, or a class for an instance ----


@pytest.mark.parametrize("make, argument", [
    (lambda: lk.ASHA(reduction=INF), "reduction"),
    (lambda: lk.ASHA(min_steps=INF), "min_steps"),
    (lambda: lk.ASHA(min_steps=NAN), "min_steps"),
    (lambda: lk.ASHA(max_steps=INF), "max_steps"),
    (lambda: lk.ASHA(max_steps=NAN), "max_steps"),
    (lambda: lk.ASHA(reduction=True), "reduction"),
    (lambda: lk.ASHA(min_steps=-INF), "min_steps"),
    (lambda: lk.Median(min_steps=NAN), "min_steps"),
    (lambda: lk.Median(min_steps=INF), "min_steps"),
    (lambda: lk.Median(min_trials=INF), "min_trials"),
    (lambda: lk.Median(min_trials=True), "min_trials"),
])
def test_rules_refuse_non_finite_settings_naming_them(make, argument):
    with pytest.raises(lk.InputError) as info:
        make()
    assert info.value.where["argument"] == argument
    assert "finite" in str(info.value) or "int" in str(info.value)


GOOD = dict(trials=2, metric="loss", mode="min", store=None)


@pytest.mark.parametrize("space, parameter", [
    ({"x": lk.uniform(-1e308, 1e308)}, "x"),
    ({"x": lk.uniform(0, INF)}, "x"),
    ({"x": lk.uniform(-INF, 0)}, "x"),
    ({"x": lk.uniform(NAN, 1)}, "x"),
    ({"x": lk.uniform(0, 2**2000)}, "x"),
    ({"x": lk.loguniform(1e-3, INF)}, "x"),
    ({"n": lk.randint(0, 2**80)}, "n"),
    ({"n": lk.randint(-(2**80), 0)}, "n"),
    ({"n": lk.randint(0, INF)}, "n"),
    ({"n": lk.randint(True, 5)}, "n"),
])
def test_space_constructors_refuse_ranges_no_draw_can_come_from(space, parameter):
    with pytest.raises(lk.InputError) as info:
        lk.sweep(f.quadratic, space, **GOOD)
    assert info.value.where["argument"] == parameter
    assert f"parameter {parameter!r}" in str(info.value)


def test_the_widest_ranges_that_are_fine_still_draw():
    result = lk.sweep(lambda c, t: {"loss": 0.0}, {"x": lk.uniform(-1e307, 1e307),
                                                   "n": lk.randint(-(2**63), 2**63),
                                                   "l": lk.loguniform(1e-300, 1e300)}, **GOOD)
    assert result.counts() == {"completed": 2}
    assert all(math.isfinite(t.config["x"]) and -(2**63) <= t.config["n"] < 2**63
               for t in result.trials)


@pytest.mark.parametrize("argument, value", [
    ("trials", INF), ("trials", NAN), ("trials", True), ("seed", NAN), ("max_failures", INF),
    ("max_concurrent", INF), ("workers_per_trial", True), ("max_failures", 2.5),
])
def test_sweep_arguments_refuse_non_finite_numbers(argument, value):
    kwargs = {**GOOD, argument: value}
    with pytest.raises(lk.InputError) as info:
        lk.sweep(f.quadratic, {"x": lk.uniform(0, 1)}, **kwargs)
    assert info.value.where["argument"] == argument


@pytest.mark.parametrize("rule", [lk.ASHA, lk.Median, CountingRule])
def test_a_rule_class_for_early_stop_is_refused_naming_early_stop(rule):
    with pytest.raises(lk.InputError) as info:
        lk.sweep(f.quadratic, {"x": lk.uniform(0, 1)}, early_stop=rule, **GOOD)
    assert info.value.where["argument"] == "early_stop"
    assert f"{rule.__name__}()" in str(info.value)


# -- 3. what the store reads back is what the sweep returned --------------------------------------


def _same(a, b) -> bool:
    """Equal, NaN equal to NaN, through dicts, lists and tuples."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def odd_values(config, trial):
    v = config["v"]
    trial.report(0, loss=v, other=-v)
    trial.report(1, loss=v, other=NAN)
    return {"loss": v, "extra": INF}


def test_nan_and_infinite_metrics_read_back_from_the_store_as_they_were(tmp_path):
    configs = [{"v": NAN}, {"v": INF}, {"v": -INF}, {"v": 1e308}, {"v": 0.5}]
    live = lk.sweep(odd_values, configs, metric="loss", mode="min", store=tmp_path / "s.db",
                    name="odd")
    loaded = lk.load_sweep(tmp_path / "s.db", "odd")
    assert [t.value for t in live.trials][1:] == [INF, -INF, 1e308, 0.5]
    assert math.isnan(loaded.trials[0].value)           # not None
    for name in ("name", "metric", "mode", "seed", "space", "store", "rule"):
        assert _same(getattr(live, name), getattr(loaded, name)), name
    assert len(live.trials) == len(loaded.trials)
    for a, b in zip(live.trials, loaded.trials):
        for field in dataclasses.fields(a):
            assert _same(getattr(a, field.name), getattr(b, field.name)), (a.id, field.name)
    assert live.best.id == loaded.best.id == 2


# -- 4. trial.attempt grows when a killed worker's trial runs again -------------------------------


def _kill_when(run, step: int) -> dict:
    """SIGKILL the worker process running trial 0 once it reported ``step``."""
    killed: dict = {}

    def watch():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not run.done():
            history = run.sweep.snapshot(history=True)[0]["history"]
            if history and history[-1][0] >= step:
                killed["pid"] = int(history[-1][1]["pid"])
                os.kill(killed["pid"], signal.SIGKILL)
                return
            time.sleep(0.02)

    threading.Thread(target=watch, daemon=True).start()
    return killed


@pytest.mark.parametrize("kind", ["processes", "gil"])
def test_trial_attempt_grows_when_its_worker_is_killed(tmp_path, kind):
    if kind == "gil":      # a pure-Python trial beside an in-process cluster: offload processes
        scheduler = lk.DaskScheduler(mode="auto", n_workers=1, threads_per_worker=1)
        fn = lk.FunctionCallable(f.attempt_and_steps, holds_gil=True)
    else:
        scheduler, fn = lk.DaskScheduler(mode="processes", n_workers=2), f.attempt_and_steps
    with scheduler as s:
        run = lk.sweep(fn, {"steps": 10, "pause": 0.1}, trials=1,
                       metric="score", mode="max", scheduler=s, store=tmp_path / "s.db",
                       name="k", wait=False)
        killed = _kill_when(run, 3)
        trial = run.result(timeout=120).trials[0]
    assert killed and trial.status == "completed" and trial.attempts == 2
    before = {m["attempt"] for _, m, _ in trial.history if m["pid"] == killed["pid"]}
    after = {m["attempt"] for _, m, _ in trial.history if m["pid"] != killed["pid"]}
    assert before == {0} and after == {1}


# -- 5. one sweep owns a name ---------------------------------------------------------------------


def test_two_sweeps_with_one_name_at_once_one_runs_the_other_is_refused(tmp_path):
    path = tmp_path / "s.db"
    barrier, outcomes = threading.Barrier(2), {}

    def one(k):
        barrier.wait()
        try:
            outcomes[k] = lk.sweep(f.slow_loss, [{"x": k, "steps": 6, "pause": 0.05}] * 3,
                                   metric="loss", mode="min", store=path, name="same")
        except Exception as err:  # an InputError is expected; anything else is shown
            outcomes[k] = err

    threads = [threading.Thread(target=one, args=(k,)) for k in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    errors = [v for v in outcomes.values() if isinstance(v, lk.InputError)]
    results = [v for v in outcomes.values() if not isinstance(v, lk.InputError)]
    assert len(errors) == 1 and len(results) == 1, outcomes
    assert errors[0].where["argument"] == "name" and "'same'" in str(errors[0])
    winner = results[0]
    stored = lk.load_sweep(path, "same")
    assert stored.counts() == winner.counts() == {"completed": 3}
    x = winner.trials[0].config["x"]
    for t in stored.trials:
        steps = [s for s, _, _ in t.history]
        assert steps == list(range(6))                              # each step once
        assert all(m["loss"] == x + 1.0 / (s + 1) for s, m, _ in t.history)   # the winner's


OTHER_SPACE = [{"x": 9, "steps": 20, "pause": 0.05}] * 2
_OTHER_PROCESS = f"""
import sys, labkit as lk
from tests.experiments import functions as f
lk.sweep(f.slow_loss, {OTHER_SPACE!r}, metric="loss", mode="min", store=sys.argv[1],
         name="shared")
"""


def _start_other(path, root):
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen([sys.executable, "-c", _OTHER_PROCESS, str(path)], env=env,
                            cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:               # until its sweep is in the store
        if path.exists():
            with sqlite3.connect(path) as conn:
                try:
                    if conn.execute("SELECT 1 FROM trials WHERE sweep = 'shared' AND "
                                    "status = 'running'").fetchall():
                        return proc
                except sqlite3.OperationalError:
                    pass
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the other process never started its sweep")


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("resume", [False, True])
def test_a_sweep_running_in_another_process_owns_its_name(tmp_path, resume):
    path = tmp_path / "s.db"
    proc = _start_other(path, ROOT)
    try:
        with pytest.raises(lk.InputError) as info:
            lk.sweep(f.slow_loss, [{"x": 1, "steps": 2, "pause": 0.0}] * 2, metric="loss",
                     mode="min", store=path, name="shared", resume=resume)
        assert info.value.where["argument"] == "name"
        assert f"process {proc.pid}" in str(info.value)
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stored = lk.load_sweep(path, "shared")
    assert stored.counts() == {"completed": 2}
    assert all(m["loss"] == 9 + 1.0 / (s + 1) for t in stored.trials for s, m, _ in t.history)
    again = lk.sweep(f.slow_loss, OTHER_SPACE, metric="loss",
                     mode="min", store=path, name="shared", resume=True)
    assert again.counts() == {"completed": 2}          # once it ended, the name is free


@pytest.mark.parametrize("reaped", [True, False])
def test_a_killed_process_s_claim_is_taken_over_by_a_resume(tmp_path, reaped):
    import psutil

    path = tmp_path / "s.db"
    proc = _start_other(path, ROOT)
    proc.kill()
    if reaped:
        proc.wait()
    else:                                   # a zombie until reaped: gone all the same
        deadline = time.monotonic() + 30
        while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    try:
        result = lk.sweep(f.slow_loss, OTHER_SPACE, metric="loss",
                          mode="min", store=path, name="shared", resume=True)
    finally:
        proc.wait()
    assert result.counts() == {"completed": 2}


# -- 6 and 13. a checkpoint that restore could not load is refused where it is taken --------------


@dataclasses.dataclass
class TrainState:
    epoch: int
    lr: float


def checkpoints_a_dataclass(config, trial):
    trial.report(0, loss=1.0)
    trial.checkpoint({"state": TrainState(0, 0.1)})
    return {"loss": 0.5}


def checkpoints_a_lock(config, trial):
    trial.report(0, loss=1.0)
    trial.checkpoint({"model": {"w": [1.0]}, "lock": threading.Lock()})
    return {"loss": 0.5}


def checkpoints_a_lambda(config, trial):
    trial.report(0, loss=1.0)
    trial.checkpoint({"schedule": lambda epoch: 0.1})
    return {"loss": 0.5}


@pytest.mark.parametrize("fn, field, words", [
    (checkpoints_a_dataclass, "checkpoint['state']", "TrainState"),
    (checkpoints_a_lock, "checkpoint['lock']", "lock"),
    (checkpoints_a_lambda, "checkpoint['schedule']", "lambda"),
])
def test_a_checkpoint_restore_could_not_load_fails_at_checkpoint_naming_the_field(fn, field,
                                                                                 words):
    with pytest.raises(lk.TaskError) as info:
        lk.sweep(fn, [{"a": 1}], metric="loss", mode="min", store=None)
    record = info.value.result.trials[0]
    assert record.status == "failed" and record.history      # it failed at the checkpoint
    assert "trial.checkpoint() of trial 0" in record.error
    assert field in record.error and words in record.error
    assert "flow" not in record.error and "optimizer factory" not in record.error
    assert "state_dict" in record.error                         # advice that fits a trial


def test_a_dataclass_allowed_in_checkpoints_is_checkpointed_and_restored():
    lk.allow_in_checkpoints(TrainState)
    seen = []

    def fn(config, trial):
        trial.report(0, loss=1.0)
        trial.checkpoint(TrainState(3, 0.5))
        seen.append(trial.restore())
        return {"loss": 0.5}

    assert lk.sweep(fn, [{"a": 1}], metric="loss", mode="min", store=None).counts() == \
        {"completed": 1}
    assert seen == [TrainState(3, 0.5)]


# -- 7. sys.exit and KeyboardInterrupt in a trial fail that trial only -----------------------------


EXITS = [{"do": "exit"}, {"do": "interrupt"}, {"do": "end"}]


def _check_exits(result):
    by = {t.config["do"]: t for t in result.trials}
    assert by["end"].status == "completed"
    assert by["exit"].status == "failed" and by["interrupt"].status == "failed"
    assert "SystemExit" in by["exit"].error and "trial 0" in by["exit"].error
    assert "sys.exit(3)" in by["exit"].error
    assert "KeyboardInterrupt" in by["interrupt"].error and "trial 1" in by["interrupt"].error
    assert "f.exits" in by["exit"].traceback or "exits" in by["exit"].traceback


def test_sys_exit_in_a_trial_on_the_local_scheduler_fails_that_trial():
    _check_exits(lk.sweep(f.exits, EXITS, metric="loss", mode="min", store=None))


@pytest.mark.parametrize("kind", ["threads", "processes", "gil"])
def test_sys_exit_in_a_trial_on_a_cluster_fails_that_trial_and_nothing_hangs(kind):
    mode = {"threads": "auto", "gil": "auto", "processes": "processes"}[kind]
    fn = lk.FunctionCallable(f.exits, holds_gil=True) if kind == "gil" else f.exits
    with lk.DaskScheduler(mode=mode, n_workers=1 if mode == "auto" else 2,
                          threads_per_worker=2 if mode == "auto" else 1) as s:
        run = lk.sweep(fn, EXITS, metric="loss", mode="min", scheduler=s, store=None,
                       wait=False)
        _check_exits(run.result(timeout=120))


def ctrl_c(config, trial):
    trial.report(0, loss=1.0)
    os.kill(os.getpid(), signal.SIGINT)             # the user's Ctrl-C, as a signal
    time.sleep(30)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signals reach the main thread only")
def test_a_real_ctrl_c_still_stops_a_local_sweep(tmp_path, monkeypatch):
    # from Python's own Ctrl-C handler, as a user's process has it, whatever an earlier test in
    # this process left in place (the full suite once saw no KeyboardInterrupt here)
    # The trial Ctrl-C stopped ran in the sweep's own thread: it is over, and the wind-down
    # must not wait for it (it once waited the whole CANCEL_WAIT, 10 s, and the test's 20 s
    # failed under load); a minute's wait would show here.
    monkeypatch.setattr(loop, "CANCEL_WAIT", 60.0)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    began = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            lk.sweep(ctrl_c, [{"a": 1}, {"a": 2}], metric="loss", mode="min",
                     store=tmp_path / "s.db", name="c")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - began < 20
    assert lk.load_sweep(tmp_path / "s.db", "c").counts() == {"cancelled": 1, "pending": 1}


# -- 8. no task key outlives a sweep on worker processes ----------------------------------------


def _labkit_keys(s) -> list:
    return s.client.run_on_scheduler(
        lambda dask_scheduler: sorted(str(k) for k in dask_scheduler.tasks if "labkit" in str(k)))


@pytest.mark.parametrize("kind", ["processes", "address", "auto"])
def test_no_task_key_is_left_on_the_scheduler_after_sweeps(kind):
    from tests.clusters import scheduler_of

    gc.disable()       # what only a garbage collection would release counts as left behind
    try:
        with scheduler_of(kind) as s:
            for round_ in range(10):
                lk.sweep(f.curve, {"q": lk.uniform(0, 1), "steps": 3, "pause": 0.01}, trials=6,
                         metric="acc", mode="max", scheduler=s, store=None, seed=round_,
                         early_stop=lk.ASHA(min_steps=1, reduction=2))
                deadline, left = time.monotonic() + 10, _labkit_keys(s)
                while left and time.monotonic() < deadline:
                    time.sleep(0.1)
                    left = _labkit_keys(s)
                assert left == [], (round_, left)
    finally:
        gc.enable()


# -- 10. archived stores open read-only; a corrupt one is a labkit error ------------------------


def test_a_corrupt_store_is_a_storage_error_naming_it(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database " * 400)
    with pytest.raises(lk.StorageError) as info:
        lk.load_sweep(bad)
    assert info.value.where["path"] == str(bad)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    with pytest.raises(lk.StorageError) as info:
        lk.load_sweep(other)
    assert "not a labkit sweep store" in str(info.value)


_READ_ONLY = """
import sys, labkit as lk
r = lk.load_sweep(sys.argv[1], "ro")
print(r.counts(), len(r.trials[0].history))
try:
    open(sys.argv[1] + "-probe", "w")
except OSError as exc:
    print("read-only:", exc.strerror)
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare for a read-only mount")
def test_a_store_on_a_read_only_disk_loads(tmp_path):
    folder = tmp_path / "archive"
    folder.mkdir()
    lk.sweep(f.quadratic, {"x": lk.uniform(0, 1)}, trials=3, metric="loss", mode="min",
             store=folder / "s.db", name="ro")
    os.chmod(folder / "s.db", 0o444)
    os.chmod(folder, 0o555)
    try:
        script = (f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} "
                  f"&& {sys.executable} -c '{_READ_ONLY}' {folder / 's.db'}")
        probe = subprocess.run(["unshare", "-rm", "sh", "-c", "true"], capture_output=True)
        if probe.returncode != 0:
            pytest.skip("user namespaces are not allowed here")
        out = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True,
                             text=True, timeout=120, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": ROOT})
    finally:
        os.chmod(folder, 0o755)
    assert out.returncode == 0, out.stderr
    assert "{'completed': 3} 5" in out.stdout and "read-only: Read-only file system" in out.stdout
    assert not os.path.exists(f"{folder / 's.db'}-probe")


# -- 14. a metric typo fails a trial at its first report --------------------------------------------


@pytest.mark.parametrize("kind", ["local", "threads", "processes"])
def test_a_metric_typo_fails_each_trial_at_its_first_report(tmp_path, kind):
    config = {"epochs": 20, "pause": 0.05, "folder": str(tmp_path)}
    kwargs = dict(metric="acc", mode="max", store=None)
    if kind == "local":
        with pytest.raises(lk.TaskError) as info:
            lk.sweep(f.typo, [config] * 2, **kwargs)
    else:
        mode = "auto" if kind == "threads" else "processes"
        with lk.DaskScheduler(mode=mode, n_workers=1 if mode == "auto" else 2,
                              threads_per_worker=2 if mode == "auto" else 1) as s:
            with pytest.raises(lk.TaskError) as info:
                lk.sweep(f.typo, [config] * 2, scheduler=s, **kwargs)
    for record in info.value.result.trials:
        assert record.status == "failed" and list(record.history) == []
        assert "'acc'" in record.error and "'accuracy'" in record.error
        assert "did you mean 'accuracy'" in record.error
    assert sorted(os.listdir(tmp_path)) == ["epoch-0-0", "epoch-1-0"]   # no epoch after the first


@pytest.mark.parametrize("maker", [lk.loguniform, lk.uniform, lk.randint, lk.choice, lk.grid])
def test_a_distribution_maker_given_uncalled_is_refused_naming_the_parameter(maker):
    with pytest.raises(lk.InputError) as info:
        lk.sweep(f.quadratic, {"lr": maker}, **GOOD)
    assert info.value.where["argument"] == "lr" and f"lk.{maker.__name__}" in str(info.value)


@dataclasses.dataclass
class Unregistered:
    n: int


def test_a_checkpoint_refused_at_restore_names_the_checkpoint_not_a_flow(monkeypatch):
    from labkit.experiments.store import checkpoints
    from labkit.checkpoints import allowed as snapshot_state

    lk.allow_in_checkpoints(Unregistered)
    blob = checkpoints.encode({"state": Unregistered(1)}, "trial 4")
    monkeypatch.setattr(snapshot_state, "_REGISTERED", {})      # another process, say
    with pytest.raises(lk.InputError) as info:
        checkpoints.decode(blob, "<checkpoint of trial 4>")
    message = str(info.value)
    assert "checkpoint['state']" in message and "Unregistered" in message
    assert "flow[" not in message and "Flow.load" not in message
    assert "lk.allow_in_checkpoints(Unregistered)" in message


def test_numpy_values_in_configurations_read_back_equal(tmp_path):
    import numpy as np

    space = {"w": lk.choice(np.array([64, 128])), "p": lk.choice([np.float32(0.5)]),
             "on": lk.choice([np.bool_(True)])}
    live = lk.sweep(f.quadratic, {**space, "x": lk.uniform(0, 1)}, trials=3, metric="loss",
                    mode="min", store=tmp_path / "s.db", name="np")
    loaded = lk.load_sweep(tmp_path / "s.db", "np")
    assert [t.config for t in live.trials] == [t.config for t in loaded.trials]
