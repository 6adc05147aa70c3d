"""Population-based training (search=lk.PBT): exploits, turns, the store, resume, the board, errors.

The task: a score over ``T`` steps that a step raises by ``lr`` in the first
half and by ``1 - lr`` in the second, so every fixed configuration scores
exactly ``T / 2`` and only a schedule (a high ``lr``, then a low one) beats it.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from pathlib import Path

import pytest

import labkit as lk
from labkit.events import TrialRequeued, TrialStarted
from labkit.experiments.store.database import Store
from labkit.views.trackers.sweep_tracker import SweepTracker

T = 40
SPACE = {"lr": lk.uniform(0, 1)}
DATA = Path(__file__).parent / "data"


class Climb:
    """The task's trial function; notes each restore and each step (trial, step, score, lr)."""

    def __init__(self, pause: float = 0.0):
        self.lock = threading.Lock()
        self.steps: list[tuple] = []
        self.restores: list[tuple] = []  # (trial, step, score) restored
        self.running = self.most = 0
        self.pause = pause

    def __call__(self, config, trial):
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            saved = trial.restore()
            if saved is not None:
                with self.lock:
                    self.restores.append((trial.id, saved["step"], saved["score"]))
            saved = saved or {"step": 0, "score": 0.0}
            score = saved["score"]
            for step in range(saved["step"] + 1, T + 1):
                lr = trial.config["lr"]
                score += lr if step <= T // 2 else 1.0 - lr
                with self.lock:
                    self.steps.append((trial.id, step, score, lr))
                if self.pause:
                    time.sleep(self.pause)
                trial.report(step, score=score)
                trial.checkpoint({"step": step, "score": score})
        finally:
            with self.lock:
                self.running -= 1


def _step_work(wait: float = 0.004, work: float = 0.006) -> None:
    """A member's step: 10 ms, of which 6 ms of CPU, as a training step is.

    Reports reach the client every 50 ms: decisions come a few steps late.  A
    pause's round trip (the report, the decision, the stop back on the worker)
    is CPU work that load stretches; a step that only slept would not stretch
    with it, and under load a member could end its 40 steps before the stop of
    its first pause arrived (3 of 8 members paused at 24 busy loops, none of
    them after the CPU share; issue 44).  With 3 ms of CPU a step, the best member beside
    two runs of `make test` and more (load 10-14) gained 0.36 over a fixed configuration,
    against the 0.5 asked: the CPU share is now 6 ms.
    """
    time.sleep(wait)
    end = time.process_time() + work
    while time.process_time() < end:
        pass


def climb(config, trial):
    """The task alone (a plain function: it travels to worker processes)."""
    saved = trial.restore() or {"step": 0, "score": 0.0}
    score = saved["score"]
    for step in range(saved["step"] + 1, T + 1):
        lr = trial.config["lr"]
        score += lr if step <= T // 2 else 1.0 - lr
        _step_work()
        trial.report(step, score=score)
        trial.checkpoint({"step": step, "score": score})


def pbt(**kwargs):
    options = dict(interval=5, quantile=0.25, mutations={"lr": lk.uniform(0, 1)},
                   resample_probability=0.5, seed=0)
    return lk.PBT(**{**options, **kwargs})


def run(fn, search, **kwargs):
    options = dict(trials=8, metric="score", mode="max", seed=0, store=None)
    return lk.sweep(fn, SPACE, search=search, **{**options, **kwargs})


def test_pbt_beats_every_fixed_configuration_of_its_population_and_repeats_itself():
    fixed = run(Climb(), "random")
    assert all(t.value == pytest.approx(T / 2) for t in fixed.trials)  # no fixed lr wins
    first, again = run(Climb(), pbt()), run(Climb(), pbt())
    assert [t.config for t in first.trials[:8]] != [t.config for t in fixed.trials]  # exploited
    assert first.best.value >= 1.5 * (T / 2), first.best.value  # 30 of 40 at least; 20 fixed
    assert [(t.value, t.config) for t in first.trials] == [(t.value, t.config) for t in again.trials]
    assert [(e.trial, e.step, e.donor, e.after) for e in first.exploits] == [
        (e.trial, e.step, e.donor, e.after) for e in again.exploits
    ]
    assert all(t.status == "completed" and t.history[-1][0] == T for t in first.trials)


