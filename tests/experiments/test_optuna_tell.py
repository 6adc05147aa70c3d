"""A completed trial is told to the sampler's study as ``Study.tell`` tells it, without its
deep copy (issue 48, "Cost"); other ends still go through ``Study.tell``."""

from __future__ import annotations

import optuna

import labkit as lk
from tests.experiments import objective_functions as F

XY = {"x": lk.uniform(0, 1), "y": lk.uniform(0, 1)}
TWO = dict(metric=("loss", "latency_ms"), mode=("min", "min"))


class Recording(optuna.samplers.RandomSampler):
    """A random sampler that keeps what its ``after_trial`` was told."""

    def __init__(self, seed: int):
        super().__init__(seed=seed)
        self.told: list = []

    def after_trial(self, study, trial, state, values):
        self.told.append((trial.number, trial.state.name, state.name, values))
        super().after_trial(study, trial, state, values)


def test_completed_trials_are_told_as_study_tell_would_without_calling_it(monkeypatch):
    tells: list = []
    tell = optuna.Study.tell
    monkeypatch.setattr(optuna.Study, "tell", lambda *a, **k: tells.append(a) or tell(*a, **k))
    sampler = Recording(seed=2)
    result = lk.sweep(
        F.two_objectives, XY, trials=5, store=None, search=sampler, max_concurrent=1, **TWO
    )
    assert tells == []  # no deep copy of each trial, as Study.tell returns one
    wanted = [[t.objectives["loss"], t.objectives["latency_ms"]] for t in result.trials]
    # the sampler heard each end once, before the study's trial was finished, as Optuna does
    assert sampler.told == [(i, "RUNNING", "COMPLETE", v) for i, v in enumerate(wanted)]
    study = result.study
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 5
    assert [t.values for t in study.trials] == wanted
    assert [t.number for t in study.best_trials] == [t.id for t in result.pareto]


def second_fails(config, trial):
    """Trial 1 fails; the others return both objectives."""
    if trial.id == 1:
        raise RuntimeError("trial 1 fails")
    return F.returns_both(config, trial)


def test_a_failed_trial_is_still_told_through_study_tell(monkeypatch):
    tells: list = []
    tell = optuna.Study.tell
    monkeypatch.setattr(optuna.Study, "tell", lambda *a, **k: tells.append(k) or tell(*a, **k))
    result = lk.sweep(
        second_fails, XY, trials=3, store=None, search=Recording(seed=0), max_concurrent=1, **TWO
    )
    assert [t.status for t in result.trials] == ["completed", "failed", "completed"]
    assert [k["state"].name for k in tells] == ["FAIL"]
    assert [t.state.name for t in result.study.trials] == ["COMPLETE", "FAIL", "COMPLETE"]
