"""Group trials (``workers_per_trial=2``) whose workers are SIGKILLed, or which are stopped inside a fit.

Real worker processes under nannies: a killed worker comes back under a new
address, and the trial runs again from its checkpoint on a whole new group.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest
import torch
from torch import nn

import labkit as lk
from tests.experiments.test_group_trials import batch, model_and_opt, ranks_held

SEEN: dict = {}  # (trial, attempt) -> what it saw; trial functions run on client threads
_LOCK = threading.Lock()
STEPS = 5


@pytest.fixture
def four():
    """Four worker processes (one thread each) under nannies; a test may kill some."""
    with lk.DaskScheduler(mode="processes", n_workers=4, threads_per_worker=1) as s:
        yield s


@pytest.fixture(scope="module")
def two():
    """Two worker processes that no test kills, shared: the uninterrupted runs to compare with."""
    with lk.DaskScheduler(mode="processes", n_workers=2, threads_per_worker=1) as s:
        yield s


@pytest.fixture(autouse=True)
def fresh():
    SEEN.clear()
    yield
    SEEN.clear()


def lost_parameters(recwarn) -> list[str]:
    """The warnings that said a trainer lost its trained parameters (from any thread)."""
    return [str(w.message) for w in recwarn if "trained parameters" in str(w.message)]


def kill_one(scheduler) -> str:
    """SIGKILL the first worker of ``scheduler`` (a trial's group); its address."""
    pids = scheduler.run_on_workers(os.getpid)
    victim = sorted(pids)[0]
    os.kill(pids[victim], signal.SIGKILL)
    return victim


def stepping_trial(config, trial):
    """Client-fed steps with a checkpoint after each; attempt 0 kills a worker after step 2."""
    model, opt = model_and_opt(config["lr"])
    saved = trial.restore()
    if saved is not None:  # the model as it was at the checkpoint, then the trainer
        model.load_state_dict(saved["model"])
    trainer = lk.DataParallelTrainer(model, nn.functional.mse_loss, opt, scheduler=trial.scheduler)
    start = 0 if saved is None else saved["step"]
    with _LOCK:
        SEEN[(trial.id, trial.attempt)] = dict(workers=trial.workers, start=start)
    try:
        for step in range(start, STEPS):
            if step == 2 and trial.attempt < config["kills"]:
                SEEN[(trial.id, trial.attempt)]["killed"] = kill_one(trial.scheduler)
            loss = trainer.step(*batch(step))
            trial.report(step + 1, loss=loss)
            trial.checkpoint({"model": trainer.sync_model().state_dict(), "step": step + 1})
    finally:
        trainer.close()


def alone(lr: float, scheduler=None) -> list[float]:
    """The same steps on two workers outside any sweep, never interrupted (on ``scheduler``'s
    two workers if given, else on a cluster of its own)."""
    if scheduler is None:
        with lk.DaskScheduler(mode="processes", n_workers=2, threads_per_worker=1) as two:
            return alone(lr, two)
    model, opt = model_and_opt(lr)
    trainer = lk.DataParallelTrainer(model, nn.functional.mse_loss, opt, scheduler=scheduler)
    try:
        return [trainer.step(*batch(step)) for step in range(STEPS)]
    finally:
        trainer.close()


def test_a_killed_worker_restarts_its_group_trial_from_its_checkpoint_on_a_new_group(four, two,
                                                                                     recwarn):
    before = set(four.client.nthreads())
    result = lk.sweep(stepping_trial, [{"lr": 0.1, "kills": 1}], scheduler=four,
                      workers_per_trial=2, metric="loss", mode="min", store=None)
    record = result.trials[0]
    assert record.status.value == "completed", record.error
    assert record.attempts == 2
    first, second = SEEN[(0, 0)], SEEN[(0, 1)]
    assert first["killed"] in first["workers"]
    assert second["start"] == 2  # from the checkpoint of step 2, not from the start
    assert first["killed"] not in second["workers"]  # a whole new group, without the dead one
    assert len(set(second["workers"])) == 2
    assert set(second["workers"]) <= set(four.client.nthreads())
    assert record.worker == ", ".join(second["workers"])
    steps = [s for s, _, _ in record.history]
    assert steps == [1, 2, 3, 4, 5]  # nothing reported twice, nothing missing
    losses = [m["loss"] for _, m, _ in record.history]
    np.testing.assert_allclose(losses, alone(0.1, two), rtol=1e-12)  # as if never interrupted
    assert first["killed"] in before and first["killed"] not in set(four.client.nthreads())
    assert not lost_parameters(recwarn)  # the lost try's close() is quiet (issue 44)


def test_a_group_trial_that_keeps_losing_workers_fails_after_max_failures(four, recwarn):
    result = lk.sweep(stepping_trial, [{"lr": 0.1, "kills": 9}, {"lr": 0.1, "kills": 0}],
                      scheduler=four, workers_per_trial=2, metric="loss", mode="min",
                      store=None, max_failures=1)
    record, other = result.trials
    assert other.status.value == "completed" and other.attempts == 1
    assert record.status.value == "failed"
    assert "WorkerLostError" in record.error and "trial 0" in record.error
    assert record.attempts == 2  # its first run and one restart
    assert [s for s, _, _ in record.history] == [1, 2]
    assert not lost_parameters(recwarn)


def waiting_trial(config, trial):
    """Attempt 0 waits on a long task of its group while a timer kills one of its workers."""
    with _LOCK:
        SEEN[(trial.id, trial.attempt)] = dict(workers=trial.workers)
    if trial.attempt == 0:
        timer = threading.Timer(0.5, lambda: SEEN[(trial.id, 0)].update(killed=kill_one(trial.scheduler)))
        timer.start()
        try:
            trial.scheduler.add_tasks(range(2), lk.FunctionCallable(lambda _: time.sleep(60)))
            trial.scheduler.get_results()  # the watch takes the group back: this returns
        finally:
            timer.join()
            SEEN[(trial.id, 0)]["returned"] = time.monotonic()
    trial.report(1, loss=config["lr"])


def test_a_trial_waiting_on_a_lost_worker_is_taken_back_and_runs_again(four):
    start = time.monotonic()
    result = lk.sweep(waiting_trial, [{"lr": 0.5}], scheduler=four, workers_per_trial=2,
                      metric="loss", mode="min", store=None)
    record = result.trials[0]
    assert record.status.value == "completed"
    assert record.attempts == 2
    assert SEEN[(0, 0)]["returned"] - start < 30  # not the 60 s the tasks would take
    assert SEEN[(0, 0)]["killed"] not in SEEN[(0, 1)]["workers"]


def fitting_trial(config, trial):
    """A long fit over (X, y) on the group; the time the fit ended and how."""
    model, opt = model_and_opt(0.01)
    trainer = lk.DataParallelTrainer(model, nn.functional.mse_loss, opt, scheduler=trial.scheduler)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 5, generator=g, dtype=torch.float64)
    y = x.sum(dim=1, keepdim=True)
    seen = SEEN[(trial.id, trial.attempt)] = dict(workers=trial.workers, fitting=threading.Event(),
                                                  trainer=trainer)
    seen["fitting"].set()
    try:
        trainer.fit((x, y), batch_size=16, epochs=1000)
        seen["how"] = "returned"
    except Exception as exc:
        seen["how"] = type(exc).__name__
    finally:
        seen["ended"] = time.monotonic()
    trial.report(1, loss=0.0)


