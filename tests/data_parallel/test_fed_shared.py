"""Client-fed steps through shared memory to worker processes of this machine (issue 38).

Each big share of a batch is copied once into a POSIX shared-memory segment that
its rank maps, instead of travelling through a socket.  The training is the same
bit for bit; the segments are reused from command to command and fit to fit,
and removed when the trainer closes, the scheduler shuts down, a fit fails or a
worker is killed: none is left in /dev/shm.
"""

from __future__ import annotations

import glob
import os
import signal
import threading
import time
import warnings

import pytest
import torch
from torch import nn

import labkit as lk
from labkit.data_parallel import DataParallelTrainer
from labkit.scheduling.workers.shared import segment_prefix

MSE = nn.functional.mse_loss
FEATURES = 80  # 256 rows a rank: a share of 80 KiB, big enough for shared memory


def _segments() -> set:
    """The shared-memory segments this process (the client) made, now: another run's come
    and go meanwhile."""
    return set(glob.glob(f"/dev/shm/{segment_prefix()}*"))


def _gone(names: set, seconds: float = 30.0) -> set:
    """Those of ``names`` still in /dev/shm once they had ``seconds`` to go."""
    deadline = time.monotonic() + seconds
    while (left := names & _segments()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _batches(n=6, rows=512, seed=0):
    """``n`` batches of ``rows`` rows, the last one small (it travels inside the task)."""
    g = torch.Generator().manual_seed(seed)
    sizes = [rows] * (n - 1) + [6]
    return [(torch.randn(r, FEATURES, generator=g), torch.randn(r, 1, generator=g))
            for r in sizes]


def _model():
    torch.manual_seed(0)
    return nn.Linear(FEATURES, 1)


class _Aligned(nn.Module):
    """A linear model on a fresh copy of its rows.

    A share received through a socket lies at whatever alignment its buffer
    had, and torch's kernels sum in an order that depends on it (two fits
    through sockets differ in the last bit): on copies, the same rows give
    the same parameters bit for bit.
    """

    def __init__(self):
        super().__init__()
        self.inner = _model()

    def forward(self, x):
        return self.inner(x.clone())


def _trainer(scheduler, model=None):
    model = model or _model()
    return DataParallelTrainer(model, MSE, torch.optim.SGD(model.parameters(), lr=0.05),
                               scheduler=scheduler)


def _fit(scheduler):
    """Parameters after fed fits on ``scheduler``, and the segments they left until closed."""
    before = _segments()
    with _trainer(scheduler, _Aligned()) as t:
        t.fit(_batches(), epochs=2)
        t.fit(_batches(seed=1))  # a second fit reuses the first one's segments
        kept = _segments() - before
        state = t.state_dict()["model"]
    return state, kept, _gone(kept)


def _processes(**options):
    """A scheduler of two worker processes of its own."""
    s = lk.DaskScheduler(mode="processes", n_workers=2, **options)
    s.client.wait_for_workers(2, timeout=180)
    return s


@pytest.mark.timeout(300)
def test_a_fed_fit_through_shared_memory_trains_bit_for_bit_as_through_sockets(monkeypatch):
    with _processes() as s:
        shared, kept, left = _fit(s)
        assert kept, "the shares did not go through shared memory"
        assert left == set(), "closing the trainer left segments"
        # where /dev/shm has no room for a command, its shares go through sockets
        with monkeypatch.context() as m:
            m.setattr(lk.scheduling.workers.shared, "room", lambda: 0)
            full, kept, _ = _fit(s)
        assert kept == set()
    with _processes(shared_memory=False) as s:
        sockets, _, _ = _fit(s)
    for state in (full, sockets):
        assert shared.keys() == state.keys()
        for name in shared:
            assert torch.equal(shared[name], state[name]), name


@pytest.fixture
def processes():
    """Two worker processes of a cluster of their own (a test may kill one)."""
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        s.client.wait_for_workers(2, timeout=180)
        yield s


class _FailsOnCall(nn.Module):
    """A linear model whose ``fail_at``-th training forward (on any replica) raises."""

    def __init__(self, fail_at, sleep=0.0):
        super().__init__()
        self.inner, self.fail_at, self.calls, self.sleep = _model(), fail_at, 0, sleep

    def forward(self, x):
        if self.training:
            self.calls += 1
            if self.calls == self.fail_at:
                raise ValueError(f"forward call {self.calls}")
            time.sleep(self.sleep)
        return self.inner(x)


@pytest.mark.timeout(300)
def test_a_failed_fed_fit_then_close_or_shutdown_leaves_no_segment(processes):
    before = _segments()
    t = _trainer(processes, _FailsOnCall(fail_at=9))
    with pytest.raises(lk.LabkitError) as info:
        t.fit(_batches(), epochs=3)
    assert "forward call 9" in str(info.value)
    assert (info.value.where["epoch"], info.value.where["batch"]) == (2, 3)
    # the trainer goes on: its next fit trains, over the segments kept for reuse
    history = t.fit(_batches(seed=2))
    assert history[-1]["steps"] == 6
    kept = _segments() - before
    assert kept
    processes.shutdown()  # without closing the trainer: the scheduler removes them
    assert _gone(kept) == set()
    trained = {k: v.clone() for k, v in t.model.state_dict().items()}
    # the model got the last fit's parameters when it returned: closing after the
    # scheduler went loses nothing, and warns of nothing (issue 44)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        t.close()
    assert all(torch.equal(v, t.model.state_dict()[k]) for k, v in trained.items())


@pytest.mark.timeout(300)
def test_a_worker_killed_during_a_fed_fit_leaves_no_segment(processes):
    client = processes.client
    before = _segments()
    t = _trainer(processes, _FailsOnCall(fail_at=-1, sleep=0.02))
    pids, victim = client.run(os.getpid), t.names[1]
    stepped, seen, during = threading.Event(), [], set()

    def on_event(event):
        if type(event).__name__ == "TaskFinished":
            seen.append(event)
            if len(seen) >= 10:
                stepped.set()
    t.subscribe(on_event)

    def kill():
        if stepped.wait(120):
            during.update(_segments() - before)
            os.kill(pids[victim], signal.SIGKILL)
    killer = threading.Thread(target=kill, daemon=True)
    killer.start()
    run = t.fit(_batches(n=40), epochs=5, wait=False)
    try:
        with pytest.raises(lk.LabkitError) as info:
            run.result(180)
    finally:
        killer.join(10)
        t.close()
    assert isinstance(info.value, lk.WorkerLostError), repr(info.value)
    assert during, "the shares did not go through shared memory"
    assert _gone(during) == set()
    assert info.value.where["epoch"] >= 1 and info.value.where["batch"] >= 1
