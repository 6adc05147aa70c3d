"""The default cluster trains: replicas over the in-process worker's threads (issue 38)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import dask.array as da
import numpy as np
import psutil
import pytest
import torch

import labkit as lk
from labkit.data_parallel.dask.group import DaskReplicaGroup

from .models import batch, mlp, sgd


def _trainer(scheduler=None, devices=None, seed=0):
    model = mlp(seed=seed)
    return lk.DataParallelTrainer(model, torch.nn.functional.mse_loss, sgd(model),
                                  scheduler=scheduler, devices=devices)


def _arrays(n=96):
    x, y = batch(n=n, seed=3)
    return x.numpy(), y.numpy()


def _params(trainer):
    return [p.detach().clone() for p in trainer.sync_model().parameters()]


@pytest.fixture
def default():
    """labkit's default cluster, two threads on its in-process worker."""
    with lk.DaskScheduler(n_workers=1, threads_per_worker=2) as s:
        assert s.mode == "auto" and s.in_process
        yield s


@pytest.mark.parametrize("kind", ["numpy", "dask", "batches", "on_workers"])
def test_the_default_cluster_trains_every_kind_of_data_like_thread_replicas(default, kind):
    x, y = _arrays()
    data = {"numpy": (x, y),
            "dask": (da.from_array(x, chunks=(24, 6)), da.from_array(y, chunks=(24, 3))),
            "batches": [(torch.as_tensor(x[i:i + 24]), torch.as_tensor(y[i:i + 24]))
                        for i in range(0, 96, 24)],
            "on_workers": lk.on_workers(lambda: torch.utils.data.TensorDataset(
                torch.as_tensor(x), torch.as_tensor(y)))}[kind]
    size = None if kind == "batches" else 24
    before = set(psutil.Process().children(recursive=True))
    with _trainer(default) as t, _trainer(devices=["cpu:0", "cpu:1"]) as ref:
        assert t.names == ["cpu:0", "cpu:1"]      # one replica per worker thread
        history = t.fit(data, epochs=3, batch_size=size, seed=1)
        expected = ref.fit(data, epochs=3, batch_size=size, seed=1)
        assert [h["steps"] for h in history] == [4, 4, 4]
        assert history[-1]["loss"] < history[0]["loss"]
        assert [h["loss"] for h in history] == pytest.approx([h["loss"] for h in expected])
        for p, q in zip(_params(t), _params(ref)):
            torch.testing.assert_close(p, q)
        scores = t.evaluate(data, batch_size=size)
        assert np.isfinite(scores["loss"])
    assert set(psutil.Process().children(recursive=True)) <= before   # no process started


def test_threads_mode_trains_on_thread_replicas_and_devices_choose_them():
    x, y = _arrays()
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        with _trainer(s) as t:
            assert t.names == ["cpu:0", "cpu:1"]
            assert t.fit((x, y), batch_size=24)[0]["steps"] == 4
        with _trainer(s, devices=["cpu"]) as one:
            assert one.names == ["cpu"] and one.fit((x, y), batch_size=48)[0]["steps"] == 2


def test_the_replica_group_itself_still_needs_worker_processes(default):
    model = mlp()
    with pytest.raises(lk.InputError, match="need worker processes"):
        DaskReplicaGroup(model, torch.nn.functional.mse_loss, sgd(model), default)


def _slow_batches(started: threading.Event, n=10_000):
    """Batches that take a while, telling when the first one is trained."""
    x, y = batch(n=8, seed=5)
    for i in range(n):
        if i == 2:
            started.set()
        time.sleep(0.005)
        yield x, y


def test_a_cancel_of_the_default_scheduler_stops_a_fit_on_its_threads(default):
    started = threading.Event()
    with _trainer(default) as t:
        run = t.fit(_slow_batches(started), wait=False)
        assert started.wait(30)
        default.cancel()
        with pytest.raises(lk.CancelledError):
            run.result(timeout=30)
        assert t.steps < 10_000
        assert t.fit([batch(seed=2)])[0]["steps"] == 1      # the trainer goes on


def test_shutting_the_default_scheduler_down_ends_the_fit_and_its_threads():
    started = threading.Event()
    before = {t.ident for t in threading.enumerate()}
    s = lk.DaskScheduler(n_workers=1, threads_per_worker=2)
    t = _trainer(s)
    try:
        run = t.fit(_slow_batches(started), wait=False)
        assert started.wait(30)
        s.shutdown()
        with pytest.raises(lk.LabkitError, match="shut down|ended"):
            run.result(timeout=30)
        with pytest.raises(lk.SchedulerError, match="shut down"):
            t.fit([batch(seed=2)])
    finally:
        t.close()
        s.shutdown()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        left = [th for th in threading.enumerate()
                if th.ident not in before and th.name.startswith("labkit-replica")]
        if not left:
            break
        time.sleep(0.05)
    assert not left


def test_the_scheduler_keeps_no_closed_trainer_alive(default):
    import gc
    import weakref
    t = _trainer(default)
    t.fit([batch(seed=2)])
    t.close()
    model = weakref.ref(t.model)
    del t
    gc.collect()
    assert model() is None       # a sweep of many trainers on one scheduler frees each


def test_a_shut_down_default_scheduler_refuses_a_new_trainer_clearly():
    s = lk.DaskScheduler(n_workers=1, threads_per_worker=2)
    s.shutdown()
    with pytest.raises(lk.SchedulerError, match="shut down"):
        _trainer(s)


_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_KERNEL = """
import sys, threading, torch, labkit as lk
s = lk.DaskScheduler(n_workers=1, threads_per_worker=2)
model = torch.nn.Linear(6, 3)
t = lk.DataParallelTrainer(model, torch.nn.functional.mse_loss,
                           torch.optim.SGD(model.parameters(), lr=0.01), scheduler=s)
x, y = torch.randn(64, 6), torch.randn(64, 3)
started = threading.Event()
def batches():
    while True:
        started.set()
        yield x, y
run = t.fit(batches(), wait=False)
started.wait(60)
print("training", flush=True)
run.result()
"""


def test_a_kernel_killed_while_training_on_the_default_cluster_leaves_no_process():
    kernel = subprocess.Popen([sys.executable, "-c", _KERNEL], stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": _ROOT})
    try:
        assert kernel.stdout.readline().strip() == "training"
        spawned = psutil.Process(kernel.pid).children(recursive=True)
        os.kill(kernel.pid, signal.SIGKILL)
        kernel.wait(timeout=30)
        _, alive = psutil.wait_procs(spawned, timeout=30)
        assert not alive, [p.cmdline() for p in alive]
    finally:
        if kernel.poll() is None:
            kernel.kill()
        kernel.stdout.close()
