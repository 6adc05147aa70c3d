"""Fits that run as loops on Dask workers, over data that lives there.

Full-batch gradient descent over Dask array blocks (even and uneven) equals a
serial full-batch loop; mini-batches learn; a dataset made on each worker
trains every sample once an epoch; a cancel stops every rank within a second
and leaves no task; a worker SIGKILLed mid-fit costs a few steps and every
row is still trained once an epoch; the history ``fit`` returns is summed from
the same step reports the trainer's events carry.
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
from labkit.data_parallel import DataParallelTrainer

da = pytest.importorskip("dask.array")


def mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))


def digits_like(rows=300, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 8)).astype(np.float32)
    y = (x[:, :3] @ rng.standard_normal(3) > 0).astype(np.int64) + (x[:, 3] > 1)
    return x, y


def serial_full_batch(model, x, y, epochs, lr):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    xt, yt, losses = torch.from_numpy(x), torch.from_numpy(y), []
    for _ in range(epochs):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("chunks", [(75, 75, 75, 75), (40, 120, 30, 110)], ids=["even", "uneven"])
def test_full_batch_descent_on_the_workers_equals_a_serial_loop(dask_scheduler, chunks):
    x, y = digits_like()
    X = da.from_array(x, chunks=(chunks, 8))
    Y = da.from_array(y, chunks=(chunks,))
    model = mlp()
    with DataParallelTrainer(model, nn.functional.cross_entropy,
                             torch.optim.SGD(model.parameters(), lr=0.5),
                             scheduler=dask_scheduler) as t:
        history = t.fit((X, Y), batch_size=len(x), epochs=4, shuffle=False)
    reference = mlp()
    losses = serial_full_batch(reference, x, y, 4, 0.5)
    assert [h["loss"] for h in history] == pytest.approx(losses, rel=1e-5)
    assert [h["steps"] for h in history] == [1, 1, 1, 1]
    for p, q in zip(model.parameters(), reference.parameters()):
        assert torch.allclose(p, q, atol=1e-5), (p - q).abs().max()


def test_mini_batches_on_the_workers_learn_as_a_serial_loop(dask_scheduler):
    x, y = digits_like(rows=600)
    X, Y = da.from_array(x, chunks=(150, 8)), da.from_array(y, chunks=150)
    accuracy = {"acc": lambda out, t: (out.argmax(1) == t).float().mean()}
    model = mlp()
    with DataParallelTrainer(model, nn.functional.cross_entropy,
                             torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9),
                             scheduler=dask_scheduler) as t:
        history = t.fit((X, Y), batch_size=32, epochs=6, seed=3)
        scores = t.evaluate((X, Y), accuracy, batch_size=100)
    assert [h["steps"] for h in history] == [19] * 6        # ceil(600 / 32), every epoch
    assert history[-1]["loss"] < 0.6 * history[0]["loss"]
    serial = mlp()
    opt = torch.optim.SGD(serial.parameters(), lr=0.2, momentum=0.9)
    g = torch.Generator().manual_seed(3)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    for _ in range(6):
        for idx in torch.randperm(600, generator=g).split(32):
            opt.zero_grad()
            nn.functional.cross_entropy(serial(xt[idx]), yt[idx]).backward()
            opt.step()
    serial_acc = (serial(xt).argmax(1) == yt).float().mean().item()
    assert scores["acc"] == pytest.approx(serial_acc, abs=0.05)
    assert scores["acc"] > 0.8


class _Samples(torch.utils.data.Dataset):
    """Sample ``i`` is ``(i, 1)``: a sum loss shows which samples a step trained."""

    def __len__(self):
        return 90

    def __getitem__(self, i):
        return torch.tensor([float(i), 1.0], dtype=torch.float64), torch.tensor(0.0,
                                                                               dtype=torch.float64)


class _Ids(nn.Module):
    """``out = x[:, 0] * p``: with SGD at lr 1 and a sum loss, ``p`` falls by the ids seen."""

    def __init__(self):
        super().__init__()
        self.p = nn.Parameter(torch.zeros(1, dtype=torch.float64))

    def forward(self, x):
        return x[:, 0] * self.p


class _SumLoss(nn.Module):
    reduction = "sum"

    def forward(self, out, y):
        return out.sum()


def test_a_dataset_made_on_each_worker_trains_every_sample_once_an_epoch(dask_scheduler):
    model = _Ids()
    with DataParallelTrainer(model, _SumLoss(), torch.optim.SGD(model.parameters(), lr=1.0),
                             scheduler=dask_scheduler) as t:
        history = t.fit(lk.on_workers(_Samples), batch_size=16, epochs=3)
    assert [h["steps"] for h in history] == [6, 6, 6]
    assert model.p.item() == -3 * sum(range(90))


@pytest.mark.soak
def test_a_cancel_stops_every_rank_within_a_second_and_leaves_no_task(dask_scheduler):
    x = da.random.random((6000, 8), chunks=(1000, 8)).astype("float32")
    y = (da.random.random(6000, chunks=1000) > 0.5).astype("int64")
    model = nn.Sequential(_Slow(), nn.Linear(8, 2))
    with DataParallelTrainer(model, nn.functional.cross_entropy,
                             torch.optim.SGD(model.parameters(), lr=0.1),
                             scheduler=dask_scheduler) as t:
        steps = []
        t.subscribe(lambda e: steps.append(e) if type(e).__name__ == "TaskFinished" else None)
        run = t.fit((x, y), batch_size=20, epochs=5, wait=False)
        deadline = time.monotonic() + 60
        while len(steps) < 10 and time.monotonic() < deadline:
            time.sleep(0.01)
        started = time.monotonic()
        assert run.cancel()
        with pytest.raises(lk.CancelledError):
            run.result(30)
        assert time.monotonic() - started < 1.0
        assert not any(dask_scheduler.client.processing().values())
        assert t.fit((x, y), batch_size=1000, epochs=1)[0]["steps"] == 6   # usable at once


class _Slow(nn.Module):
    def forward(self, x):
        time.sleep(0.01)
        return x


def test_the_history_is_summed_from_the_reports_the_events_carry(dask_scheduler):
    x, y = digits_like(rows=200)
    X, Y = da.from_array(x, chunks=(50, 8)), da.from_array(y, chunks=50)
    model = mlp()
    events = []
    with DataParallelTrainer(model, nn.functional.cross_entropy,
                             torch.optim.SGD(model.parameters(), lr=0.1),
                             scheduler=dask_scheduler) as t:
        t.subscribe(events.append)
        history = t.fit((X, Y), batch_size=40, epochs=2)
    from labkit.events import TaskFinished
    spans = [e for e in events if isinstance(e, TaskFinished)]
    assert sum(e.n_samples for e in spans) == 2 * 200
    assert {e.worker for e in spans} == set(t.names)
    for h in history:
        assert h["steps"] == 5 and h["samples_per_s"] == pytest.approx(200 / h["seconds"])


@pytest.fixture
def three_workers():
    """A cluster of three worker processes of its own: one of them gets killed."""
    with lk.DaskScheduler(mode="processes", n_workers=3) as s:
        yield s


class _SlowIds(_Ids):
    def forward(self, x):
        time.sleep(0.005)
        return super().forward(x)


@pytest.mark.soak
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_worker_killed_mid_fit_costs_a_few_steps_and_every_row_is_trained_once(three_workers):
    s = three_workers
    rows, batch, epochs, every = 1800, 30, 3, 10
    x = np.stack([np.arange(rows, dtype=np.float64), np.ones(rows)], 1)
    X, Y = da.from_array(x, chunks=(200, 2)), da.from_array(np.zeros(rows), chunks=200)
    model = _SlowIds()
    t = DataParallelTrainer(model, _SumLoss(), torch.optim.SGD(model.parameters(), lr=1.0),
                            scheduler=s)
    pids = s.client.run(os.getpid)
    victim = t.names[1]
    reports = []
    t.subscribe(lambda e: reports.append(time.time()) if type(e).__name__ == "TaskFinished"
                else None)
    killed = {}

    def kill():
        while len(reports) < 3 * 75:   # in the second epoch
            time.sleep(0.005)
        killed["at"] = time.time()
        os.kill(pids[victim], signal.SIGKILL)
    killer = threading.Thread(target=kill, daemon=True)
    killer.start()
    try:
        history = t.fit((X, Y), batch_size=batch, epochs=epochs, commit_every=every)
    finally:
        killer.join(10)
        t.close()
    recoveries = [r for h in history for r in h.get("recoveries", [])]
    assert len(recoveries) == 1 and recoveries[0]["worker"] == victim
    assert 0 <= recoveries[0]["redone"] <= every
    # one numbering: the recovery names the epoch of the record that lists it, batches from 1
    (record,) = [h for h in history if h.get("recoveries")]
    assert recoveries[0]["epoch"] == record["epoch"] == 2
    assert 1 <= recoveries[0]["resumed_from"] <= recoveries[0]["batch"] <= rows // batch
    # the victim's restarted worker may be taken in at the next epoch (a fit grows)
    joined = [w for h in history for j in h.get("joined", []) for w in j["workers"]]
    assert victim not in t.names and len(t.names) == 2 + len(joined)
    assert all(w in t.names for w in joined)
    assert [h["steps"] for h in history] == [rows // batch] * epochs
    assert model.p.item() == -epochs * sum(range(rows))   # every row once an epoch, no more
    after = [r for r in reports if r > killed["at"]]
    assert after and after[0] - killed["at"] < 10.0


def test_each_rank_says_which_device_it_got_and_two_ranks_never_share_a_gpu(dask_scheduler):
    from labkit.data_parallel.dask.setup import check_devices as _check_devices
    model = mlp()
    with DataParallelTrainer(model, nn.functional.cross_entropy,
                             torch.optim.SGD(model.parameters(), lr=0.1),
                             scheduler=dask_scheduler) as t:
        assert t.devices == ["cpu", "cpu"]   # CPU workers: CPU stand-ins of GPUs
    _check_devices(["w0", "w1"], ["h", "h"], ["cuda:0 (A)", "cuda:1 (A)"])   # one each: fine
    _check_devices(["w0", "w1"], ["h0", "h1"], ["cuda:0 (A)", "cuda:0 (A)"])  # two hosts
    with pytest.raises(lk.SchedulerError, match="got the same GPU"):
        _check_devices(["w0", "w1"], ["h", "h"], ["cuda:0 (A)", "cuda:0 (A)"])


def _sequences():
    """Bucket batches every worker makes alike (their order drawn from the seed and epoch)."""
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(3, 12, (60,), generator=g)
    seqs = [torch.randint(1, 6, (int(n),), generator=g) for n in lengths]
    targets = torch.tensor([int(s.sum()) % 2 for s in seqs])
    return lk.bucket_batches(seqs, targets, buckets=[6, 12], batch_size=16, seed=0)


class _Bag(nn.Module):
    """Mean of the embedded tokens of a padded sequence: a model for any bucket width."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(6, 8, padding_idx=0)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.embed(x).sum(1) / (x > 0).sum(1, keepdim=True))


