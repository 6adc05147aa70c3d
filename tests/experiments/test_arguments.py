"""``lk.sweep``'s arguments: one typed, frozen SweepConfig, bound once from the signature its fields make.

Issue 45: the call no longer travels as an untyped ``SweepCall(locals())`` bag.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import pathlib

import pytest

import labkit as lk
from labkit.errors import InputError
from labkit.experiments.arguments import SWEEP_CONSTRAINTS, SweepConfig, prepare
from labkit.experiments.spec import SweepSpec

EXPERIMENTS = pathlib.Path(lk.__file__).parent / "experiments"


def trial(config, trial):
    return config["x"]


def test_the_signature_of_lk_sweep_is_the_configs_fields():
    parameters = inspect.signature(lk.sweep).parameters
    fields = dataclasses.fields(SweepConfig)
    assert list(parameters) == [f.name for f in fields]
    assert [p.kind for p in parameters.values()][:3] == [
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    ]
    assert parameters["max_failures"].default == 3 and parameters["search"].default == "random"
    assert parameters["trials"].annotation == int | None  # types, not strings
    assert set(SWEEP_CONSTRAINTS) <= set(parameters)


def test_a_config_is_frozen_typed_and_checked_when_made_and_when_changed():
    config = SweepConfig(trial, {"x": lk.uniform(0, 1)}, trials=4, metric="v", mode="min")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.trials = 5  # type: ignore[misc]
    with pytest.raises(InputError, match="trials") as info:
        config.changed(trials=0)
    assert info.value.where["argument"] == "trials"
    assert config.changed(trials=9).trials == 9 and config.trials == 4
    with pytest.raises(InputError, match="mode"):
        SweepConfig(trial, {"x": 1}, metric="v", mode="lowest")


def test_the_spec_derives_from_the_config_and_what_prepare_made_of_it():
    config = SweepConfig(trial, {"x": lk.uniform(0, 1)}, trials=4, metric="v", mode="max",
                         max_failures=1, max_concurrent=2, early_stop=lk.ASHA())
    prepared = prepare(config)
    spec = SweepSpec.of(config, prepared, name="s", seed=7, trials=4, asked=False)
    assert (spec.metric, spec.mode, spec.max_failures, spec.max_concurrent) == ("v", "max", 1, 2)
    assert spec.rule is prepared.rule and spec.rule is not config.early_stop  # the sweep's copy
    assert spec.search is prepared.search and spec.space is prepared.space


def test_a_call_binds_as_before_unknown_keywords_and_bad_values_refused():
    with pytest.raises(TypeError, match="bogus"):
        lk.sweep(trial, {"x": 1}, bogus=1)
    with pytest.raises(InputError, match="lk.sweep: trials"):
        lk.sweep(trial, {"x": 1}, trials=0)
    result = lk.sweep(trial, {"x": lk.uniform(0, 1)}, trials=3, metric="v", mode="min",
                      store=None, seed=1)
    assert len(result.trials) == 3 and result.best.value == min(t.value for t in result.trials)


def test_experiments_holds_no_locals_bag():
    calls = [
        f"{path.relative_to(EXPERIMENTS)}:{node.lineno}"
        for path in EXPERIMENTS.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "locals"
    ]
    assert calls == []