def test_a_stop_by_hand_ends_a_group_trials_fit_at_its_next_step_and_frees_its_workers(four,
                                                                                       recwarn):
    run = lk.sweep(fitting_trial, [{}, {}], scheduler=four, workers_per_trial=4,
                   metric="loss", mode="min", store=None, wait=False)
    while (0, 0) not in SEEN:
        time.sleep(0.02)
    SEEN[(0, 0)]["fitting"].wait(30)
    # into the fit (1000 epochs of 16 steps would take minutes): a few steps taken
    deadline = time.monotonic() + 60
    while SEEN[(0, 0)]["trainer"].steps < 3:
        assert time.monotonic() < deadline, "the fit took no 3 steps in 60 s"
        time.sleep(0.02)
    stopped_at = time.monotonic()
    assert run.sweep.stop(0)
    while (1, 0) not in SEEN:  # the second trial needs all four workers: freed by the stop
        time.sleep(0.02)
    SEEN[(1, 0)]["fitting"].wait(30)
    run.sweep.stop(1)
    result = run.result(timeout=60)
    assert [t.status.value for t in result.trials] == ["stopped", "stopped"]
    # the fit raised where it stood (its scheduler shut down under it), not at its end,
    # and as a stop raises on any other placement (it was SchedulerError, issue 44)
    assert SEEN[(0, 0)]["how"] == "TrialStopped"
    assert SEEN[(0, 0)]["ended"] - stopped_at < 10
    assert set(four.run_on_workers(ranks_held).values()) == {0}
    assert not lost_parameters(recwarn)  # a stopped trial's trainer closes quietly (issue 44)