class _Width(nn.Module):
    """A bucket's module: the bag, checking that every rank runs the same bucket width."""

    def __init__(self, bag, key):
        super().__init__()
        self.bag, self.key = bag, key

    def forward(self, x):
        assert x.shape[1] == self.key, (x.shape, self.key)
        return self.bag(x)


def test_bucket_batches_made_on_each_worker_train_as_in_process(dask_scheduler):
    """``lk.on_workers(lambda: lk.bucket_batches(...))``: every rank its share of every batch."""
    models = [_Bag(), _Bag()]
    histories = []
    for model, scheduler in zip(models, [dask_scheduler, None]):
        kwargs = {"scheduler": scheduler} if scheduler else {"devices": ["cpu:0", "cpu:1"]}
        with DataParallelTrainer(model, nn.functional.cross_entropy,
                                 torch.optim.SGD(model.parameters(), lr=0.5),
                                 bucket_model=_Width, **kwargs) as t:
            histories.append(t.fit(lk.on_workers(_sequences), epochs=2))
            assert sorted(t.bucket_steps) == [6, 12]
    on_workers, in_process = histories
    assert [h["steps"] for h in on_workers] == [len(_sequences())] * 2
    for a, b in zip(on_workers, in_process):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
    for p, q in zip(*[m.parameters() for m in models]):
        assert torch.allclose(p, q, atol=1e-5)


