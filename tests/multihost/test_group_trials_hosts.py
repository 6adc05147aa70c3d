"""Trials that are data-parallel groups on a cluster whose workers are on four hosts.

Each trial of a sweep with ``workers_per_trial=2`` trains a tiny MLP with a
``DataParallelTrainer`` on ``trial.scheduler``: its two ranks are on two hosts
(network namespaces) and meet through torch's TCP store (``rendezvous="auto"``
picks it off loopback).  The trial functions run on client threads in the root
namespace, on the sweep's client.
"""

from __future__ import annotations

import threading
import time

import pytest
from torch import nn

import labkit as lk
from tests.experiments.test_group_trials import batch, model_and_opt

pytestmark = pytest.mark.timeout(300)

STEPS = 3
SEEN: dict = {}   # trial id -> what it saw (the trial functions run on client threads)
_LOCK = threading.Lock()


def train(scheduler, lr: float, report=None) -> tuple[list[float], list[str], list[str]]:
    """``(losses, ranks' workers, ranks' interfaces)`` of STEPS steps on ``scheduler``."""
    model, opt = model_and_opt(lr)
    trainer = lk.DataParallelTrainer(model, nn.functional.mse_loss, opt, scheduler=scheduler)
    losses = []
    try:
        for step in range(STEPS):
            losses.append(trainer.step(*batch(step)))
            if report is not None:
                report(step + 1, losses[-1])
        return losses, list(trainer.names), list(trainer.interfaces)
    finally:
        trainer.close()


def group_trial(config, trial):
    start = time.monotonic()
    losses, ranks, interfaces = train(trial.scheduler, config["lr"],
                                      lambda step, loss: trial.report(step, loss=loss))
    with _LOCK:
        SEEN[trial.id] = dict(workers=list(trial.workers), ranks=ranks, interfaces=interfaces,
                              losses=losses, span=(start, time.monotonic()))


def test_group_trials_train_across_hosts_as_outside_a_sweep(make_multihost):
    # client-fed shares arrive by socket here (a view of the frame at any offset): a rank
    # aligns them, else MKL's float64 results would differ in their last bit
    cluster = make_multihost(n_workers=4)
    workers = {cluster.worker_address(h) for h in cluster.hosts if h}
    hosts = {a.split("://")[1].rsplit(":", 1)[0] for a in workers}
    assert len(workers) == len(hosts) == 4 and "127.0.0.1" not in hosts   # a host each
    SEEN.clear()
    with lk.DaskScheduler(cluster.scheduler_address) as s:
        result = lk.sweep(group_trial, [{"lr": 0.05}, {"lr": 0.1}, {"lr": 0.2}], scheduler=s,
                          workers_per_trial=2, metric="loss", mode="min", store=None)
        assert [t.status.value for t in result.trials] == ["completed"] * 3, [
            (t.status.value, t.error) for t in result.trials]
        pair = sorted(workers)[:2]
        with s.restricted(pair) as two:   # the same trainings, outside the sweep
            alone = {r.id: train(two, r.config["lr"]) for r in result.trials}
    for record in result.trials:
        seen = SEEN[record.id]
        group = seen["workers"]
        assert len(set(group)) == 2 and set(group) <= workers, group
        assert seen["ranks"] == sorted(group)   # one rank a worker of the group, no other
        assert record.worker == ", ".join(group)   # what the sweep recorded as its place
        for rank, bound in zip(seen["ranks"], seen["interfaces"], strict=True):
            host = rank.split("://")[1].rsplit(":", 1)[0]
            assert bound.startswith(f"eth0 {host} "), bound   # across hosts, not loopback
        assert [m["loss"] for _, m, _ in record.history] == seen["losses"]
        assert seen["losses"] == alone[record.id][0], record.config
    assert [ranks for _, ranks, _ in alone.values()] == [pair] * 3
    spans = list(SEEN.values())
    at_once = 0
    for a in spans:   # two trials that shared a worker never ran at once
        for b in spans:
            apart = a["span"][1] <= b["span"][0] or b["span"][1] <= a["span"][0]
            if a is not b and set(a["workers"]) & set(b["workers"]):
                assert apart, (a, b)
            at_once += a is not b and not apart
    assert at_once, spans   # the first two started together, on all four hosts
    SEEN.clear()