EPOCHS = 3


def data():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4096, 5, generator=g, dtype=torch.float64)
    return x, x.sum(dim=1, keepdim=True) * 0.5


def fit_epochs(trainer, start: int, after_epoch) -> None:
    """Epochs ``start..EPOCHS-1`` of a fit over (X, y), each its own seeded shuffle."""
    for epoch in range(start, EPOCHS):
        history = trainer.fit(data(), batch_size=16, epochs=1, seed=epoch)
        after_epoch(epoch, history[-1]["loss"])


def fitting_epochs_trial(config, trial):
    """Epoch by epoch with a checkpoint after each; attempt 0's epoch 2 loses a worker mid-fit."""
    model, opt = model_and_opt(0.05)
    saved = trial.restore()
    if saved is not None:
        model.load_state_dict(saved["model"])
    trainer = lk.DataParallelTrainer(model, nn.functional.mse_loss, opt, scheduler=trial.scheduler)
    start = 0 if saved is None else saved["epoch"]
    SEEN[(trial.id, trial.attempt)] = dict(workers=trial.workers, start=start)

    def after_epoch(epoch, loss):
        trial.report(epoch + 1, loss=loss)
        trial.checkpoint({"model": trainer.sync_model().state_dict(), "epoch": epoch + 1})
        if epoch == 0 and trial.attempt == 0:  # the next epoch loses a worker part-way
            timer = threading.Timer(0.3, lambda: SEEN[(trial.id, 0)].update(
                killed=kill_one(trial.scheduler), at=time.monotonic()))
            timer.start()

    try:
        fit_epochs(trainer, start, after_epoch)
    finally:
        trainer.close()


def test_a_worker_killed_inside_a_fit_costs_the_trial_its_epoch_since_the_checkpoint(four, two,
                                                                                     recwarn):
    result = lk.sweep(fitting_epochs_trial, [{}], scheduler=four, workers_per_trial=2,
                      metric="loss", mode="min", store=None)
    record = result.trials[0]
    assert record.status.value == "completed", record.error
    assert record.attempts == 2 and SEEN[(0, 1)]["start"] == 1
    assert not lost_parameters(recwarn)  # the lost try's close() is quiet (issue 44)
    assert SEEN[(0, 0)]["killed"] not in SEEN[(0, 1)]["workers"]
    assert [s for s, _, _ in record.history] == [1, 2, 3]
    model, opt = model_and_opt(0.05)
    trainer = lk.DataParallelTrainer(model, nn.functional.mse_loss, opt, scheduler=two)
    losses: list = []
    try:
        fit_epochs(trainer, 0, lambda epoch, loss: losses.append(loss))
    finally:
        trainer.close()
    np.testing.assert_allclose([m["loss"] for _, m, _ in record.history], losses, rtol=1e-12)