def test_exploits_are_stored_each_from_a_better_donor_whose_checkpoint_is_restored(tmp_path):
    climb = Climb()
    store = tmp_path / "pbt.db"
    result = run(climb, pbt(resample_probability=0.0), store=store, name="p")
    loaded = lk.load_sweep(store, "p")
    assert loaded.exploits and loaded.exploits == result.exploits
    with sqlite3.connect(store) as conn:
        assert conn.execute("SELECT COUNT(*) FROM exploits").fetchone()[0] == len(loaded.exploits)
    scores: dict = {}  # (trial, step) -> every score it had there: reported, or restored
    for trial, step, score, *_ in climb.steps + climb.restores:
        scores.setdefault((trial, step), []).append(score)
    in_force = {t.id: t.config for t in run(Climb(), "random").trials}  # first: as drawn
    for e in loaded.exploits:
        assert e.ranked_at % 5 == 0 and e.ranked_at <= e.step and e.donor != e.trial
        assert e.donor_step >= e.ranked_at
        assert max(scores[(e.donor, e.ranked_at)]) > min(scores[(e.trial, e.ranked_at)])
        # no resampling: the donor's lr in force, times 0.8 or 1.2, within [0, 1]
        assert e.before == in_force[e.trial]
        donor = in_force[e.donor]["lr"]
        assert any(e.after["lr"] == pytest.approx(min(donor * f, 1.0)) for f in (0.8, 1.2)), e
        in_force[e.trial] = e.after
        # the member went on from the donor's checkpoint: its step and its score
        assert any(t == e.trial and s == e.donor_step and sc in scores[(e.donor, e.donor_step)]
                   for t, s, sc in climb.restores), e
    assert {t.id: t.config for t in loaded.trials} == in_force  # the last exploit's, stored


def test_a_population_larger_than_the_slots_takes_turns(threads_scheduler):
    climb = Climb(pause=0.002)
    result = run(climb, pbt(), trials=6, scheduler=threads_scheduler)
    assert climb.most == 2  # two slots, six members: never more than two at once
    assert all(t.status == "completed" and t.history[-1][0] == T for t in result.trials)
    assert all(t.attempts > 1 for t in result.trials)  # each paused at least once: turns
    firsts = [s for t, s, _, _ in climb.steps if s == 6]
    assert len(firsts) >= 6  # every member came back after its first interval


@pytest.mark.parametrize("slots", [True, False], ids=["slots", "tasks"])
def test_members_on_worker_processes_take_turns_and_exploit(dask_scheduler, tmp_path, slots,
                                                           monkeypatch):
    from labkit.experiments import launch

    monkeypatch.setattr(launch, "SLOTS", slots)  # False: a Dask task a trial (RemoteLauncher)
    # Sixteen members, not eight: on workers the order of turns varies from run to run, and
    # in one run of eight under load (CI, load 6-7) the leader at step 20 never explored
    # and the others, late in their turns, exploited its last checkpoints: all ended at or
    # under its 19.47.  Of 6 runs of sixteen beside 4 busy loops the best scored 30.8-36.5.
    result = run(climb, pbt(), trials=16, store=tmp_path / "p.db", name="w",
                 scheduler=dask_scheduler)
    shown = [(t.id, t.status, t.history[-1][0], t.attempts) for t in result.trials]
    assert all(t.status == "completed" and t.history[-1][0] == T for t in result.trials), shown
    # a stop reaches a worker process late: a member may run past a boundary, a few never pause
    assert sum(t.attempts > 1 for t in result.trials) >= 6 and result.exploits, shown
    # better than every fixed configuration (each scores T / 2 exactly); how much better
    # depends on how late the decisions reach the members, which load stretches
    assert result.best.value > T / 2 + 0.5, shown
    stored = lk.load_sweep(tmp_path / "p.db", "w")
    assert stored.exploits == result.exploits
    assert {t.id: t.config for t in stored.trials} == {t.id: t.config for t in result.trials}


