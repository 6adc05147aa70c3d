"""Bad input to lk.sweep: each a labkit error naming the argument, raised before any trial runs."""

from __future__ import annotations

import threading

import pytest

import labkit as lk

RAN = []


def train(config, trial):
    RAN.append(config)
    trial.report(0, loss=1.0)


GOOD = dict(space={"x": lk.uniform(0, 1)}, trials=2, metric="loss", mode="min", store=None)

CASES = [
    ("empty range", dict(space={"x": lk.uniform(1, 1)}), lk.InputError, "x", "empty range"),
    ("reversed range", dict(space={"lr": lk.loguniform(1e-1, 1e-4)}), lk.InputError, "lr",
     "reversed range"),
    ("log of zero", dict(space={"lr": lk.loguniform(0, 1)}), lk.InputError, "lr", "0 < lo"),
    ("empty choice", dict(space={"w": lk.choice([])}), lk.InputError, "w", "at least one"),
    ("unknown mode", dict(mode="maximize"), lk.InputError, "mode", "'min' or 'max'"),
    ("no mode", dict(mode=None), lk.InputError, "mode", "'min' or 'max'"),
    ("zero trials", dict(trials=0), lk.InputError, "trials", ">= 1"),
    ("trials not an int", dict(trials=2.5), lk.InputError, "trials", ">= 1"),
    ("no trials for a random space", dict(trials=None), lk.InputError, "trials", "needed"),
    ("more trials than listed", dict(space=[{"x": 1}], trials=2), lk.InputError, "trials",
     "holds 1"),
    ("no metric", dict(metric=None), lk.InputError, "metric", "name of a reported metric"),
    ("a config that does not pickle", dict(space={"x": lk.choice([threading.Lock()])}),
     lk.InputError, "x", "cannot be pickled"),
    ("a constant that does not pickle", dict(space={"lock": threading.Lock(), "x": 1}),
     lk.InputError, "lock", "cannot be pickled"),
    ("a bad seed", dict(seed=-1), lk.InputError, "seed", ">= 0"),
    ("a bad rule", dict(early_stop="asha"), lk.InputError, "early_stop", "lk.ASHA"),
    ("a bad max_failures", dict(max_failures=-1), lk.InputError, "max_failures", ">= 0"),
    ("a bad max_concurrent", dict(max_concurrent=0), lk.InputError, "max_concurrent", ">= 1"),
    ("a bad workers_per_trial", dict(workers_per_trial=0), lk.InputError,
     "workers_per_trial", ">= 1"),
    ("wait not a bool", dict(wait="no"), lk.InputError, "wait", "True or False"),
    ("a scheduler that is not one", dict(scheduler="tcp://h:1"), lk.InputError, "scheduler",
     "lk.DaskScheduler"),
    ("a space that is not one", dict(space=5), lk.InputError, "space", "dict of parameters"),
    ("an empty name", dict(name=""), lk.InputError, "name", "non-empty"),
    ("a store that is not a path", dict(store=5), lk.InputError, "store", "file path"),
]


@pytest.mark.parametrize("label, change, error, argument, words", CASES,
                         ids=[c[0] for c in CASES])
def test_bad_input_is_refused_before_anything_runs(label, change, error, argument, words):
    RAN.clear()
    with pytest.raises(error) as info:
        lk.sweep(train, **{**GOOD, **change})
    assert info.value.where.get("argument") == argument, str(info.value)
    assert words in str(info.value)
    assert RAN == []
    assert lk.sweep(train, **GOOD).counts() == {"completed": 2}   # the same call, fixed, runs


def test_a_function_that_is_not_callable_is_refused():
    with pytest.raises(lk.InputError) as info:
        lk.sweep("train", **GOOD)
    assert info.value.where["argument"] == "fn"


def test_a_function_that_does_not_pickle_is_refused_for_worker_processes(dask_scheduler):
    lock = threading.Lock()

    def holds_a_lock(config, trial):
        with lock:
            trial.report(0, loss=1.0)
    with pytest.raises(lk.InputError) as info:
        lk.sweep(holds_a_lock, **{**GOOD, "scheduler": dask_scheduler})
    assert info.value.where["argument"] == "fn" and "cannot be pickled" in str(info.value)


def test_a_store_that_cannot_be_written_is_a_storage_error_before_anything_runs(tmp_path):
    RAN.clear()
    for path in (tmp_path / "no" / "such" / "folder.db", tmp_path):
        with pytest.raises(lk.StorageError) as info:
            lk.sweep(train, **{**GOOD, "store": path})
        assert str(path) in str(info.value)
    assert RAN == []


def test_a_shut_down_scheduler_is_refused():
    s = lk.LocalScheduler()
    s.shutdown()
    with pytest.raises(lk.InputError, match="shut down"):
        lk.sweep(train, **{**GOOD, "scheduler": s})


def test_more_workers_per_trial_than_an_in_process_clusters_threads_is_refused(threads_scheduler):
    RAN.clear()
    with pytest.raises(lk.InputError) as info:
        lk.sweep(train, **{**GOOD, "scheduler": threads_scheduler, "workers_per_trial": 3})
    assert info.value.where["argument"] == "workers_per_trial"
    assert "workers_per_trial=3" in str(info.value) and "2 thread(s)" in str(info.value)
    assert RAN == []
    fits = lk.sweep(train, **{**GOOD, "scheduler": threads_scheduler, "workers_per_trial": 2})
    assert fits.counts() == {"completed": 2}
