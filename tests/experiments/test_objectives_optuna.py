"""Optuna's samplers of several objectives through ``search=``: told every objective, also on
resume; NSGA-II asks as Optuna's own ``study.optimize`` does; one-objective samplers refused."""

from __future__ import annotations

import warnings

import optuna
import pytest

import labkit as lk
from labkit.errors import InputError
from tests.experiments import objective_functions as F

XY = {"x": lk.uniform(0, 1), "y": lk.uniform(0, 1)}
TWO = dict(metric=("loss", "latency_ms"), mode=("min", "min"))


def optuna_objective(trial):
    """The same problem as ``F.two_objectives``'s final values, as Optuna's objective."""
    return F.zdt1(trial.suggest_float("x", 0, 1), trial.suggest_float("y", 0, 1))


def test_a_seeded_nsga2_asks_as_study_optimize_and_its_front_is_best_trials():
    result = lk.sweep(F.two_objectives, XY, trials=24, max_concurrent=1, store=None,
                      search=optuna.samplers.NSGAIISampler(seed=7, population_size=6), **TWO)
    study = optuna.create_study(directions=["minimize", "minimize"],
                                sampler=optuna.samplers.NSGAIISampler(seed=7, population_size=6))
    study.optimize(optuna_objective, n_trials=24)
    assert [t.config for t in result.trials] == [t.params for t in study.trials]
    assert [t.config for t in result.pareto] == [t.params for t in study.best_trials]
    assert [t.number for t in study.best_trials] == [t.id for t in result.pareto]
    mirrored = result.study  # labkit's own study was told both objectives
    assert [t.values for t in mirrored.trials] == [t.values for t in study.trials]
    assert mirrored.directions == study.directions


@pytest.mark.parametrize("sampler", [
    optuna.samplers.NSGAIIISampler(seed=1, population_size=4),
    optuna.samplers.TPESampler(seed=1, n_startup_trials=3),
    optuna.samplers.GPSampler(seed=1, n_startup_trials=3),
    optuna.samplers.RandomSampler(seed=1),
], ids=lambda s: type(s).__name__)
def test_samplers_of_several_objectives_are_told_every_one(sampler):
    result = lk.sweep(F.two_objectives, XY, trials=6, store=None, search=sampler, **TWO)
    told = result.study.trials
    assert len(told) == 6 and all(t.state.name == "COMPLETE" for t in told)
    assert [t.values for t in told] == [[t.objectives["loss"], t.objectives["latency_ms"]]
                                         for t in result.trials]
    assert [t.id for t in result.pareto] == [t.number for t in result.study.best_trials]


def test_a_sampler_of_one_objective_is_refused_naming_search():
    with pytest.raises(InputError, match="CmaEsSampler takes one objective") as info:
        lk.sweep(F.two_objectives, XY, trials=4, store=None,
                 search=optuna.samplers.CmaEsSampler(seed=0), **TWO)
    assert info.value.where["argument"] == "search"


def test_a_resumed_sweep_tells_its_stored_trials_every_objective(tmp_path):
    store = tmp_path / "s.db"
    sampler = optuna.samplers.NSGAIISampler(seed=3, population_size=4)
    first = lk.sweep(F.two_objectives, XY, trials=5, store=store, name="n", search=sampler,
                     max_concurrent=1, **TWO)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        more = lk.sweep(F.two_objectives, XY, trials=9, store=store, name="n", resume=True,
                        search=optuna.samplers.NSGAIISampler(seed=3, population_size=4),
                        max_concurrent=1, **TWO)
    told = more.study.trials
    assert len(told) == 9 and [t.values for t in told[:5]] == [t.values
                                                              for t in first.study.trials]
    assert more.study.directions == first.study.directions
    assert [t.id for t in more.pareto] == [t.number for t in more.study.best_trials]