def test_a_cancelled_pbt_sweep_resumes_from_its_store_and_keeps_its_exploits(tmp_path):
    store = tmp_path / "pbt.db"
    running = run(Climb(pause=0.003), pbt(), store=store, name="r", wait=False)
    deadline = time.monotonic() + 60
    while len(running.sweep.exploits) < 3:
        assert time.monotonic() < deadline and not running.done()
        time.sleep(0.01)
    running.cancel()
    with pytest.raises(lk.CancelledError):
        running.result(timeout=30)
    before = lk.load_sweep(store, "r")
    assert len(before.exploits) >= 3 and before.counts().get("completed", 0) < 8
    resumed = run(Climb(), pbt(), store=store, name="r", resume=True)
    assert all(t.status == "completed" and t.history[-1][0] == T for t in resumed.trials)
    assert resumed.exploits[: len(before.exploits)] == before.exploits
    assert lk.load_sweep(store, "r").exploits == resumed.exploits


def test_the_board_shows_the_configuration_in_force_after_an_exploit(recorder):
    sweep_run = run(Climb(pause=0.001), pbt(), wait=False)
    tracker = SweepTracker(sweep_run.id)
    sweep_run.subscribe(recorder)  # replays what came before
    sweep_run.subscribe(tracker)
    running: list = []  # what the board counted running after each event: one slot
    sweep_run.subscribe(lambda e: running.append(tracker.counts().get("running", 0)))
    result = sweep_run.result(timeout=60)
    assert len(running) > 100 and max(running) == 1  # a member waiting its turn is pending
    requeued = recorder.of(TrialRequeued)
    assert {e.reason.split()[0] for e in requeued} == {"paused", "exploits"}
    assert result.exploits
    shown = {t.id: t for t in tracker.snapshot().trials}
    assert {i: t.config for i, t in shown.items()} == {t.id: t.config for t in result.trials}
    exploited = {e.trial for e in result.exploits}
    for trial in exploited:  # a restart after an exploit starts with the new configuration
        after = [e.after for e in result.exploits if e.trial == trial]
        configs = [e.config for e in recorder.of(TrialStarted) if e.trial == trial]
        assert all(c in configs for c in after)
    for t in result.trials:  # the board's curve is the trial's history: its own, then its donor's
        assert [h[0] for h in tracker.history(t.id)] == [h[0] for h in t.history]
        assert t.history[-1][0] == T


@pytest.mark.parametrize("kwargs, argument", [
    (dict(interval=0), "interval"),
    (dict(interval=2.5), "interval"),
    (dict(quantile=0.0), "quantile"),
    (dict(quantile=0.75), "quantile"),
    (dict(resample_probability=1.5), "resample_probability"),
    (dict(mutations={}), "mutations"),
    (dict(mutations={"lr": 3}), "mutations"),
    (dict(mutations={"lr": []}), "mutations"),
    (dict(mutations={"lr": lk.uniform(1, 0)}), "mutations"),
])
def test_bad_pbt_arguments_are_refused_naming_them(kwargs, argument):
    with pytest.raises(lk.InputError) as info:
        pbt(**kwargs)
    assert info.value.where.get("argument") == argument, str(info.value)


@pytest.mark.parametrize("space, argument", [
    (lk.grid(lr=[0.1, 0.9]), "search"),
    ([{"lr": 0.1}, {"lr": 0.9}], "search"),
    ({"lr": lk.uniform(0, 1), "other": lk.uniform(0, 1)}, None),
    ({"rate": lk.uniform(0, 1)}, "mutations"),
])
def test_pbt_needs_a_space_of_distributions_holding_its_mutations(space, argument, tmp_path):
    if argument is None:  # a parameter not mutated is the donor's: fine
        result = lk.sweep(Climb(), space, trials=2, metric="score", mode="max", search=pbt(),
                          store=None)
        assert all(t.status == "completed" for t in result.trials)
        return
    with pytest.raises(lk.InputError) as info:
        lk.sweep(Climb(), space, trials=2, metric="score", mode="max", search=pbt(),
                 store=tmp_path / "s.db")
    assert info.value.where.get("argument") == argument, str(info.value)
    assert not (tmp_path / "s.db").exists()


