"""Group trials on workers that come and go by their ``lifetime`` (issue 47).

Real worker processes under nannies, real ``DataParallelTrainer`` replicas (gloo):

- a worker with a lifetime says when it retires (counted from the worker's start, not
  from when labkit first asked), and workers told to warm up import torch as they start,
  a restarted one too, before any task reaches them;
- a group is never formed on a worker about to retire, and a trial whose worker retires
  before its next checkpoint moves right after the one it wrote;
- a sweep of group trials on 15 s lifetimes completes with no failure, each trial's
  losses exactly those of an uninterrupted run (it goes on from its last checkpoint).
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
import time

import numpy as np
import pytest
import torch
from torch import nn

import labkit as lk
from labkit.experiments.launch.group import RANK_MODULES
from labkit.experiments.launch.placement import LIFE_LEAST
from labkit.scheduling.dask.connect import scheduler_identity
from labkit.scheduling.dask.dask_adapter import watch_retirements
from labkit.scheduling.dask.preemption import RETIRES_AT, retires_in
from labkit.scheduling.dask.warming import WARM, warm_workers
from tests import helpers

SEEN: dict = {}  # (trial, attempt) -> what it saw; group trial functions run on client threads
_LOCK = threading.Lock()


_until = functools.partial(helpers.until, every=0.1)   # a look asks the scheduler


@pytest.fixture(autouse=True)
def fresh():
    SEEN.clear()
    yield
    SEEN.clear()


def _metrics(client) -> dict:
    """Each worker's metrics, as the scheduler has them from its heartbeats."""
    return {a: w.get("metrics") or {} for a, w in scheduler_identity(client)["workers"].items()}


def test_a_worker_says_when_its_lifetime_ends_from_its_start_and_warms_up_when_told():
    before = time.time()
    with lk.DaskScheduler(
        mode="processes", n_workers=2, threads_per_worker=1, lifetime="300s",
        lifetime_stagger="0s", lifetime_restart=True,
    ) as s:  # fmt: skip
        client = s.client
        client.wait_for_workers(2)
        up = time.time()
        watch_retirements(client)  # labkit's worker plugin, as every sweep on workers has it
        warm_workers(client, RANK_MODULES)  # as a group sweep has them
        told = _until(
            lambda: (m := _metrics(client)) and all(RETIRES_AT in v for v in m.values()) and m,
            60, "each worker to say when it retires",
        )  # fmt: skip
        for at in (v[RETIRES_AT] for v in told.values()):
            assert before + 300 <= at <= up + 300  # from the worker's start, not the plugin's
        _until(lambda: all(v.get(WARM) is True for v in _metrics(client).values()), 120, "warm")
        assert all(client.run(_warmed).values())
        # a worker that starts afresh warms up as it starts: no task has reached it yet
        client.restart()
        _until(lambda: len(_metrics(client)) == 2, 120, "the workers to restart")
        _until(lambda: all(v.get(WARM) is True for v in _metrics(client).values()), 120, "warm")
        assert all(client.run(_warmed).values())


def _warmed() -> bool:
    """On a worker: whether what a rank runs is imported, and torch's first optimizer made
    (it imports torch._dynamo)."""
    return all(
        name in sys.modules
        for name in ("torch", "torch._dynamo", "labkit.data_parallel.worker.training")
    )


def _model(lr: float):
    """A small MLP and its optimizer, the same every time (its own generator)."""
    gen = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1)).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * 0.5)
    return model, torch.optim.SGD(model.parameters(), lr=lr)


def _batch(epoch: int):
    """The epoch's batch: 64 rows of 5 features and their target."""
    x = torch.randn(64, 5, generator=torch.Generator().manual_seed(100 + epoch), dtype=torch.float64)
    return x, x.sum(dim=1, keepdim=True) * 0.5


