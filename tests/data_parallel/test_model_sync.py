"""The model a user holds is the model the workers trained (issue 44, section 1).

On real worker processes: after every ``fit``, ``step`` and ``evaluate`` of a
``DataParallelTrainer`` the user's ``model`` and ``optimizer`` hold what the
ranks hold, also after a fit that raised and after a worker SIGKILLed mid-fit;
``sync_model=False`` skips the copy and the model then says it is stale.
"""

from __future__ import annotations

import copy
import os
import signal
import threading
import time
import warnings

import dask.array as da
import pytest
import torch
from torch import nn

import labkit as lk
from labkit.data_parallel import DataParallelTrainer
from labkit.data_parallel.guards import NonFiniteLossError

from .test_faults import assert_equal_states


def blobs(rows: int = 600, seed: int = 0):
    """Three classes of points around three centres: an easy problem a few epochs learn."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(3, 8, generator=g) * 2.5
    y = torch.randint(0, 3, (rows,), generator=g)
    return centres[y] + torch.randn(rows, 8, generator=g), y


def classifier(seed: int = 0) -> nn.Module:
    """A small MLP whose first guesses are poor (its last layer starts far from zero)."""
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.8)
    return model


def accuracy(model: nn.Module, x, y) -> float:
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def accuracy_of_state(state: dict, x, y) -> float:
    """The accuracy of a fresh model given ``state`` (what the workers hold)."""
    model = classifier()
    model.load_state_dict(state["model"])
    return accuracy(model, x, y)


def assert_holds_the_workers_state(trainer, model, optimizer) -> dict:
    """``model`` and ``optimizer`` equal what rank 0 holds; that state."""
    state = trainer.state_dict()
    assert_equal_states(dict(model.state_dict()), dict(state["model"]))
    assert_equal_states(optimizer.state_dict(), state["optimizer"])
    return state


def mean_loss(model: nn.Module, x, y) -> float:
    with torch.no_grad():
        return float(nn.functional.cross_entropy(model(x), y))


def ce(outputs, targets):
    return nn.functional.cross_entropy(outputs, targets)


@pytest.fixture(scope="module")
def two():
    """Two worker processes, one thread each."""
    with lk.DaskScheduler(mode="processes", n_workers=2, threads_per_worker=1) as s:
        yield s


@pytest.mark.parametrize("where", ["client", "workers"])
def test_after_each_of_three_fits_the_model_is_the_trained_one(two, where):
    x, y = blobs()
    data = (x, y) if where == "client" else (da.from_array(x.numpy(), chunks=150),
                                             da.from_array(y.numpy(), chunks=150))
    model = classifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    before = accuracy(model, x, y)
    losses, accuracies = [], []
    with DataParallelTrainer(model, ce, optimizer, scheduler=two) as trainer:
        for epoch in range(3):
            history = trainer.fit(data, batch_size=64, epochs=1, seed=epoch)
            losses.append(history[-1]["loss"])
            accuracies.append(accuracy(model, x, y))  # the user's model, on the client
            state = assert_holds_the_workers_state(trainer, model, optimizer)
            assert accuracies[-1] == accuracy_of_state(state, x, y)
            assert optimizer.state_dict()["state"][0]["step"] == trainer.steps
    assert losses[0] > losses[1] > losses[2]
    assert accuracies[-1] > before + 0.3, (before, accuracies)


def test_a_step_an_evaluate_and_a_fit_without_waiting_leave_the_trained_model(two):
    x, y = blobs()
    model = classifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    start = copy.deepcopy(model.state_dict())
    with DataParallelTrainer(model, ce, optimizer, scheduler=two) as trainer:
        trainer.step(x[:64], y[:64])
        assert not torch.equal(model[0].weight, start["0.weight"])
        assert_holds_the_workers_state(trainer, model, optimizer)
        trainer.step(x[64:128], y[64:128])
        assert_holds_the_workers_state(trainer, model, optimizer)
        metric = {"accuracy": lambda out, t: (out.argmax(1) == t).double().mean()}
        values = trainer.evaluate((x, y), metrics=metric, batch_size=200)
        assert values["accuracy"] == pytest.approx(accuracy(model, x, y), abs=1e-6)
        assert values["loss"] == pytest.approx(mean_loss(model, x, y), rel=1e-5)
        run = trainer.fit((x, y), batch_size=64, epochs=2, wait=False)
        run.result(120)
        assert_holds_the_workers_state(trainer, model, optimizer)
        assert trainer.model_stale is False


def test_with_sync_model_false_a_stale_model_says_so_until_synced(two, recwarn):
    x, y = blobs()
    model = classifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    before = accuracy(model, x, y)
    trainer = DataParallelTrainer(model, ce, optimizer, scheduler=two, sync_model=False)
    try:
        assert not trainer.model_stale
        trainer.fit((x, y), batch_size=64, epochs=2)
        assert trainer.model_stale
        with pytest.raises(lk.TrainingError, match=r"stale.*trainer\.sync_model\(\)"):
            model(x)
        with pytest.raises(lk.TrainingError, match=r"trainer\.sync_model\(\)"):
            model.state_dict()
        assert trainer.sync_model() is model
        assert not trainer.model_stale
        assert accuracy(model, x, y) > before + 0.3
        assert_holds_the_workers_state(trainer, model, optimizer)
        trainer.fit((x, y), batch_size=64, epochs=1)
        assert trainer.model_stale
        state = trainer.state_dict()
    finally:
        trainer.close()  # the copy it skipped is made now
    assert_equal_states(dict(model.state_dict()), dict(state["model"]))
    assert accuracy(model, x, y) == accuracy_of_state(state, x, y)
    assert not [w for w in recwarn if "trained parameters" in str(w.message)]
    with pytest.raises(lk.InputError, match="sync_model") as info:
        DataParallelTrainer(model, ce, optimizer, scheduler=two, sync_model="no")
    assert info.value.where["argument"] == "sync_model"


def test_on_threads_the_model_is_trained_in_place_and_never_stale():
    x, y = blobs()
    model = classifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with DataParallelTrainer(model, ce, optimizer, devices=["cpu:0", "cpu:1"],
                             sync_model=False) as trainer:
        trainer.fit((x, y), batch_size=64)
        assert not trainer.model_stale
        assert accuracy(model, x, y) == accuracy_of_state(trainer.state_dict(), x, y)


def test_a_fit_that_raised_leaves_the_last_step_every_rank_completed(two):
    x, y = blobs()
    model = classifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    start = copy.deepcopy(model.state_dict())
    poisoned = x[128:192].clone()
    poisoned[40, 0] = float("nan")  # rank 1's share of the third batch
    batches = [(x[:64], y[:64]), (x[64:128], y[64:128]), (poisoned, y[128:192]),
               (x[192:256], y[192:256])]
    with DataParallelTrainer(model, ce, optimizer, scheduler=two) as trainer:
        with pytest.raises(NonFiniteLossError):
            trainer.fit(batches)
        assert trainer.steps == 2
        assert not torch.equal(model[0].weight, start["0.weight"])
        assert_holds_the_workers_state(trainer, model, optimizer)
        assert optimizer.state_dict()["state"][0]["step"] == 2


class _Slowed(nn.Module):
    """The classifier, a little slower a step: a kill lands inside the fit."""

    def __init__(self):
        super().__init__()
        self.inner = classifier()

    def forward(self, x):
        time.sleep(0.01)
        return self.inner(x)


@pytest.fixture
def three():
    """Three worker processes of the test's own: one of them is killed."""
    with lk.DaskScheduler(mode="processes", n_workers=3, threads_per_worker=1) as s:
        yield s


