"""A trial whose worker leaves gracefully moves: it goes on from its last checkpoint on another
worker, its record counts a move, and ``max_failures`` does not count it.

On real worker processes: a cluster whose workers reach their ``lifetime`` and
restart (Dask's nannies), and ``client.retire_workers`` under running trials.
A sweep with no worker left says it waits for workers, then goes on.
"""

from __future__ import annotations

import labkit as lk
from tests import helpers
from tests.scheduling import elastic_functions as ef

X = {"x": lk.uniform(0, 1)}


def _running_on(run) -> dict:
    """Running trials that reported, by worker."""
    return {r["worker"]: r["id"] for r in run.sweep.snapshot()
            if r["status"] == "running" and r["step"] is not None and r["worker"]}


def _check_moved(result, trials: int, elsewhere: bool = True) -> None:
    """Every trial completed, each moved one went on from its checkpoint (steps unbroken);
    ``elsewhere``: on another worker process (it had reported before its worker left)."""
    assert result.counts() == {"completed": trials}, [(t.status, t.error) for t in result.trials]
    moved = [t for t in result.trials if t.moves]
    assert moved, [(t.id, t.attempts) for t in result.trials]
    for t in moved:
        steps = [step for step, _, _ in t.history]
        assert steps == list(range(8)), (t.id, steps)       # no epoch twice, none missing
        assert t.attempts == t.moves + 1
        if elsewhere:
            assert len({m["pid"] for _, m, _ in t.history}) >= 2  # on another worker process


def test_retire_workers_under_running_trials_moves_them_and_max_failures_zero_holds():
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        run = lk.sweep(ef.epochs, {**X, "pause": 0.4}, trials=4, metric="loss", mode="min",
                       scheduler=s, store=None, wait=False, max_failures=0, seed=0)
        helpers.until(lambda: len(_running_on(run)) == 2, 180, "two trials running on two workers")
        leaving = sorted(_running_on(run))[0]
        s.client.retire_workers([leaving])                  # the worker and its nanny close
        result = run.result(timeout=300)
        _check_moved(result, 4)
        assert any(t.moves for t in result.trials)
        assert len(s.client.nthreads()) == 1


def test_workers_that_reach_their_lifetime_restart_and_their_trials_move_not_fail():
    with helpers.LogRecords("labkit.experiments") as said, lk.DaskScheduler(
            mode="processes", n_workers=2, lifetime="8s", lifetime_stagger="0s",
            lifetime_restart=True) as s:
        run = lk.sweep(ef.epochs, {**X, "pause": 0.5}, trials=4, metric="loss", mode="min",
                       scheduler=s, store=None, wait=False, max_failures=0, seed=0)
        result = run.result(timeout=400)
        _check_moved(result, 4, elsewhere=False)  # a trial may move before its first report
        helpers.until(lambda: len(s.client.nthreads()) == 2, 300, "the workers to restart")
    # both workers left at once (no stagger): the sweep said it waited, and went on
    assert any("is waiting for workers" in m for m in said.messages), said.messages
    assert not any("lost its worker" in m for m in said.messages), said.messages
