"""Constraints as Optuna's constraints_func: kept in records and the store, infeasible trials
never on the front nor best, and a constraint-aware sampler told them."""

from __future__ import annotations

import optuna
import pytest

import labkit as lk
from labkit.experiments import stored_constraints
from labkit.experiments.objectives.samplers import CONSTRAINTS_ATTR
from tests.experiments import objective_functions as F
from tests.experiments.test_objectives import brute_front

XY = {"x": lk.uniform(0, 1), "y": lk.uniform(0, 1)}
TWO = dict(metric=("loss", "latency_ms"), mode=("min", "min"))


def test_infeasible_trials_are_never_on_the_front_and_constraints_are_kept(tmp_path):
    store = tmp_path / "s.db"
    result = lk.sweep(F.two_objectives, XY, trials=30, seed=5, store=store, name="c",
                      constraints=F.loss_at_most_half, **TWO)
    for t in result.trials:
        assert t.constraints == pytest.approx((t.objectives["loss"] - 0.5,))
    feasible = [t for t in result.trials if t.constraints[0] <= 0]
    assert 0 < len(feasible) < 30
    points = [[t.objectives["loss"], t.objectives["latency_ms"]] for t in feasible]
    expected = [feasible[i].id for i in brute_front(points, ("min", "min"))]
    assert [t.id for t in result.pareto] == expected
    unconstrained = brute_front([[t.objectives["loss"], t.objectives["latency_ms"]]
                                 for t in result.trials], ("min", "min"))
    assert set(unconstrained) - set(expected)  # the constraint changed the front
    back = lk.load_sweep(store, "c")
    assert [t.constraints for t in back.trials] == [t.constraints for t in result.trials]
    assert [t.id for t in back.pareto] == expected


def test_an_infeasible_trial_is_never_the_best_of_one_metric():
    result = lk.sweep(F.returns_both, XY, trials=12, metric="latency_ms", mode="min", seed=2,
                      store=None, constraints=F.loss_at_most_half)
    best = result.best
    assert best.constraints[0] <= 0
    feasible = [t for t in result.trials if t.constraints[0] <= 0]
    assert best.value == min(t.value for t in feasible)
    assert min(t.value for t in result.trials) < best.value  # an infeasible one was lower


def test_a_failing_constraints_function_fails_the_trial_naming_it():
    with pytest.raises(lk.errors.TaskError) as info:
        lk.sweep(F.returns_both, XY, trials=2, store=None, constraints=F.broken_constraints,
                 **TWO)
    for t in info.value.result.trials:
        assert t.status == "failed" and "constraints(metrics) failed" in t.error
        assert f"trial {t.id}" in t.error


def test_a_constraints_argument_must_be_callable():
    with pytest.raises(lk.errors.InputError) as info:
        lk.sweep(F.returns_both, XY, trials=2, store=None, constraints=[0.5], **TWO)
    assert info.value.where["argument"] == "constraints"


def optuna_objective(trial):
    """The problem of ``F.two_objectives``, its constraint kept as labkit keeps it."""
    values = F.zdt1(trial.suggest_float("x", 0, 1), trial.suggest_float("y", 0, 1))
    trial.set_user_attr(CONSTRAINTS_ATTR, F.loss_at_most_half({"loss": values[0]}))
    return values


def test_a_constraint_aware_nsga2_is_told_as_in_study_optimize():
    def sampler():
        return optuna.samplers.NSGAIISampler(seed=11, population_size=6,
                                             constraints_func=stored_constraints)

    result = lk.sweep(F.two_objectives, XY, trials=24, max_concurrent=1, store=None,
                      search=sampler(), constraints=F.loss_at_most_half, **TWO)
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler())
    study.optimize(optuna_objective, n_trials=24)
    assert [t.config for t in result.trials] == [t.params for t in study.trials]
    kept = [t.system_attrs.get("constraints") for t in result.study.trials]
    assert kept == [t.system_attrs.get("constraints") for t in study.trials]
    assert kept == [t.constraints for t in result.trials]
    assert [t.id for t in result.pareto] == [t.number for t in study.best_trials]


def optuna_objective_set_constraint(trial):
    """The problem of ``F.two_objectives``, its constraint told as Optuna 5 asks."""
    values = F.zdt1(trial.suggest_float("x", 0, 1), trial.suggest_float("y", 0, 1))
    for i, c in enumerate(F.loss_at_most_half({"loss": values[0]})):
        trial.set_constraint(f"labkit{i}", c)
    return values


def test_a_sampler_built_without_constraints_func_is_told_the_constraints_too():
    def sampler():
        return optuna.samplers.NSGAIISampler(seed=5, population_size=6)

    result = lk.sweep(F.two_objectives, XY, trials=24, max_concurrent=1, store=None,
                      search=sampler(), constraints=F.loss_at_most_half, **TWO)
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler())
    study.optimize(optuna_objective_set_constraint, n_trials=24)
    assert [t.config for t in result.trials] == [t.params for t in study.trials]
    told = [tuple(t.constraints.values()) for t in result.study.trials]
    assert told == [tuple(t.constraints) for t in result.trials]  # every trial told
    assert [t.id for t in result.pareto] == [t.number for t in study.best_trials]


def test_a_resumed_sweep_tells_its_sampler_the_stored_constraints(tmp_path):
    store = tmp_path / "s.db"

    def sampler():
        return optuna.samplers.NSGAIISampler(seed=2, population_size=4,
                                             constraints_func=stored_constraints)

    first = lk.sweep(F.two_objectives, XY, trials=5, store=store, name="r", search=sampler(),
                     constraints=F.loss_at_most_half, max_concurrent=1, **TWO)
    more = lk.sweep(F.two_objectives, XY, trials=8, store=store, name="r", resume=True,
                    search=sampler(), constraints=F.loss_at_most_half, max_concurrent=1, **TWO)
    told = more.study.trials
    assert [t.system_attrs.get("constraints") for t in told[:5]] == [
        t.constraints for t in first.trials]
    assert [t.user_attrs.get(CONSTRAINTS_ATTR) for t in told] == [
        list(t.constraints) for t in more.trials]
    assert all(t.constraints is not None for t in more.trials)
