"""A sweep started on a restricted scheduler (``trial.scheduler`` of a group trial) stays on its workers.

Four real worker processes; a group trial of two workers starts a sweep of its
own on ``trial.scheduler``: whatever the placement (slots, a task a trial,
groups), the inner trials run on the group's workers alone, and the inner
sweep counts only their threads.
"""

from __future__ import annotations

import threading

import pytest

import labkit as lk
from labkit.experiments import launch

SEEN: dict = {}  # outer trial id -> (its group, the inner trials' workers)
_LOCK = threading.Lock()


@pytest.fixture(autouse=True)
def fresh_seen():
    SEEN.clear()
    yield
    SEEN.clear()


def inner_trial(config, trial):
    """A trial of the inner sweep: one report; where it ran is the store's ``worker``."""
    trial.report(0, loss=config["x"])
    return {"loss": config["x"]}


def outer_trial(config, trial):
    """A group trial that runs a sweep of its own on ``trial.scheduler``."""
    k = config["inner_k"]
    inner = lk.sweep(
        inner_trial,
        {"x": lk.uniform(0, 1)},
        trials=6,
        metric="loss",
        mode="min",
        seed=config["seed"],
        scheduler=trial.scheduler,
        store=None,
        workers_per_trial=k,
    )
    workers = [t.worker for t in inner.trials]
    with _LOCK:
        SEEN[trial.id] = (tuple(trial.workers), workers)
    return {"loss": min(t.value for t in inner.trials)}


def _inner_workers_stay_in_groups(four, inner_k: int) -> None:
    """Two group trials at once, each with an inner sweep: its trials on its group alone."""
    result = lk.sweep(
        outer_trial,
        [{"seed": 1, "inner_k": inner_k}, {"seed": 2, "inner_k": inner_k}],
        metric="loss",
        mode="min",
        scheduler=four,
        store=None,
        workers_per_trial=2,
    )
    assert [t.status for t in result.trials] == ["completed", "completed"]
    assert sorted(SEEN) == [0, 1]
    for group, workers in SEEN.values():
        assert len(group) == 2 and len(workers) == 6
        for worker in workers:
            named = [w.strip() for w in worker.split(",")]
            assert set(named) <= set(group), (worker, group)


def test_an_inner_sweep_in_slots_runs_on_the_groups_workers_alone(four):
    _inner_workers_stay_in_groups(four, inner_k=1)


def test_an_inner_sweep_of_a_task_a_trial_runs_on_the_groups_workers_alone(four, monkeypatch):
    monkeypatch.setattr(launch, "SLOTS", False)
    _inner_workers_stay_in_groups(four, inner_k=1)


def test_an_inner_sweep_of_groups_runs_on_the_groups_workers_alone(four):
    _inner_workers_stay_in_groups(four, inner_k=2)


@pytest.mark.parametrize("slots", [True, False])
def test_a_sweep_on_a_restricted_scheduler_counts_only_its_workers(four, monkeypatch, slots):
    monkeypatch.setattr(launch, "SLOTS", slots)
    group = sorted(four.client.nthreads())[:2]
    restricted = four.restricted(group)
    try:
        launcher = launch.launcher_for(restricted, None, inner_trial, False, 1, None)
        assert launcher.slots() == 2
        grouped = launch.launcher_for(restricted, None, inner_trial, False, 2, None)
        assert grouped.slots() == 1
    finally:
        restricted.shutdown()
