"""A trial whose worker gets a preemption notice (SIGTERM) moves, as a retired worker's does:
it goes on from its last checkpoint on another worker, its record counts a move, and
``max_failures=0`` holds.  A SIGKILL stays a loss that ``max_failures`` counts.

Real worker processes under nannies, signalled mid-trial: under slots (the default on this
machine), a task a trial (:mod:`labkit.experiments.launch.remote`, with a ``dask worker``
process signalled as Kubernetes and spot machines signal it) and group trials.
"""

from __future__ import annotations

import os
import signal
import threading

import pytest
from torch import nn

import labkit as lk
from labkit.experiments import launch
from tests.experiments.test_group_faults import STEPS
from tests.experiments.test_group_trials import batch, model_and_opt
from tests.experiments.test_retire_moves import X, _check_moved, _running_on
from tests.helpers import until
from tests.scheduling import elastic_functions as ef
from tests.scheduling.test_preemption import dask_worker

SEEN: dict = {}  # (trial, attempt) -> what it saw; group trial functions run on client threads
_LOCK = threading.Lock()


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_a_signalled_workers_slot_trial_moves_on_sigterm_and_is_lost_on_sigkill(sig):
    with lk.DaskScheduler(mode="processes", n_workers=2, threads_per_worker=1) as s:
        run = lk.sweep(ef.epochs, {**X, "pause": 0.4}, trials=4, metric="loss", mode="min",
                       scheduler=s, store=None, wait=False, max_failures=0, seed=0)
        until(lambda: len(_running_on(run)) == 2, 180, "two trials running on two workers")
        leaving = sorted(_running_on(run))[0]
        os.kill(s.run_on_workers(os.getpid)[leaving], getattr(signal, sig))
        result = run.result(timeout=300)
    if sig == "SIGTERM":
        _check_moved(result, 4)
        assert sum(t.moves for t in result.trials) == 1
        assert all(t.attempts == t.moves + 1 for t in result.trials)  # no failure among them
    else:  # unannounced: a loss, and max_failures=0 allows none
        failed = [t for t in result.trials if t.status.value == "failed"]
        assert len(failed) == 1, [(t.status, t.error) for t in result.trials]
        assert "was lost" in failed[0].error and failed[0].moves == 0


def test_a_sigterm_to_a_dask_worker_moves_its_trial_task(monkeypatch):
    monkeypatch.setattr(launch, "SLOTS", False)  # a Dask task a trial (RemoteLauncher)
    with lk.DaskScheduler(mode="processes", n_workers=1, threads_per_worker=1) as s, \
            dask_worker(s.client) as (proc, address):
        run = lk.sweep(ef.epochs, {**X, "pause": 0.4}, trials=4, metric="loss", mode="min",
                       scheduler=s, store=None, wait=False, max_failures=0, seed=0)
        until(lambda: address in _running_on(run), 180, "a trial running on the dask worker")
        proc.send_signal(signal.SIGTERM)  # the nanny closes its worker, as on a pod's eviction
        result = run.result(timeout=300)
        assert proc.wait(60) == 0
    _check_moved(result, 4)
    moved = [t for t in result.trials if t.moves]
    assert len(moved) == 1 and moved[0].attempts == 2 and address not in moved[0].worker


def preempted_trial(config, trial):
    """Steps with a checkpoint after each; attempt 0 SIGTERMs a worker of its group after step 2
    and waits for it to leave."""
    model, opt = model_and_opt(config["lr"])
    saved = trial.restore()
    if saved is not None:
        model.load_state_dict(saved["model"])
    trainer = lk.DataParallelTrainer(model, nn.functional.mse_loss, opt, scheduler=trial.scheduler)
    start = 0 if saved is None else saved["step"]
    with _LOCK:
        seen = SEEN[(trial.id, trial.attempt)] = dict(workers=trial.workers, start=start)
    client = trial.scheduler.client
    try:
        for step in range(start, STEPS):
            if step == 2 and trial.attempt == 0:
                seen["left"] = leaving = sorted(trial.workers)[0]
                os.kill(client.run(os.getpid, workers=[leaving])[leaving], signal.SIGTERM)
                until(lambda w=leaving: w not in client.nthreads(), 120, "the worker to leave")
            loss = trainer.step(*batch(step))
            trial.report(step + 1, loss=loss)
            trial.checkpoint({"model": trainer.sync_model().state_dict(), "step": step + 1})
    finally:
        trainer.close()


def test_a_sigterm_to_a_group_trials_worker_regroups_it_without_a_failure():
    SEEN.clear()
    with lk.DaskScheduler(mode="processes", n_workers=4, threads_per_worker=1) as s:
        result = lk.sweep(preempted_trial, [{"lr": 0.1}], scheduler=s, workers_per_trial=2,
                          metric="loss", mode="min", store=None, max_failures=0)
        record = result.trials[0]
        assert record.status.value == "completed", record.error
        assert record.moves == 1 and record.attempts == 2  # one move, and no failure allowed
        first, second = SEEN[(0, 0)], SEEN[(0, 1)]
        assert second["start"] == 2  # from the checkpoint of step 2
        assert first["left"] not in second["workers"] and len(set(second["workers"])) == 2
        assert [step for step, _, _ in record.history] == [1, 2, 3, 4, 5]
        assert first["left"] not in set(s.client.nthreads())
    SEEN.clear()