def uninterrupted(lr: float, epochs: int, steps: int) -> list:
    """The losses of the same training in one process, never interrupted."""
    model, opt = _model(lr)
    losses = []
    for epoch in range(epochs):
        x, y = _batch(epoch)
        for _ in range(steps):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
        losses.append(loss.item())
    return losses


def group_epochs(config, trial):
    """Epochs of data-parallel steps, a pause, a report and a checkpoint each; goes on from
    its last checkpoint.  Notes the least life its workers had left as it started."""
    pool = scheduler_identity(trial.scheduler.client)["workers"]
    least = min(retires_in(pool[w]) if w in pool else 0.0 for w in trial.workers)
    with _LOCK:
        SEEN[(trial.id, trial.attempt)] = dict(workers=trial.workers, least=least)
    model, opt = _model(float(config["lr"]))
    saved = trial.restore()
    if saved is not None:
        model.load_state_dict(saved["model"])
    trainer = lk.DataParallelTrainer(model, nn.functional.mse_loss, opt, scheduler=trial.scheduler)
    try:
        for epoch in range(0 if saved is None else saved["epoch"], int(config["epochs"])):
            x, y = _batch(epoch)
            for _ in range(int(config["steps"])):
                loss = trainer.step(x, y)
            time.sleep(float(config["pause"]))
            trial.report(epoch, loss=float(loss))
            trial.checkpoint({"model": trainer.sync_model().state_dict(), "epoch": epoch + 1})
    finally:
        trainer.close()
    return {"loss": float(loss)}


def _check_exact(result, config: dict) -> None:
    """Every trial completed with each epoch reported once, its losses as if never moved."""
    assert result.counts() == {"completed": len(result.trials)}, [
        (t.id, t.status, t.error) for t in result.trials
    ]
    for t in result.trials:
        assert [s for s, _, _ in t.history] == list(range(config["epochs"])), t.id
        assert t.attempts == t.moves + 1  # every restart a move, none a failure
        expected = uninterrupted(t.config["lr"], config["epochs"], config["steps"])
        np.testing.assert_allclose([m["loss"] for _, m, _ in t.history], expected, rtol=1e-9)


def test_a_trial_moves_after_its_checkpoint_before_its_worker_retires_never_onto_one_leaving():
    # some 30 s of epochs: at least one retirement of the 15 s workers falls within
    config = {"lr": 0.05, "epochs": 80, "steps": 1, "pause": 0.3}
    with helpers.LogRecords("labkit.experiments", logging.INFO) as said, lk.DaskScheduler(
        mode="processes", n_workers=2, threads_per_worker=1, lifetime="15s",
        lifetime_stagger="0s", lifetime_restart=True,
    ) as s:  # fmt: skip
        result = lk.sweep(
            group_epochs, [config], scheduler=s, workers_per_trial=2, metric="loss", mode="min",
            store=None, max_failures=0, wait=False,
        ).result(timeout=600)  # fmt: skip
    _check_exact(result, config)
    assert result.trials[0].moves >= 1
    assert any("retires in" in m for m in said.messages), said.messages  # moved before
    for seen in SEEN.values():  # never formed on a worker about to retire
        assert seen["least"] >= LIFE_LEAST - 1.0, SEEN  # 1 s: from its pick to its start


def test_a_group_sweep_on_workers_of_15_s_lifetimes_completes_without_a_failure():
    config = {"lr": lk.uniform(0.01, 0.2), "epochs": 4, "steps": 4, "pause": 0.5}
    with lk.DaskScheduler(
        mode="processes", n_workers=4, threads_per_worker=1, lifetime="15s",
        lifetime_stagger="3.75s", lifetime_restart=True,
    ) as s:  # fmt: skip
        result = lk.sweep(
            group_epochs, config, trials=4, scheduler=s, workers_per_trial=2, metric="loss",
            mode="min", store=None, max_failures=0, seed=0, wait=False,
        ).result(timeout=600)  # fmt: skip
    _check_exact(result, config)
