"""The declared contract of a replica group: both groups keep it, and its flags mean what they say."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import torch
from torch import nn

import labkit as lk
from labkit.data_parallel import DataParallelTrainer
from labkit.data_parallel.dask.group import DaskReplicaGroup
from labkit.data_parallel.fit_data import as_source
from labkit.data_parallel.local.thread_group import SchedulerThreadGroup, ThreadGroup
from labkit.data_parallel.replica_group import EpochOptions, ReplicaGroup

from .models import batch, mlp, sgd

#: What the protocol declares, each member named once (a new verb shows up here).
MEMBERS = {"runs_epochs", "holds_model", "names", "devices", "replicas", "interfaces", "scheduler", "client",
           "check_open", "stop_reason", "steps", "fit_epoch", "end_fit", "evaluate", "evaluate_source",
           "memory", "set_monitors", "state_dict", "load_state_dict", "fetch_state", "last_state", "close"}


def test_the_protocol_declares_the_verbs_the_trainer_calls():
    declared = {n for n in vars(ReplicaGroup) if not n.startswith("_")}
    assert declared == MEMBERS


def _arrays(rows=24):
    x, y = batch(rows)
    return x.numpy(), y.numpy()


def test_replicas_on_threads_keep_the_contract_and_run_no_epochs(trainers):
    model = mlp()
    t = DataParallelTrainer(model, nn.functional.mse_loss, sgd(model),
                            devices=["cpu:0", "cpu:1"])
    trainers.append(t)
    group = t._group
    assert isinstance(group, ThreadGroup) and isinstance(group, ReplicaGroup)
    assert group.runs_epochs is False
    assert group.scheduler is None and group.client is None and group.interfaces == []
    assert t.client is None and t.scheduler is None and t.interfaces == []
    source = as_source(_arrays(), batch_size=8)
    with pytest.raises(lk.TrainingError, match="run no epochs"):
        group.fit_epoch(source, 0, lambda r: None, None, run="r", shares=lambda: [0.5, 0.5],
                        policy="raise", options=EpochOptions())
    with pytest.raises(lk.TrainingError, match="read no data"):
        group.evaluate_source(source)
    # so a fit over arrays is planned step by step by the client, and trains every row
    history = t.fit(_arrays(), batch_size=8)
    assert history[0]["steps"] == 3


def test_replicas_on_an_in_process_schedulers_threads_keep_the_contract(trainers):
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        model = mlp()
        t = DataParallelTrainer(model, nn.functional.mse_loss, sgd(model), scheduler=s)
        trainers.append(t)
        assert isinstance(t._group, SchedulerThreadGroup)
        assert isinstance(t._group, ReplicaGroup) and t._group.runs_epochs is False
        assert t.scheduler is s and t.client is None
        t.close()


def test_replicas_on_dask_workers_keep_the_contract_and_run_epochs_there(dask_scheduler,
                                                                         monkeypatch):
    model = mlp()
    with DataParallelTrainer(model, nn.functional.mse_loss, sgd(model),
                             scheduler=dask_scheduler) as t:
        group = t._group
        assert isinstance(group, DaskReplicaGroup) and isinstance(group, ReplicaGroup)
        assert group.runs_epochs is True
        assert t.client is group.client is dask_scheduler.client
        assert len(t.interfaces) == len(t.names) == 2 and group.replicas == []
        assert group.memory(0) == (None, None)
        epochs, steps = [], []
        fit_epoch, run_steps = group.fit_epoch, group.steps
        monkeypatch.setattr(group, "fit_epoch", lambda *a, **k: epochs.append(1) or fit_epoch(*a, **k))
        monkeypatch.setattr(group, "steps", lambda *a, **k: steps.append(1) or run_steps(*a, **k))
        x, y = _arrays()
        t.fit((da.from_array(x, chunks=12), da.from_array(y, chunks=12)), batch_size=8)
        assert epochs == [1] and steps == []   # data on the workers: the epoch ran there
        t.fit((x, y), batch_size=8)
        assert epochs == [1] and steps == [1]  # data here: client-fed steps
        # the fit let go of what it placed on the workers
        t.fit((da.from_array(x, chunks=12), da.from_array(y, chunks=12)), batch_size=8)
        assert group._epochs is None


def test_a_broken_dask_group_says_so_publicly(dask_scheduler):
    model = mlp()
    with DataParallelTrainer(model, nn.functional.mse_loss, sgd(model),
                             scheduler=dask_scheduler) as t:
        group = t._group
        assert group.broken is None
        group.tasks.broken = "a collective failed"
        assert group.broken == "a collective failed"
        with pytest.raises(lk.TrainingError, match="broken"):
            t.step(*batch(8))
        group.tasks.broken = None   # let close() fetch the parameters as usual


def test_on_threads_the_model_and_the_group_agree_on_state(trainers):
    model = mlp()
    t = DataParallelTrainer(model, nn.functional.mse_loss, sgd(model),
                            devices=["cpu:0", "cpu:1"])
    trainers.append(t)
    t.step(*batch(8))
    state = t._group.state_dict()
    assert state["model"].keys() == model.state_dict().keys()
    assert t._group.last_state()["model"].keys() == state["model"].keys()
    assert all(torch.equal(a, b) for a, b in zip(state["model"].values(),
                                                   model.state_dict().values(), strict=True))
    assert np.isfinite(t.evaluate([batch(8, seed=2)])["loss"])