def test_a_store_of_schema_version_2_opens_migrated_to_3(tmp_path):
    old = tmp_path / "v2.db"
    shutil.copy(DATA / "store_v2.db", old)
    read = lk.load_sweep(old, "climb")  # read only: as version 2 wrote it, no exploits table
    assert read.exploits == [] and len(read.trials) == 4
    store = Store(str(old))
    try:
        assert store.read("PRAGMA user_version")[0]["user_version"] == 5  # 3, 4 (issue 46), 5 (issue 48)
        assert store.exploits("climb") == []
        assert [t.config for t in store.records("climb")] == [t.config for t in read.trials]
    finally:
        store.close()
    again = lk.load_sweep(old, "climb")
    assert [(t.id, t.status, t.value) for t in again.trials] == [
        (t.id, t.status, t.value) for t in read.trials
    ]


def test_a_perturbation_moves_each_kind_of_entry_a_little_within_its_bounds():
    import numpy as np

    from labkit.experiments.search.pbt import perturb

    rng = np.random.default_rng(0)
    for _ in range(200):  # no resampling: x0.8 or x1.2, clipped; ints rounded
        assert perturb(0.5, lk.uniform(0, 1), 0.0, rng) in (pytest.approx(0.4), pytest.approx(0.6))
        assert perturb(0.9, lk.uniform(0, 1), 0.0, rng) in (pytest.approx(0.72), 1.0)
        assert perturb(1e-2, lk.loguniform(1e-4, 1e-2), 0.0, rng) in (
            pytest.approx(8e-3), pytest.approx(1e-2))
        assert perturb(10, lk.randint(1, 12), 0.0, rng) in (8, 11)  # 12 rounds to 12: clipped
        assert perturb(32, [16, 32, 64], 0.0, rng) in (16, 64)
        assert perturb(16, lk.choice([16, 32, 64]), 0.0, rng) in (16, 32)  # clipped at the end
        drawn = perturb(0.5, lk.uniform(0.2, 0.3), 1.0, rng)  # resampled: from its entry
        assert 0.2 <= drawn <= 0.3
        assert perturb("a", ["a", "b", "c"], 1.0, rng) in ("a", "b", "c")
    seen = {perturb(32, [16, 32, 64], 0.0, rng) for _ in range(50)}
    assert seen == {16, 64}  # both neighbours come up


def forgetful(config, trial):
    """A member that ignores its checkpoint: it starts over at step 1 every time it runs."""
    score = 0.0
    for step in range(1, 21):
        score += config["lr"]
        time.sleep(0.002)
        trial.report(step, score=score)
        trial.checkpoint({"step": step, "score": score})


def test_a_member_that_starts_over_after_its_turn_fails_naming_trial_restore(threads_scheduler):
    try:
        result = run(forgetful, pbt(), trials=4, scheduler=threads_scheduler)
    except lk.TaskError as err:  # each member paused before any completed: all failed
        assert "trial.restore()" in str(err)
        result = err.result
    failed = [t for t in result.trials if t.status == "failed"]
    assert failed and {t.status for t in result.trials} <= {"completed", "failed"}
    for t in failed:  # it ran, was paused, ran again from step 1: failed at once
        assert f"trial {t.id} reported step 1 after it was requeued" in t.error, t.error
        assert "trial.restore()" in t.error
    assert all(t.attempts <= 2 for t in result.trials), [t.attempts for t in result.trials]


SPACE_OF_KINDS = {"lr": lk.uniform(0, 1), "n": lk.randint(1, 10),
                  "wd": lk.loguniform(1e-4, 1e-2), "act": lk.choice(["relu", "tanh", "gelu"]),
                  "drop": lk.uniform(0, 0.5)}
#: mutations whose own ranges are wider than the space's: what comes out keeps the space's
WIDE = {"lr": lk.uniform(0, 1), "n": lk.uniform(1, 10), "wd": lk.loguniform(1e-6, 1.0),
        "act": ["relu", "tanh", "gelu"], "drop": lk.uniform(0, 1)}


