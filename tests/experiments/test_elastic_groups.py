"""A group trial (``workers_per_trial=2``) whose worker retires gracefully regroups and goes on
from its last checkpoint: a move, counted in its record's ``moves``, never in ``max_failures``.

Real worker processes under nannies; ``client.retire_workers`` closes one of the group's
workers between two steps of its ``DataParallelTrainer``.  A SIGKILL stays a failure
(tests/experiments/test_group_faults.py).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from torch import nn

import labkit as lk
from labkit.scheduling.dask.dask_adapter import left_gracefully, watch_retirements
from tests.experiments.test_group_faults import STEPS, alone
from tests.experiments.test_group_trials import batch, model_and_opt

SEEN: dict = {}  # (trial, attempt) -> what it saw; trial functions run on client threads
_LOCK = threading.Lock()


@pytest.fixture
def four():
    """Four worker processes (one thread each) under nannies."""
    with lk.DaskScheduler(mode="processes", n_workers=4, threads_per_worker=1) as s:
        yield s


@pytest.fixture(autouse=True)
def fresh():
    SEEN.clear()
    yield
    SEEN.clear()


def retiring_trial(config, trial):
    """Steps with a checkpoint after each; attempt 0 retires a worker of its group after step 2."""
    model, opt = model_and_opt(config["lr"])
    saved = trial.restore()
    if saved is not None:
        model.load_state_dict(saved["model"])
    trainer = lk.DataParallelTrainer(model, nn.functional.mse_loss, opt, scheduler=trial.scheduler)
    start = 0 if saved is None else saved["step"]
    with _LOCK:
        seen = SEEN[(trial.id, trial.attempt)] = dict(workers=trial.workers, start=start)
    try:
        for step in range(start, STEPS):
            if step == 2 and trial.attempt == 0:
                seen["retired"] = sorted(trial.workers)[0]
                trial.scheduler.client.retire_workers([seen["retired"]])
            loss = trainer.step(*batch(step))
            trial.report(step + 1, loss=loss)
            trial.checkpoint({"model": trainer.sync_model().state_dict(), "step": step + 1})
    finally:
        trainer.close()


def test_a_retired_worker_moves_its_group_trial_to_a_new_group_without_a_failure(four):
    result = lk.sweep(
        retiring_trial,
        [{"lr": 0.1}],
        scheduler=four,
        workers_per_trial=2,
        metric="loss",
        mode="min",
        store=None,
        max_failures=0,
    )
    record = result.trials[0]
    assert record.status.value == "completed", record.error
    assert record.moves == 1 and record.attempts == 2  # one move, and no failure allowed
    first, second = SEEN[(0, 0)], SEEN[(0, 1)]
    assert first["retired"] in first["workers"]
    assert second["start"] == 2  # from the checkpoint of step 2
    assert first["retired"] not in second["workers"] and len(set(second["workers"])) == 2
    assert [s for s, _, _ in record.history] == [1, 2, 3, 4, 5]
    losses = [m["loss"] for _, m, _ in record.history]
    np.testing.assert_allclose(losses, alone(0.1), rtol=1e-12)  # as if never interrupted
    assert first["retired"] not in set(four.client.nthreads())


def test_the_scheduler_tells_a_retired_worker_from_a_killed_one(four):
    import os
    import signal

    pids = four.run_on_workers(os.getpid)
    retired, killed, *_ = sorted(pids)
    watch_retirements(four.client)
    watch_retirements(four.client)  # once per scheduler: a second call changes nothing
    four.client.retire_workers([retired])
    os.kill(pids[killed], signal.SIGKILL)
    deadline = time.monotonic() + 60
    while {retired, killed} & set(four.client.nthreads()):
        assert time.monotonic() < deadline, "the workers never left"
        time.sleep(0.1)
    assert left_gracefully(four.client, [retired, killed]) == [retired]