@pytest.mark.soak
@pytest.mark.timeout(300)
def test_after_a_worker_killed_mid_fit_the_model_is_the_recovered_one(three):
    x, y = blobs(rows=1200)
    X, Y = da.from_array(x.numpy(), chunks=200), da.from_array(y.numpy(), chunks=200)
    model = _Slowed()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    before = accuracy(model, x, y)
    trainer = DataParallelTrainer(model, ce, optimizer, scheduler=three)
    victim = trainer.names[1]
    pid = three.client.run(os.getpid)[victim]
    steps_per_epoch = 1200 // 40
    finished, reached, ended = [], threading.Event(), threading.Event()

    def on_event(event):
        if type(event).__name__ == "TaskFinished":
            finished.append(event)
            if len(finished) >= 3 * (steps_per_epoch + 5):  # some steps into the second epoch
                reached.set()

    def kill():
        if reached.wait(120) and not ended.is_set():
            os.kill(pid, signal.SIGKILL)

    trainer.subscribe(on_event)
    killer = threading.Thread(target=kill, daemon=True)
    killer.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            history = trainer.fit((X, Y), batch_size=40, epochs=3, commit_every=5)
        killer.join(10)
        recoveries = [r for h in history for r in h.get("recoveries", [])]
        assert len(recoveries) == 1 and recoveries[0]["worker"] == victim
        assert victim not in trainer.names
        state = assert_holds_the_workers_state(trainer, model, optimizer)
        inner = {k.removeprefix("inner."): v for k, v in state["model"].items()}
        assert accuracy(model, x, y) == accuracy_of_state({"model": inner}, x, y)
        assert accuracy(model, x, y) > before + 0.3
    finally:
        ended.set()
        reached.set()
        trainer.close()