def _in_space(config):
    return (isinstance(config["n"], int) and 1 <= config["n"] <= 9
            and isinstance(config["wd"], float) and 1e-4 <= config["wd"] <= 1e-2
            and config["act"] in ("relu", "tanh", "gelu") and 0 <= config["drop"] <= 0.5
            and 0 <= config["lr"] <= 1)


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0])
def test_perturbations_keep_each_parameter_s_kind_and_bounds(p):
    from labkit.experiments.search.space import Space

    own = pbt(mutations=WIDE, resample_probability=p).bound(Space.of(SPACE_OF_KINDS), "max")
    config = {"lr": 0.5, "n": 9, "wd": 1e-2, "act": "gelu", "drop": 0.5}
    seen = set()
    for _ in range(300):
        config = own.explore(config)
        assert _in_space(config), config
        seen.add(config["n"])
    assert len(seen) > 1  # it moves


def test_exploits_of_a_sweep_keep_each_parameter_s_kind_and_bounds():
    result = lk.sweep(Climb(), SPACE_OF_KINDS, trials=8, metric="score", mode="max", seed=0,
                      store=None, search=pbt(mutations=WIDE, resample_probability=0.5))
    assert result.exploits
    assert all(_in_space(e.after) for e in result.exploits), result.exploits
    assert all(_in_space(t.config) for t in result.trials)


@pytest.mark.parametrize("entry, mutation, words", [
    (lk.choice(["relu", "tanh"]), lk.uniform(0, 1), "(uniform) but the space's 'x' is "
                                                    "lk.choice(['relu', 'tanh']) (choice)"),
    (lk.choice(["relu", "tanh"]), ["relu", "gelu"], "holds 'gelu'"),
    (lk.uniform(0, 1), ["a", "b"], "(a list), which holds 'a', but the space's 'x' is "
                                   "lk.uniform(0, 1) (uniform)"),
    (lk.randint(1, 10), lk.choice([True, False]), "holds True"),
])
def test_a_mutation_of_another_kind_than_its_parameter_is_refused_naming_both(
        entry, mutation, words, tmp_path):
    with pytest.raises(lk.InputError) as info:
        lk.sweep(Climb(), {"lr": lk.uniform(0, 1), "x": entry}, trials=4, metric="score",
                 mode="max", search=pbt(mutations={"x": mutation}), store=tmp_path / "s.db")
    assert words in str(info.value) and "mutations['x']" in str(info.value), str(info.value)
    assert info.value.where["argument"] == "mutations"
    assert not (tmp_path / "s.db").exists()


def test_pbt_without_a_seed_takes_the_sweep_s():
    def decisions(sweep_seed):
        result = run(Climb(), pbt(seed=None), seed=sweep_seed)
        return [(e.trial, e.step, e.donor, e.after) for e in result.exploits]

    first = decisions(3)
    assert first and first == decisions(3)
    assert first != decisions(4)


def test_pbt_beside_asha_exploits_and_stops():
    result = run(Climb(), pbt(), trials=8, early_stop=lk.ASHA(min_steps=10, reduction=2))
    statuses = {t.status for t in result.trials}
    assert statuses <= {"completed", "stopped"} and "stopped" in statuses, statuses
    assert result.exploits
    for t in result.trials:
        if t.status == "completed":
            assert t.history[-1][0] == T
        else:  # stopped by the rule at a rung, and not run again after it
            assert t.reason.startswith("ASHA: at step ") and t.history[-1][0] < T, t.reason


def climb_on_two(config, trial):
    """The task on a trial that holds two workers of its own."""
    assert len(trial.workers) == 2, trial.workers
    climb(config, trial)


def test_pbt_members_holding_two_workers_each_take_turns():
    with lk.DaskScheduler(mode="processes", n_workers=4, threads_per_worker=1) as s:
        result = run(climb_on_two, pbt(), trials=4, scheduler=s, workers_per_trial=2)
    shown = [(t.id, t.status, t.attempts, t.error) for t in result.trials]
    assert all(t.status == "completed" and t.history[-1][0] == T for t in result.trials), shown
    assert any(t.attempts > 1 for t in result.trials), shown  # 4 members, 2 at a time: turns
