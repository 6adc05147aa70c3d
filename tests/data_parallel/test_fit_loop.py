"""The trainer's fit loop is a part it holds (no mixin): made from its inputs, it fits alone."""

from __future__ import annotations

import torch

from labkit.data_parallel import DataParallelTrainer
from labkit.data_parallel.balance import WorkLoads
from labkit.data_parallel.fit_data import as_source
from labkit.data_parallel.local.thread_group import ThreadGroup
from labkit.data_parallel.calls.fit_loop import FitLoop
from labkit.data_parallel.calls.model_sync import ModelSync
from labkit.data_parallel.calls.one_call import OneCall
from labkit.data_parallel.replica_group import EpochOptions
from labkit.data_parallel.reporting import Reporter
from labkit.data_parallel.calls.stepper import Stepper
from labkit.events import Observable

from .models import batch, mlp, sgd

MSE = torch.nn.functional.mse_loss


def test_the_trainer_mixes_nothing_in():
    assert DataParallelTrainer.__bases__ == (Observable,)
    assert not [c for c in DataParallelTrainer.__mro__ if c.__module__.endswith(".fit_loop")]


def test_a_fit_loop_made_from_its_parts_fits_and_evaluates_without_a_trainer():
    model = mlp()
    optimizer = sgd(model)
    group = ThreadGroup(model, MSE, optimizer, ["cpu:0", "cpu:1"])
    try:
        names = list(group.names)
        bus, seen = Observable(), []
        bus.subscribe(lambda event: seen.append(type(event).__name__))
        reporter = Reporter(bus, names, group.devices, "MLP", group.memory)
        stepper = Stepper(group, WorkLoads(names, [1, 3]), reporter, "raise", group.check_open)
        loop = FitLoop(stepper, OneCall(), ModelSync(model, optimizer, group), reporter, bus, "MLP")
        batches = [batch(8, seed=s) for s in (1, 2, 3)]
        history = loop.fit(as_source(batches, epochs=2), 2, EpochOptions(), None, True)
        assert [r["steps"] for r in history] == [3, 3] and stepper.steps == 6
        assert [s.stop - s.start for s in stepper.last_split] == [2, 6]
        assert "RunStarted" in seen and "RunFinished" in seen  # the fit's run told its bus
        assert set(loop.evaluate(as_source(batches, what="evaluate"), None)) == {"loss"}
        assert loop.step(*batch(8, seed=4), None) > 0 and stepper.steps == 7
    finally:
        group.close()
