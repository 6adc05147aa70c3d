"""What fit takes: a caller's data is read, never changed; an epoch's plan is one frozen value."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
from torch import nn

import labkit as lk
from labkit.data_parallel import DataParallelTrainer
from labkit.data_parallel.fit_data import WorkerDataset, as_source
from labkit.data_parallel.plan import EpochPlan, PlannedEpoch

from .models import batch, mlp, sgd


def _samples():
    x, y = batch(20)
    return [(x[i], y[i]) for i in range(20)]


def _fields(data: WorkerDataset) -> dict:
    return {f.name: getattr(data, f.name) for f in dataclasses.fields(data)}


def test_as_source_leaves_the_callers_dataset_as_it_was():
    data = lk.on_workers(_samples)
    before = copy.copy(_fields(data))
    source = as_source(data, batch_size=4, shuffle=False, seed=7)
    assert source is not data and source.batch_size == 4 and source.seed == 7
    source.local()
    assert _fields(data) == before
    assert data.batch_size is None and data.shuffle is True and data.seed is None


def test_fit_and_evaluate_leave_the_callers_dataset_as_it_was(trainers):
    model = mlp()
    t = DataParallelTrainer(model, nn.functional.mse_loss, sgd(model),
                            devices=["cpu:0", "cpu:1"])
    trainers.append(t)
    data = lk.on_workers(_samples)
    before = copy.copy(_fields(data))
    t.fit(data, epochs=2, batch_size=5, shuffle=False, seed=3, validation=data)
    t.evaluate(data, batch_size=10)
    assert _fields(data) == before


def test_an_epochs_plan_is_frozen_and_every_rank_plans_alike():
    table = ((0, 6, 0), (6, 8, 1))
    planned = PlannedEpoch(run="r", epoch=0, rows=8, batch_size=4, shuffle=False,
                           first_table=table, table=table)
    with pytest.raises(dataclasses.FrozenInstanceError):
        planned.epoch = 1  # type: ignore[misc]
    plan = planned.plan()
    expected = EpochPlan.make([0] * 6 + [1] * 2, batch_size=4, shuffle=False)
    assert np.array_equal(plan.order, expected.order)
    assert np.array_equal(plan.owner, expected.owner)
    # a rank's copy names its own blocks; the plan is the same for every rank
    mine = planned.for_rank([1], ["x-1", "y-1"])
    assert mine.mine == (1,) and mine.keys == ("x-1", "y-1") and planned.mine == ()
    assert np.array_equal(mine.plan().order, plan.order)


def test_a_resumed_epoch_trains_every_row_once():
    table = ((0, 2, 0), (2, 4, 1), (4, 6, 2))
    planned = PlannedEpoch(run="r", epoch=0, rows=6, batch_size=3, shuffle=False,
                           first_table=table, table=table)
    later = planned.resumed(1, ((0, 2, 0), (2, 4, 1), (4, 6, 0)))  # rank 2 was lost
    assert later.table != planned.table and len(later.resumes) == 1 and planned.resumes == ()
    plan = later.plan()
    trained = planned.plan().trained_before(1).tolist() + plan.order.tolist()
    assert sorted(trained) == list(range(6))
    # a dataset's epoch resumes with new shares
    shared = PlannedEpoch(run="r", epoch=0, rows=6, batch_size=3, shuffle=False,
                          dataset=b"", dataset_id="d", shares=(0.5, 0.5))
    assert shared.made_on_workers and shared.resumed(1, [1.0]).resumes == ((1, (1.0,)),)
