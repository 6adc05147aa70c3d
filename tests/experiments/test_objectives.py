"""Several objectives at once: declared, checked, kept in each record, the exact Pareto front."""

from __future__ import annotations

import numpy as np
import pytest

import labkit as lk
from labkit.errors import InputError
from labkit.experiments.arguments import SweepConfig
from tests.experiments import objective_functions as F

XY = {"x": lk.uniform(0, 1), "y": lk.uniform(0, 1)}


def brute_front(points, modes):
    """Indices of the points no other dominates, by comparing every pair."""
    signs = np.array([1 if m == "min" else -1 for m in modes])
    p = np.asarray(points) * signs
    return [i for i in range(len(p))
            if not any((p[j] <= p[i]).all() and (p[j] < p[i]).any() for j in range(len(p)))]


def test_two_objectives_keep_every_final_value_and_the_exact_front():
    result = lk.sweep(F.two_objectives, XY, trials=30, metric=("loss", "latency_ms"),
                      mode=("min", "min"), seed=1, store=None)
    assert result.objectives == ("loss", "latency_ms") and result.modes == ("min", "min")
    assert all(t.status == "completed" for t in result.trials)
    for t in result.trials:
        f1, f2 = F.zdt1(t.config["x"], t.config["y"])
        assert t.objectives == {"loss": pytest.approx(f1), "latency_ms": pytest.approx(f2)}
    points = [[t.objectives["loss"], t.objectives["latency_ms"]] for t in result.trials]
    expected = [result.trials[i].id for i in brute_front(points, ("min", "min"))]
    assert [t.id for t in result.pareto] == expected and 1 <= len(expected) < 30
    rows = result.table()
    assert {"loss", "latency_ms"} <= set(rows[0])
    assert "Pareto front" in repr(result)


def test_best_of_several_objectives_points_to_pareto():
    result = lk.sweep(F.returns_both, XY, trials=4, metric=["loss", "latency_ms"],
                      mode=["min", "max"], seed=0, store=None)
    with pytest.raises(InputError, match="result.pareto"):
        _ = result.best
    points = [[t.objectives["loss"], t.objectives["latency_ms"]] for t in result.trials]
    assert [t.id for t in result.pareto] == brute_front(points, ("min", "max"))


def test_a_single_metric_is_as_ever():
    result = lk.sweep(F.returns_both, XY, trials=3, metric="loss", mode="min", seed=0,
                      store=None)
    assert result.objectives == ("loss",) and result.best is not None
    assert result.pareto == [result.best]
    assert all(t.objectives == {"loss": t.value} for t in result.trials)


@pytest.mark.parametrize("metric, mode, argument", [
    (("loss", "latency_ms"), "min", "mode"),
    ("loss", ("min", "min"), "mode"),
    (("loss", "latency_ms"), ("min", "min", "max"), "mode"),
    (("loss", "loss"), ("min", "min"), "metric"),
    (("a", "b", "c", "d", "e"), ("min",) * 5, "metric"),
    (("loss",), ("min",), "metric"),
    (("loss", ""), ("min", "min"), "metric"),
    (("loss", "latency_ms"), ("min", "least"), "mode"),
])
def test_objectives_that_do_not_pair_are_refused_naming_them(metric, mode, argument):
    with pytest.raises(InputError) as info:
        lk.sweep(F.two_objectives, XY, trials=2, metric=metric, mode=mode, store=None)
    assert info.value.where["argument"] == argument


def test_the_config_keeps_tuples():
    config = SweepConfig(fn=F.two_objectives, space=XY, metric=["a", "b"], mode=["min", "max"])
    assert config.metric == ("a", "b") and config.objectives == (("a", "b"), ("min", "max"))


@pytest.mark.parametrize("fn, words", [
    (F.reports_one, "'latency_ms'"),
    (F.returns_one, "'latency_ms'"),
    (F.returns_number, "returned a number"),
])
def test_an_objective_missing_fails_the_trial_naming_it(fn, words):
    with pytest.raises(lk.errors.TaskError) as info:
        lk.sweep(fn, XY, trials=2, metric=("loss", "latency_ms"), mode=("min", "min"),
                 seed=0, store=None)
    result = info.value.result
    for t in result.trials:
        assert t.status == "failed" and words in t.error and f"trial {t.id}" in t.error
        assert "InputError" in t.error and t.objectives is None


def test_two_objectives_on_worker_processes(dask_scheduler):
    result = lk.sweep(F.two_objectives, XY, trials=6, metric=("loss", "latency_ms"),
                      mode=("min", "min"), seed=2, store=None, scheduler=dask_scheduler)
    assert all(t.objectives is not None and t.worker.startswith("tcp://")
               for t in result.trials)
    points = [[t.objectives["loss"], t.objectives["latency_ms"]] for t in result.trials]
    assert [t.id for t in result.pareto] == [result.trials[i].id
                                               for i in brute_front(points, ("min", "min"))]


def test_a_live_and_a_stored_sweep_say_their_objectives():
    from labkit.experiments.sweep import finished_run

    run = lk.sweep(F.returns_both, XY, trials=2, metric=("loss", "latency_ms"),
                   mode=("min", "max"), seed=0, store=None, wait=False)
    assert (run.sweep.objectives, run.sweep.modes) == (("loss", "latency_ms"), ("min", "max"))
    result = run.result(timeout=60)
    stored = finished_run(result).sweep
    assert (stored.objectives, stored.modes) == (("loss", "latency_ms"), ("min", "max"))
    assert all(row["objectives"] for row in stored.snapshot())
