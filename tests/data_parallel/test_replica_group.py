"""The declared contract of a replica group: both groups keep it, and a group's capabilities are
protocols it keeps or not (no method that only raises)."""

from __future__ import annotations

import ast
import inspect
import textwrap

import dask.array as da
import numpy as np
import pytest
import torch
from torch import nn

import labkit as lk
from labkit.data_parallel import DataParallelTrainer
from labkit.data_parallel.dask.group import DaskReplicaGroup
from labkit.data_parallel.local.thread_group import SchedulerThreadGroup, ThreadGroup
from labkit.data_parallel.replica_group import (
    EvaluatesSources,
    FitsEpochs,
    Recovers,
    ReplicaGroup,
)

from .models import batch, mlp, sgd

#: What the protocol declares, each member named once (a new verb shows up here): what every
#: group does; what only some do is a capability of its own (CAPABILITIES).
MEMBERS = {"holds_model", "names", "devices", "replicas", "interfaces", "scheduler", "client",
           "check_open", "stop_reason", "steps", "evaluate",
           "memory", "set_monitors", "state_dict", "load_state_dict", "fetch_state", "last_state", "close"}
CAPABILITIES = {FitsEpochs: {"fit_epoch", "end_fit"}, EvaluatesSources: {"evaluate_source"},
                Recovers: {"broken", "form"}}
GROUPS = (ThreadGroup, SchedulerThreadGroup, DaskReplicaGroup)


def test_the_protocol_declares_the_verbs_the_trainer_calls():
    declared = {n for n in vars(ReplicaGroup) if not n.startswith("_")}
    assert declared == MEMBERS
    for capability, members in CAPABILITIES.items():
        assert {n for n in vars(capability) if not n.startswith("_")} == members
        assert not members & MEMBERS   # a capability is not also asked of every group


def _only_raises(fn) -> bool:
    """Whether ``fn``'s body (past its docstring) is one raise statement."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    body = tree.body[0].body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return len(body) == 1 and isinstance(body[0], ast.Raise)


def test_no_group_has_a_method_that_only_raises():
    for group in GROUPS:
        raising = [name for name, fn in inspect.getmembers(group, inspect.isfunction)
                   if fn.__module__ == group.__module__ and _only_raises(fn)]
        assert raising == [], f"{group.__name__}: {raising} only raise"


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
    assert not any(isinstance(group, capability) for capability in CAPABILITIES)
    assert group.scheduler is None and group.client is None and group.interfaces == []
    assert t.client is None and t.scheduler is None and t.interfaces == []
    # no verb that only raises: the thread group has none of a group on workers
    assert not hasattr(group, "fit_epoch") and not hasattr(group, "evaluate_source")
    # the fit loop asked once, when made: every batch comes through the client
    assert t._loop.epochs is None and t._loop.sources is None
    # so a fit over arrays is planned step by step by the client, and trains every row
    history = t.fit(_arrays(), batch_size=8)
    assert history[0]["steps"] == 3


def test_replicas_on_an_in_process_schedulers_threads_keep_the_contract(trainers):
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        model = mlp()
        t = DataParallelTrainer(model, nn.functional.mse_loss, sgd(model), scheduler=s)
        trainers.append(t)
        assert isinstance(t._group, SchedulerThreadGroup)
        assert isinstance(t._group, ReplicaGroup) and not isinstance(t._group, FitsEpochs)
        assert t.scheduler is s and t.client is None
        t.close()


def test_replicas_on_dask_workers_keep_the_contract_and_run_epochs_there(dask_scheduler,
                                                                         monkeypatch):
    model = mlp()
    with DataParallelTrainer(model, nn.functional.mse_loss, sgd(model),
                             scheduler=dask_scheduler) as t:
        group = t._group
        assert isinstance(group, DaskReplicaGroup) and isinstance(group, ReplicaGroup)
        assert all(isinstance(group, capability) for capability in CAPABILITIES)
        assert t._loop.epochs is group and t._loop.sources is group
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
