"""A task a trial (the route of clusters on other hosts): a trial whose worker retires
gracefully moves, its record counts the move, and ``max_failures=0`` holds.

Dask runs the task again on another worker when its worker leaves; the rerun goes on from
the trial's last checkpoint.  Real worker processes, ``client.retire_workers``.
"""

from __future__ import annotations

import labkit as lk
from labkit.experiments import launch
from tests.experiments.test_retire_moves import X, _check_moved, _running_on
from tests.helpers import until
from tests.scheduling import elastic_functions as ef


def test_a_retired_workers_trial_task_moves_and_max_failures_zero_holds(monkeypatch):
    monkeypatch.setattr(launch, "SLOTS", False)  # a Dask task a trial (RemoteLauncher)
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        run = lk.sweep(ef.epochs, {**X, "pause": 0.4}, trials=4, metric="loss", mode="min",
                       scheduler=s, store=None, wait=False, max_failures=0, seed=0)
        until(lambda: len(_running_on(run)) == 2, 180, "two trials running on two workers")
        leaving = sorted(_running_on(run))[0]
        s.client.retire_workers([leaving])
        result = run.result(timeout=300)
        _check_moved(result, 4)
        moved = [t for t in result.trials if t.moves]
        assert all(leaving not in t.worker for t in moved)  # it ended on the worker left
        assert len(s.client.nthreads()) == 1
