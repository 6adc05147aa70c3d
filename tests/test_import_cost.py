"""What ``import labkit`` costs, and what a worker process imports to run labkit's work.

Every new Dask worker (one restarted after its lifetime, one an adaptive cluster adds)
imports labkit before its first trial.  scikit-learn and scipy took about a second of it,
for ``lk.NotFittedError`` (a subclass of scikit-learn's) and ``lk.ensemble``: both are
now made on first use.  Real processes: a fresh ``python -c`` and a ``LocalCluster``'s
workers after a sweep's trials (slots, a task a trial, a group trial) and a flow's
training.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import numpy as np

import labkit as lk
from labkit.experiments import launch

#: Libraries a worker never needs to run a labkit trial or flow (torch only for torch's work).
HEAVY = ("sklearn", "scipy", "bokeh", "ipywidgets", "torch")


def _fresh_python(code: str, stdin: bytes = b"") -> str:
    """Run ``code`` in a fresh interpreter; its stdout (an error's stderr fails the test)."""
    done = subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def heavy_modules() -> list[str]:
    """The libraries of :data:`HEAVY` this process has imported."""
    return sorted(name for name in HEAVY if name in sys.modules)


def test_import_labkit_imports_no_heavy_library():
    code = ("import json, sys, labkit\n"
            f"print(json.dumps(sorted(n for n in {HEAVY!r} if n in sys.modules)))")
    assert json.loads(_fresh_python(code)) == []


def test_the_lazy_names_are_listed_and_resolve_on_first_use():
    code = ("import json, sys, labkit as lk\n"
            "listed = sorted({'ensemble', 'NotFittedError'} - set(dir(lk)))\n"
            "missing = sorted(n for n in lk.__all__ if n not in dir(lk))\n"
            "import sklearn.exceptions\n"
            "ok = issubclass(lk.NotFittedError, sklearn.exceptions.NotFittedError)\n"
            "ok = ok and lk.ensemble.SuperLearner is lk.ensemble.estimators.SuperLearner\n"
            "ok = ok and lk.NotFittedError is lk.errors.NotFittedError\n"
            "resolved = all(getattr(lk, n) is not None for n in lk.__all__)\n"
            "print(json.dumps([listed, missing, ok, resolved]))")
    assert json.loads(_fresh_python(code)) == [[], [], True, True]


def test_not_fitted_error_is_scikit_learns_and_pickles_into_a_fresh_process():
    import sklearn.exceptions

    pca = lk.nodes.PCA(output_dim=2)
    pca.train(np.ones((4, 3)))  # one phase open: execute is refused
    try:
        pca.execute(np.ones((2, 3)))
    except sklearn.exceptions.NotFittedError as exc:  # scikit-learn's except catches labkit's
        err = exc
    assert type(err) is lk.NotFittedError and isinstance(err, lk.TrainingError)
    assert type(err).__module__ == "labkit.errors" and type(err).__qualname__ == "NotFittedError"
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is lk.NotFittedError and again.where == err.where
    # a process that never touched the class: unpickling makes it there, the same class
    code = ("import pickle, sys, sklearn.exceptions, labkit.errors as e\n"
            "err = pickle.loads(sys.stdin.buffer.read())\n"
            "print(type(err) is e.NotFittedError, isinstance(err, sklearn.exceptions.NotFittedError),"
            " err.where)")
    shown = _fresh_python(code, pickle.dumps(err))
    assert shown.split(" ", 2)[:2] == ["True", "True"] and "PCA" in shown


def test_threads_asking_first_all_get_one_class():
    code = ("import threading, labkit.errors as e\n"
            "got, gate = [], threading.Barrier(8)\n"
            "def ask():\n"
            "    gate.wait()\n"
            "    got.append(e.not_fitted_kind())\n"
            "threads = [threading.Thread(target=ask) for _ in range(8)]\n"
            "[t.start() for t in threads]; [t.join() for t in threads]\n"
            "print(len(got), len({id(k) for k in got}), got[0] is e.NotFittedError)")
    assert _fresh_python(code).split() == ["8", "1", "True"]


def train(config, trial):
    """A small trial: two reports and a checkpoint."""
    for step in range(2):
        trial.report(step, loss=config["x"] + step)
        trial.checkpoint({"step": step})
    return {"loss": config["x"]}


def _sweep(scheduler, **options):
    """Two trials of :func:`train` on ``scheduler``; every one completed."""
    result = lk.sweep(train, {"x": lk.uniform(0, 1)}, trials=2, metric="loss", mode="min",
                      scheduler=scheduler, store=None, seed=0, **options)
    assert [t.status for t in result.trials] == ["completed", "completed"]


def test_workers_run_trials_and_flows_without_heavy_libraries(monkeypatch):
    # spawned: the suite's fork server loads torch for the clusters that train
    # (tests/conftest.py), so a forked worker would start with it
    with lk.DaskScheduler(mode="processes", n_workers=2, threads_per_worker=1,
                          start_method="spawn") as s:
        _sweep(s)  # slots
        _sweep(s, workers_per_trial=2)  # a group trial
        monkeypatch.setattr(launch, "SLOTS", False)
        _sweep(s)  # a Dask task a trial
        x = np.random.default_rng(0).normal(size=(400, 5))
        flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
        flow.train([np.array_split(x, 4)], scheduler=s)
        assert flow.execute(x, scheduler=s).shape == (400, 2)
        found = s.run_on_workers(heavy_modules)
    assert len(found) == 2 and all(names == [] for names in found.values()), found