def test_a_checkpoint_file_holds_the_last_commit_in_the_safe_format(dask_scheduler, tmp_path):
    x, y = digits_like(rows=200)
    X, Y = da.from_array(x, chunks=(100, 8)), da.from_array(y, chunks=100)
    model = mlp()
    path = tmp_path / "fit.lk"
    with DataParallelTrainer(model, nn.functional.cross_entropy,
                             torch.optim.SGD(model.parameters(), lr=0.1),
                             scheduler=dask_scheduler) as t:
        t.fit((X, Y), batch_size=20, epochs=2, commit_every=5, checkpoint=path)
        final = {k: v.clone() for k, v in t.sync_model().state_dict().items()}
    from labkit.checkpoints import load_checkpoint
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:   # written from a thread of rank 0's worker
        if path.exists():
            saved = load_checkpoint(path)
            if saved["position"] == {"run": saved["position"]["run"], "epoch": 2, "step": 0,
                                     "steps": 20}:
                break
        time.sleep(0.1)
    assert saved["position"]["epoch"] == 2 and saved["position"]["steps"] == 20
    for k, v in final.items():
        assert torch.equal(saved["model"][k], v), k
    assert [p.name for p in tmp_path.iterdir()] == ["fit.lk"]   # no temp file left


@pytest.mark.soak
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_lost_worker_past_max_failures_names_the_worker_epoch_and_step():
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        x = np.stack([np.arange(600, dtype=np.float64), np.ones(600)], 1)
        X, Y = da.from_array(x, chunks=(100, 2)), da.from_array(np.zeros(600), chunks=100)
        model = _SlowIds()
        t = DataParallelTrainer(model, _SumLoss(), torch.optim.SGD(model.parameters(), lr=1.0),
                                scheduler=s)
        pids = s.client.run(os.getpid)
        victim = t.names[1]
        started = []
        t.subscribe(lambda e: started.append(1) if type(e).__name__ == "TaskFinished" else None)

        def kill():
            while len(started) < 10:
                time.sleep(0.005)
            os.kill(pids[victim], signal.SIGKILL)
        threading.Thread(target=kill, daemon=True).start()
        with pytest.raises(lk.WorkerLostError) as info:
            t.fit((X, Y), batch_size=30, epochs=2, max_failures=0)
        assert info.value.where["worker"] == victim
        assert info.value.where["epoch"] == 1 and info.value.where["batch"] >= 5
        assert "max_failures=0" in str(info.value)
        t.close()
