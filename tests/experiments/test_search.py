"""Optuna's samplers driving lk.sweep (search=): asked, told, pruned, failed, resumed, refused."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

import pytest

optuna = pytest.importorskip("optuna")

import labkit as lk  # noqa: E402
from labkit.events import SweepStarted, TrialFinished, TrialStarted  # noqa: E402
from tests.experiments import functions as f  # noqa: E402

State = optuna.trial.TrialState
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CUBE = {f"x{i}": lk.uniform(0, 1) for i in range(4)}


def bowl(config, trial):
    """``f = sum (x_i - 0.7)^2`` over the cube, reported once and returned."""
    value = sum((config[f"x{i}"] - 0.7) ** 2 for i in range(4))
    trial.report(0, loss=value + 1.0)
    return {"loss": value}


def falling(config, trial):
    """Nine reports of a loss that falls towards ``x``: ASHA stops the worse at its rungs."""
    for step in range(9):
        trial.report(step, loss=config["x"] + 1.0 / (step + 1))
    return None


def half_steps(config, trial):
    """Reports at steps 0, 0.5, 1.0, 1.5, 2.0 (Optuna's steps are ints: the others are skipped)."""
    for k in range(5):
        trial.report(k / 2, loss=config["x"] + k)
    return None


class Watched(optuna.samplers.TPESampler):
    """A real TPE sampler that notes what its study held at each ask and each end it was told."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.study = None
        self.held_at_ask: list[list[tuple]] = []  # the finished trials, at each ask
        self.ends: list[tuple] = []  # (number, state, values) as told

    def before_trial(self, study, trial):
        self.study = study
        done = study.get_trials(deepcopy=False, states=(State.COMPLETE, State.PRUNED, State.FAIL))
        self.held_at_ask.append([(t.state, t.params) for t in done])
        super().before_trial(study, trial)

    def after_trial(self, study, trial, state, values):
        self.ends.append((trial.number, state, values))
        super().after_trial(study, trial, state, values)


def configs(result):
    return [t.config for t in result.trials]


def test_a_seeded_sampler_asks_the_same_configurations_every_serial_run(tmp_path):
    runs = [
        lk.sweep(bowl, CUBE, trials=14, metric="loss", mode="min", max_concurrent=1,
                 search=optuna.samplers.TPESampler(seed=seed), store=tmp_path / "s.db",
                 name=f"s{i}")
        for i, seed in enumerate((3, 3, 4))
    ]
    assert configs(runs[0]) == configs(runs[1]) != configs(runs[2])
    assert all(set(c) == set(CUBE) for c in configs(runs[0]))
    # what the store and the table hold is what the trials ran with
    back = lk.load_sweep(tmp_path / "s.db", "s0")
    assert configs(back) == configs(runs[0])
    assert [t.metrics for t in back.trials] == [t.metrics for t in runs[0].trials]
    row = runs[0].table()[0]
    assert {k: row[k] for k in CUBE} == runs[0].trials[0].config


def test_tpe_finds_at_most_half_of_random_search_s_best_on_the_quadratic():
    def mean_best(search_of_seed):
        bests = [
            lk.sweep(bowl, CUBE, trials=40, metric="loss", mode="min", seed=seed, store=None,
                     search=search_of_seed(seed)).best.value
            for seed in range(3)
        ]
        return sum(bests) / 3

    tpe = mean_best(lambda seed: optuna.samplers.TPESampler(seed=seed))
    random = mean_best(lambda seed: "random")
    assert tpe <= random / 2, (tpe, random)


def test_the_study_mirrors_the_sweep_reports_stops_and_failures(threads_scheduler):
    sampler = Watched(seed=0)
    result = lk.sweep(falling, {"x": lk.uniform(0, 1)}, trials=12, metric="loss", mode="min",
                      early_stop=lk.ASHA(min_steps=1, reduction=3), search=sampler,
                      scheduler=threads_scheduler, store=None)
    by_number = {t.number: t for t in sampler.study.trials}
    told = {}
    for trial in result.trials:  # the study's trials match the sweep's by their configuration
        twin = [t for t in by_number.values() if t.params == trial.config]
        assert len(twin) == 1, trial
        told[trial.id] = twin[0]
    stopped = [t.id for t in result.trials if t.status == "stopped"]
    assert stopped and len(stopped) < 12
    for trial in result.trials:
        twin = told[trial.id]
        assert twin.state == (State.PRUNED if trial.status == "stopped" else State.COMPLETE)
        assert twin.intermediate_values == {s: m["loss"] for s, m, _ in trial.history}
        if trial.status == "completed":
            assert twin.value == trial.value
    assert len(sampler.ends) == 12

    failing = Watched(seed=1)
    mixed = lk.sweep(f.failing, {"x": lk.uniform(0, 1)}, trials=8, metric="loss", mode="min",
                     search=failing, store=None)
    states = {t.params["x"]: t.state for t in failing.study.trials}
    assert {t.status for t in mixed.trials} == {"completed", "failed"}
    for trial in mixed.trials:
        expected = State.FAIL if trial.status == "failed" else State.COMPLETE
        assert states[trial.config["x"]] == expected


def test_views_see_each_configuration_when_its_trial_starts(recorder):
    from labkit.views.trackers.sweep_tracker import SweepTracker

    run = lk.sweep(bowl, CUBE, trials=4, metric="loss", mode="min", store=None,
                   search=optuna.samplers.TPESampler(seed=0), wait=False)
    tracker = SweepTracker(run.id)
    run.subscribe(recorder)  # replays what came before
    run.subscribe(tracker)
    result = run.result(timeout=60)
    started = {e.trial: e.config for e in recorder.of(TrialStarted)}
    assert started == {t.id: t.config for t in result.trials}
    rows = recorder.of(SweepStarted)[0].trials
    assert len(rows) == 4 and all(row["config"] == {} for row in rows)  # asked at start only
    assert {t.id: t.config for t in tracker.snapshot().trials} == started


def test_a_resumed_sweep_tells_its_stored_trials_before_asking(tmp_path):
    store = tmp_path / "s.db"
    args = dict(metric="loss", mode="min", early_stop=lk.ASHA(min_steps=1, reduction=2),
                store=store, max_concurrent=1)
    first = lk.sweep(falling, {"x": lk.uniform(0, 1)}, trials=10, name="r",
                     search=optuna.samplers.TPESampler(seed=5), **args)
    assert {t.status for t in first.trials} == {"completed", "stopped"}
    sampler = Watched(seed=5)
    resumed = lk.sweep(falling, {"x": lk.uniform(0, 1)}, trials=16, name="r", resume=True,
                       search=sampler, **args)
    # at the first ask, the study held every stored trial as it ended, with its configuration
    expected = sorted(
        ((State.COMPLETE if t.status == "completed" else State.PRUNED), t.config["x"])
        for t in first.trials
    )
    assert sorted((s, p["x"]) for s, p in sampler.held_at_ask[0]) == expected
    assert configs(resumed)[:10] == configs(first)
    # the sampler, knowing them, asks what an uninterrupted serial run of the same seed asks
    whole = lk.sweep(falling, {"x": lk.uniform(0, 1)}, trials=16, name="whole",
                     search=optuna.samplers.TPESampler(seed=5), **args)
    assert configs(resumed) == configs(whole)
    assert [t.status for t in resumed.trials] == [t.status for t in whole.trials]


def test_a_cancelled_trial_runs_again_with_its_configuration_when_resumed(tmp_path):
    store = tmp_path / "s.db"
    space = {"x": lk.uniform(0, 1), "steps": 60, "pause": 0.01}
    run = lk.sweep(f.slow_loss, space, trials=2, metric="loss", mode="min", store=store,
                   name="c", search=optuna.samplers.TPESampler(seed=0), wait=False)
    deadline = time.monotonic() + 30
    while not any(r["step"] is not None and r["step"] >= 2 for r in run.sweep.snapshot()):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    run.cancel()
    with pytest.raises(lk.CancelledError):
        run.result(timeout=30)
    before = lk.load_sweep(store, "c").trials[0]
    assert before.status == "cancelled" and set(before.config) == set(space)
    sampler = Watched(seed=0)
    resumed = lk.sweep(f.slow_loss, space, trials=2, metric="loss",
                       mode="min", store=store, name="c", resume=True, search=sampler)
    assert resumed.trials[0].config["x"] == before.config["x"]
    assert resumed.trials[0].status == "completed" and resumed.trials[0].attempts == 2
    params = [t.params["x"] for t in sampler.study.trials if t.state == State.COMPLETE]
    assert before.config["x"] in params


@pytest.mark.soak
def test_a_trial_restarted_after_a_lost_process_keeps_its_asked_configuration(recorder):
    from tests.experiments.test_faults import _kill_when

    sampler = Watched(seed=0)
    with lk.DaskScheduler(mode="auto", n_workers=1, threads_per_worker=1) as s:
        fn = lk.FunctionCallable(f.pid_and_steps, holds_gil=True)
        run = lk.sweep(fn, {"x": lk.uniform(0, 1), "steps": 12, "pause": 0.1}, trials=1,
                       metric="score", mode="max", scheduler=s, store=None, search=sampler,
                       wait=False)
        run.subscribe(recorder)
        killed = _kill_when(run, 3)
        trial = run.result(timeout=120).trials[0]
    assert killed and trial.status == "completed" and trial.attempts == 2
    assert [e.config for e in recorder.of(TrialStarted)] == [trial.config] * 2  # asked once
    [twin] = sampler.study.trials
    assert twin.state == State.COMPLETE and twin.params == {"x": trial.config["x"]}
    assert twin.intermediate_values == {k: float(k) for k in range(12)}


def test_non_integer_steps_are_skipped_and_the_sweep_goes_on():
    sampler = Watched(seed=0)
    result = lk.sweep(half_steps, {"x": lk.uniform(0, 1)}, trials=3, metric="loss",
                      mode="min", search=sampler, store=None)
    assert [t.status for t in result.trials] == ["completed"] * 3
    for twin in sampler.study.trials:
        assert sorted(twin.intermediate_values) == [0, 1, 2]


def test_every_distribution_maps_to_optuna_s_within_labkit_s_bounds():
    space = {"n": lk.randint(0, 2), "lr": lk.loguniform(1e-4, 1e-1), "act": lk.choice(
        ["relu", None, 3, 2.5, True]), "x": lk.uniform(-1, 1), "layers": 2}
    result = lk.sweep(f.returns_number, space, trials=30, metric="v", mode="max", store=None,
                      search=optuna.samplers.TPESampler(seed=0))
    seen = configs(result)
    assert {c["n"] for c in seen} == {0, 1}  # labkit's hi is excluded
    assert all(1e-4 <= c["lr"] <= 1e-1 and -1 <= c["x"] <= 1 and c["layers"] == 2 for c in seen)
    assert {type(c["n"]) for c in seen} == {int}
    assert {c["act"] for c in seen} <= {"relu", None, 3, 2.5, True}
    assert list(seen[0]) == list(space)


def _x_of(config, trial):
    return {"v": -((config["x"] - 0.25) ** 2) - (config["n"] - 3) ** 2}


def _cma_es():
    # the search extra brings cmaes (pinned in constraints.txt): no skip
    return optuna.samplers.CmaEsSampler(seed=0, n_startup_trials=2)


@pytest.mark.parametrize("sampler", [
    lambda: optuna.samplers.GPSampler(seed=0, n_startup_trials=4),  # needs torch and scipy
    _cma_es,
])
def test_gaussian_process_and_cma_es_samplers_drive_a_sweep(sampler):
    space = {"x": lk.uniform(0, 1), "n": lk.randint(0, 6)}
    result = lk.sweep(_x_of, space, trials=10, metric="v", mode="max", store=None,
                      search=sampler())
    assert [t.status for t in result.trials] == ["completed"] * 10
    assert len({t.config["x"] for t in result.trials}) >= 5  # a model-based sampler may repeat
    assert all(0 <= t.config["x"] <= 1 and 0 <= t.config["n"] <= 5 for t in result.trials)


def test_the_result_and_the_live_sweep_hold_the_study_a_sampler_drove(tmp_path):
    sampler = Watched(seed=0)
    running = lk.sweep(bowl, CUBE, trials=5, metric="loss", mode="min", search=sampler,
                       store=tmp_path / "s.db", name="st", wait=False)
    result = running.result(timeout=60)
    assert running.sweep.study is sampler.study is result.study
    assert [t.params for t in result.study.trials] == [t.config for t in result.trials]
    assert result.study.best_value == result.best.value
    assert lk.load_sweep(tmp_path / "s.db", "st").study is None  # read back: no study
    assert lk.sweep(bowl, CUBE, trials=2, metric="loss", mode="min", store=None).study is None


class Failing(optuna.samplers.RandomSampler):
    """A real sampler that fails to sample the second trial it is asked."""

    def sample_independent(self, study, trial, name, distribution):
        if trial.number == 1:
            raise RuntimeError("no luck today")
        return super().sample_independent(study, trial, name, distribution)


def test_a_sampler_that_fails_to_ask_fails_that_trial_and_the_sweep_goes_on(recorder):
    run = lk.sweep(bowl, CUBE, trials=4, metric="loss", mode="min", store=None,
                   search=Failing(seed=0), wait=False)
    run.subscribe(recorder)
    result = run.result(timeout=60)
    assert [t.status for t in result.trials] == ["completed", "failed", "completed", "completed"]
    assert "RuntimeError: no luck today" in result.trials[1].error
    assert result.trials[1].config == {}
    finished = {e.record.id: e.record.status for e in recorder.of(TrialFinished)}
    assert finished == {t.id: t.status for t in result.trials}
    with pytest.raises(lk.TaskError, match="no luck"):
        lk.sweep(bowl, CUBE, trials=1, metric="loss", mode="min", store=None,
                 search=Never(seed=0))


class Never(optuna.samplers.RandomSampler):
    """A real sampler that never samples."""

    def sample_independent(self, study, trial, name, distribution):
        raise RuntimeError("no luck today")


def test_a_sampler_on_worker_processes_sends_each_trial_its_asked_configuration(dask_scheduler):
    result = lk.sweep(bowl, CUBE, trials=6, metric="loss", mode="min", scheduler=dask_scheduler,
                      search=optuna.samplers.TPESampler(seed=0), store=None)
    for trial in result.trials:
        assert trial.status == "completed" and trial.worker.startswith("tcp://")
        assert trial.value == pytest.approx(sum((v - 0.7) ** 2 for v in trial.config.values()))


@pytest.mark.parametrize("search, space, argument", [
    ("tpe", CUBE, "search"),
    (42, CUBE, "search"),
    (optuna.samplers.TPESampler, CUBE, "search"),  # the class, not a sampler
    (optuna.samplers.TPESampler(seed=0), lk.grid(x=[0.1, 0.2]), "search"),
    (optuna.samplers.TPESampler(seed=0), [{"x": 0.1}, {"x": 0.2}], "search"),
    (optuna.samplers.TPESampler(seed=0), {"act": lk.choice([abs, max])}, "act"),
    (optuna.samplers.TPESampler(seed=0), {"shape": lk.choice([(1, 2), (3, 4)])}, "shape"),
])
def test_bad_searches_are_refused_before_anything_runs(search, space, argument, tmp_path):
    with pytest.raises(lk.InputError) as info:
        lk.sweep(bowl, space, trials=2, metric="loss", mode="min", search=search,
                 store=tmp_path / "s.db")
    assert info.value.where.get("argument") == argument, str(info.value)
    assert not (tmp_path / "s.db").exists()


def test_optuna_s_info_lines_are_held_back_and_its_logger_is_left_as_it_was():
    import logging

    seen = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = seen.append
    optuna_logger = logging.getLogger("optuna")
    level = optuna_logger.level
    optuna_logger.addHandler(handler)
    try:
        lk.sweep(bowl, CUBE, trials=3, metric="loss", mode="min", store=None,
                 search=optuna.samplers.TPESampler(seed=0))
        optuna.create_study()  # the user's own study still says so
    finally:
        optuna_logger.removeHandler(handler)
    assert optuna_logger.level == level
    assert [r.getMessage()[:21] for r in seen] == ["A new study created i"]


def test_importing_labkit_does_not_import_optuna():
    code = ("import sys, labkit as lk; lk.sweep(lambda c, t: c['x'], {'x': lk.uniform(0, 1)}, "
            "trials=2, metric='v', mode='min', store=None); print('optuna' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


class Exits(optuna.samplers.RandomSampler):
    """A real sampler that raises a BaseException, no Exception, at its second trial."""

    def __init__(self, exc, **kwargs):
        super().__init__(**kwargs)
        self.exc = exc

    def sample_independent(self, study, trial, name, distribution):
        if trial.number == 1:
            raise self.exc
        return super().sample_independent(study, trial, name, distribution)


@pytest.mark.parametrize("kind", ["threads", "processes"])
@pytest.mark.parametrize("exc", [SystemExit("bye"), KeyboardInterrupt("not a Ctrl-C")],
                         ids=["SystemExit", "KeyboardInterrupt"])
def test_a_sampler_raising_a_base_exception_ends_the_sweep_naming_it(exc, kind, request):
    # threads: asked on a Dask worker's thread; processes: on the slots' listener's thread
    with contextlib.ExitStack() as stack:
        if kind == "threads":
            s = stack.enter_context(lk.DaskScheduler())
        else:
            s = request.getfixturevalue("dask_scheduler")
        run = lk.sweep(bowl, CUBE, trials=6, metric="loss", mode="min", scheduler=s,
                       store=None, search=Exits(exc, seed=0), max_concurrent=1, wait=False)
        with pytest.raises(lk.TaskError) as info:
            run.result(timeout=60)
        words = str(info.value)
        assert "the search Exits raised" in words and type(exc).__name__ in words, words
        assert "trial 1" in words
        assert {r["status"] for r in run.sweep.snapshot()} <= {"completed", "cancelled",
                                                               "pending"}
        # the cluster goes on: a task, and a sweep after it
        assert s.client.submit(sum, [1, 2]).result(timeout=30) == 3
        again = lk.sweep(bowl, CUBE, trials=2, metric="loss", mode="min", scheduler=s,
                         store=None, search=optuna.samplers.RandomSampler(seed=0))
        assert [t.status for t in again.trials] == ["completed"] * 2


def test_a_ctrl_c_in_the_main_thread_s_sampler_cancels_the_sweep(tmp_path):
    import threading

    assert threading.current_thread() is threading.main_thread()
    store = tmp_path / "s.db"
    # a Ctrl-C here stops the sweep, as anywhere else
    with lk.LocalScheduler() as s, pytest.raises(KeyboardInterrupt):
        lk.sweep(bowl, CUBE, trials=4, metric="loss", mode="min", store=store, name="c",
                 search=Exits(KeyboardInterrupt(), seed=0), scheduler=s)
    stored = lk.load_sweep(store, "c")
    assert [t.status for t in stored.trials] == ["completed", "pending", "pending", "pending"]


@pytest.mark.parametrize("make", [optuna.samplers.TPESampler, optuna.samplers.RandomSampler])
def test_one_seeded_sampler_object_asks_the_same_configurations_in_every_sweep(make):
    sampler = make(seed=7)
    runs = [lk.sweep(bowl, CUBE, trials=12, metric="loss", mode="min", store=None,
                     search=sampler, max_concurrent=1) for _ in range(3)]
    assert configs(runs[0]) == configs(runs[1]) == configs(runs[2])
    assert configs(runs[0]) == configs(lk.sweep(bowl, CUBE, trials=12, metric="loss", mode="min",
                                                store=None, search=make(seed=7)))


def test_a_grid_sampler_s_value_outside_the_space_is_refused_before_anything_runs(tmp_path):
    for grid, words in [({"x": [0.1, 5.0]}, "x=5.0, outside the space's 'x': lk.uniform(0, 1)"),
                        ({"y": [0.1]}, "no values for 'x'")]:
        with pytest.raises(lk.InputError) as info:
            lk.sweep(_x_only, {"x": lk.uniform(0, 1)}, trials=2, metric="v", mode="max",
                     search=optuna.samplers.GridSampler(grid), store=tmp_path / "s.db")
        assert words in str(info.value) and info.value.where["argument"] == "search"
        assert not (tmp_path / "s.db").exists()
    # a grid inside the space runs every point, ints and choices too
    space = {"x": lk.uniform(0, 1), "n": lk.randint(1, 3), "act": lk.choice(["relu", "tanh"])}
    grid = {"x": [0.0, 1.0], "n": [1, 2], "act": ["relu", "tanh"]}
    result = lk.sweep(_x_only, space, trials=8, metric="v", mode="max", store=None,
                      search=optuna.samplers.GridSampler(grid))
    assert sorted(tuple(sorted(c.items())) for c in configs(result)) == sorted(
        (("act", a), ("n", n), ("x", x)) for x in (0.0, 1.0) for n in (1, 2)
        for a in ("relu", "tanh"))


def _x_only(config, trial):
    return {"v": config["x"]}


class Outside(optuna.samplers.RandomSampler):
    """A real sampler of one's own that asks 5.0 for x of the second trial."""

    def sample_independent(self, study, trial, name, distribution):
        if trial.number == 1 and name == "x":
            return 5.0
        return super().sample_independent(study, trial, name, distribution)


def test_a_sampler_asking_outside_the_space_fails_that_trial_naming_it():
    result = lk.sweep(_x_only, {"x": lk.uniform(0, 1)}, trials=3, metric="v", mode="max",
                      store=None, search=Outside(seed=0))
    assert [t.status for t in result.trials] == ["completed", "failed", "completed"]
    error = result.trials[1].error
    assert "the sampler Outside asked x=5.0, outside the space's 'x': lk.uniform(0, 1)" in error
    assert all(0 <= t.config["x"] <= 1 for t in result.trials if t.status == "completed")
    assert [t.state for t in result.study.trials] == [State.COMPLETE, State.FAIL, State.COMPLETE]


def test_a_sampler_whose_package_is_missing_is_refused_before_anything_runs(monkeypatch,
                                                                            tmp_path):
    monkeypatch.setitem(sys.modules, "cmaes", None)  # as if cmaes were not installed
    with pytest.raises(lk.InputError) as info:
        lk.sweep(_x_of, {"x": lk.uniform(0, 1), "n": lk.randint(0, 6)}, trials=4, metric="v",
                 mode="max", search=optuna.samplers.CmaEsSampler(seed=0),
                 store=tmp_path / "s.db")
    assert "CmaEsSampler needs the package 'cmaes'" in str(info.value)
    assert "pip install cmaes" in str(info.value)
    assert info.value.where["argument"] == "search"
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("sampler, space", [
    (lambda: optuna.samplers.GridSampler({"x": [0.25, 0.5, 0.75]}), {"x": lk.uniform(0, 1)}),
    (lambda: optuna.samplers.BruteForceSampler(seed=0), {"x": lk.choice([1, 2, 3])}),
])
def test_an_exhausted_grid_is_no_refusal_in_the_log(sampler, space, caplog):
    import logging
    import warnings

    caplog.set_level(logging.DEBUG)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        result = lk.sweep(_x_only, space, trials=3, metric="v", mode="max", store=None,
                          search=sampler())
    assert [t.status for t in result.trials] == ["completed"] * 3
    assert sorted(t.config["x"] for t in result.trials) == sorted(space["x"].values() or
                                                                  [0.25, 0.5, 0.75])
    assert not [r for r in caplog.records if "refused" in r.getMessage()
                or r.exc_info is not None], caplog.text


class EndsLate(optuna.samplers.RandomSampler):
    """A real sampler that raises SystemExit when told that its second trial ended."""

    def after_trial(self, study, trial, state, values):
        if trial.number == 1:
            raise SystemExit("late")


def test_a_sampler_raising_system_exit_when_told_an_end_ends_the_sweep_naming_it():
    with lk.DaskScheduler() as s:
        run = lk.sweep(bowl, CUBE, trials=6, metric="loss", mode="min", scheduler=s,
                       store=None, search=EndsLate(seed=0), max_concurrent=1, wait=False)
        with pytest.raises(lk.TaskError, match="the search EndsLate raised SystemExit: late "
                                               "while being told that trial 1 ended"):
            run.result(timeout=60)
        assert "running" not in {r["status"] for r in run.sweep.snapshot()}
        assert s.client.submit(sum, [1, 2]).result(timeout=30) == 3
