"""The trainer with bucket keys: equal to single-device steps on the same bucket modules."""

from __future__ import annotations

import copy
import threading

import pytest
import torch

import labkit as lk
from labkit.data_parallel import DataParallelTrainer
from labkit.events import NodeJoined, PhaseFinished
from labkit.scheduling.dask.connect import scheduler_identity
from labkit.views.trackers.tracker import Tracker

from .models import Recurrent, Slow, Unrolled, assert_same_parameters, sequences, sgd

CE = torch.nn.functional.cross_entropy
CPUS = ["cpu:0", "cpu:1", "cpu:2"]
BUCKETS = [5, 10, 20]


def make(trainers, model, devices=CPUS, work_load=(1, 2, 3), bucket_model=Unrolled, opt=sgd,
         **kw):
    t = DataParallelTrainer(model, CE, opt(model), devices=devices, work_load=work_load,
                            bucket_model=bucket_model, **kw)
    trainers.append(t)
    return t


def data(n=60, batch_size=12, seed=0, **kw):
    """Bucket batches of ``n`` random sequences; ``seed`` makes the data and the shuffling."""
    seqs, labels = sequences(n, seed=seed)
    return lk.bucket_batches(seqs, labels, BUCKETS, batch_size, seed=seed, **kw)


def reference_steps(model, batches, bucket_model=Unrolled, opt=sgd):
    """Plain single-device steps, each on its bucket's module: what the trainer must equal."""
    model = copy.deepcopy(model)
    opt, modules, losses = opt(model), {}, []
    for b in batches:
        module = modules.setdefault(b.key, bucket_model(model, b.key))
        opt.zero_grad()
        loss = CE(module(b.x), b.y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, losses


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_bucketed_steps_over_uneven_shares_equal_single_device_steps(trainers, dtype):
    model = Recurrent(dtype=dtype)
    batches = list(data(shuffle=True, seed=0))
    assert len({b.key for b in batches}) == 3 and min(len(b) for b in batches) < 6
    reference, ref_losses = reference_steps(model, batches)
    t = make(trainers, model)
    losses = [t.step(b.x, b.y, bucket_key=b.key) for b in batches]
    assert_same_parameters(t.model, reference, atol=1e-5)
    assert losses == pytest.approx(ref_losses, abs=1e-5)
    # one module per replica and key, built once, around the replica's own parameters
    assert sorted(t._group.buckets.keys) == BUCKETS and len(t._group.buckets._made) == 3 * 3
    for (i, key), module in t._group.buckets._made.items():
        assert module.model is t.replicas[i] and module.steps == key


def test_batchnorm_statistics_are_joined_exactly_with_bucket_keys(trainers):
    # Normalisation inside a step is per replica (as in torch.nn.DataParallel), so the
    # parameters stay put (lr=0) and the running statistics are compared over many steps.
    def frozen(m):
        return torch.optim.SGD(m.parameters(), lr=0.0)
    model = Recurrent(batchnorm=True)
    batches = list(data(shuffle=True, seed=0, drop_last=True))
    reference, _ = reference_steps(model, batches, opt=frozen)
    t = make(trainers, model, opt=frozen)
    for b in batches:
        t.step(b.x, b.y, bucket_key=b.key)
    assert_same_parameters(t.model, reference, atol=1e-5)  # running mean and variance
    assert int(t.model.norm.num_batches_tracked) == len(batches)
    assert all(torch.equal(r.norm.running_var, t.model.norm.running_var) for r in t.replicas)


def test_fit_recognises_bucket_batches_and_evaluate_runs_each_bucket(trainers):
    model = Recurrent()
    batches = data(shuffle=True, seed=1)
    reference, _ = reference_steps(model, list(batches) + list(batches))
    batches.passes = 0  # the trainer sees the same two passes
    t = make(trainers, model)
    history = t.fit(batches, epochs=2)
    assert [h["epoch"] for h in history] == [1, 2]
    assert_same_parameters(t.model, reference, atol=1e-5)
    accuracy = {"accuracy": lambda out, y: (out.argmax(1) == y).double().mean()}
    scores = t.evaluate(batches, metrics=accuracy)
    rows = sum(len(b) for b in batches)
    with torch.no_grad():
        loss = sum(CE(Unrolled(reference, b.key)(b.x), b.y).item() * len(b) for b in batches)
        hits = sum((Unrolled(reference, b.key)(b.x).argmax(1) == b.y).sum().item()
                   for b in batches)
    assert scores["loss"] == pytest.approx(loss / rows, abs=1e-6)
    assert scores["accuracy"] == pytest.approx(hits / rows, abs=1e-9)


def test_without_bucket_model_a_key_only_labels_the_step(trainers):
    model = Recurrent()
    batches = list(data(seed=2))
    reference, _ = reference_steps(model, batches, bucket_model=lambda m, key: m)
    t = make(trainers, model, bucket_model=None)
    for b in batches:
        t.step(b.x, b.y, bucket_key=b.key)
    assert_same_parameters(t.model, reference, atol=1e-5)
    assert t._group.buckets.keys == []  # nothing built: every replica ran itself
    counts = {k: sum(b.key == k for b in batches) for k in BUCKETS}
    assert t._reporter.bucket_steps == counts


def test_monitors_see_the_bucket_key_of_every_replica(trainers):
    t = make(trainers, Recurrent())
    seen, lock = [], threading.Lock()

    def monitor(record):
        with lock:
            seen.append((record.step, record.bucket_key, record.device,
                         tuple(record.outputs.shape)))
    t.add_monitor(monitor)
    batches = list(data(n=30, seed=3))
    for b in batches:
        t.step(b.x, b.y, bucket_key=b.key)
    by_step = {}
    for step, key, device, (rows, classes) in seen:
        by_step.setdefault(step, []).append((key, rows, device))
    assert sorted(by_step) == list(range(len(batches)))
    for step, b in enumerate(batches):  # every replica of a step saw its key and its rows
        assert {k for k, _, _ in by_step[step]} == {b.key}
        assert sum(r for _, r, _ in by_step[step]) == len(b)
    assert {d for _, _, d, _ in seen} == set(CPUS)


def test_auto_work_load_is_balanced_per_bucket(trainers):
    replicas = []

    def slow_on_device_1_for_long(model, key):
        # device 1 is three times slower on the longest bucket only; sleeps long beside the
        # compute, so that a loaded machine's noise in the compute cannot hide the difference
        slow = model is replicas[1] and key == 20
        return Slow(Unrolled(model, key), per_row=9e-3 if slow else 3e-3)
    t = make(trainers, Recurrent(), devices=CPUS[:2], work_load="auto",
             bucket_model=slow_on_device_1_for_long)
    replicas.extend(t.replicas)
    seqs, labels = sequences(96, low=1, high=20, seed=4)
    short = [s[:4] for s in seqs[:48]]
    long = [torch.cat([s, s])[:20] if len(s) < 11 else s for s in seqs[48:]]
    batches = list(lk.bucket_batches(short + long, labels, BUCKETS, 16))
    for _ in range(6):
        for b in batches:
            t.step(b.x, b.y, bucket_key=b.key)
    shares = t.bucket_shares
    assert set(shares) == {b.key for b in batches}
    assert shares[20][0] > 0.62, shares  # device 0 takes more of the long bucket ...
    assert shares[5][0] < 0.6, shares  # ... and not of the short one
    assert t.shares == [0.5, 0.5]  # no step without a key: its own shares did not move


def test_state_dict_carries_bucket_shares_and_training_resumes_the_same(trainers):
    model = Recurrent()
    batches = list(data(seed=5))
    t = make(trainers, model, work_load="auto")
    for b in batches:
        t.step(b.x, b.y, bucket_key=b.key)
    state = t.state_dict()
    assert set(state["bucket_shares"]) == {b.key for b in batches}
    other = make(trainers, Recurrent(seed=9), work_load="auto")
    other.load_state_dict(state)
    assert other.bucket_shares == t.bucket_shares and other.steps == t.steps
    for b in batches[:3]:
        assert other.step(b.x, b.y, bucket_key=b.key) == \
            pytest.approx(t.step(b.x, b.y, bucket_key=b.key), abs=1e-9)
    assert_same_parameters(other.model, t.model, atol=1e-9)


def _raises_for_10(model, key):
    if key == 10:
        raise ValueError("no network for 10 steps")
    return Unrolled(model, key)


@pytest.mark.parametrize("bucket_model, key, error, parts", [
    (_raises_for_10, 10, lk.TaskError,
     ["bucket_model(model, 10) failed with ValueError", "no network for 10 steps",
      "replica 0", "bucket_key 10", "step 1", "device cpu:0"]),
    (lambda m, key: "a string" if key == 5 else Unrolled(m, key), 5, lk.InputError,
     ["must return a torch.nn.Module, got str", "bucket_key 5", "replica 0"]),
    (lambda m, key: Unrolled(copy.deepcopy(m) if key == 5 else m, key), 5, lk.InputError,
     ["not one of the model's", "do not copy them", "bucket_key 5"]),
])
def test_a_bad_bucket_model_is_named_and_the_trainer_stays_usable(trainers, bucket_model, key,
                                                                   error, parts):
    model = Recurrent()
    t = make(trainers, model, bucket_model=bucket_model)
    before = copy.deepcopy(model.state_dict())
    x = torch.randint(1, 8, (6, key))
    with pytest.raises(error) as info:
        t.step(x, torch.zeros(6, dtype=torch.long), bucket_key=key)
    for part in parts:
        assert part in str(info.value), (part, str(info.value))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert t.steps == 0
    t.step(torch.randint(1, 8, (6, 20)), torch.zeros(6, dtype=torch.long), bucket_key=20)
    assert t.steps == 1


def test_bad_bucket_arguments_are_input_errors(trainers):
    model = Recurrent()
    with pytest.raises(lk.InputError, match="bucket_model must be callable"):
        DataParallelTrainer(model, CE, sgd(model), devices=CPUS, bucket_model=5)
    t = make(trainers, model)
    x, y = torch.randint(1, 8, (6, 5)), torch.zeros(6, dtype=torch.long)
    with pytest.raises(lk.InputError, match="bucket_key must be hashable") as info:
        t.step(x, y, bucket_key=[5])
    assert info.value.where == {"argument": "bucket_key", "step": 1}  # counted from 1
    with pytest.raises(lk.TaskError, match="built for 10 steps, got a batch of 5"):
        t.step(x, y, bucket_key=10)  # the wrong width reaches the bucket's own module
    with pytest.raises(lk.InputError, match=r"an \(x, y\) pair or an lk.BucketBatch"):
        t.fit([(x, y, 5)])


def test_events_carry_steps_per_bucket_to_the_tracker_and_the_board(trainers, recorder):
    from labkit.views.notebook.board import board
    t = make(trainers, Recurrent(), devices=CPUS[:2], work_load=[1, 1])
    tracker = Tracker(window=60.0)
    t.subscribe(recorder, state_every=0.0)
    t.subscribe(tracker)
    b = board(t, bokeh=False, lanes=False)
    try:
        batches = data(seed=6)
        t.fit(batches, epochs=2)
        counts = {k: 2 * sum(batch.key == k for batch in batches) for k in BUCKETS}
        assert recorder.of(PhaseFinished)[-1].state["buckets"] == counts
        joined = recorder.of(NodeJoined)
        assert [sum(e.state["buckets"].values()) for e in joined[:-1]] == \
            list(range(1, 2 * len(batches) + 1))  # one a step: state_every=0
        assert joined[-1].state["training"] is False   # and one when the fit ends
        assert tracker.snapshot().nodes[0].buckets == counts
        t.close()  # the board stops with it, after a final draw
        assert not b.writer.running
        text = b.buckets.value
        assert "Recurrent</b> steps per bucket: " + " · ".join(
            f"{k}: {counts[k]}" for k in BUCKETS) in text, text
    finally:
        b.close()


def test_bucketed_replicas_on_dask_equal_single_device_steps(dask_scheduler):
    model = Recurrent()
    start = copy.deepcopy(model)  # the model itself is trained by the steps (issue 44)
    batches = list(data(seed=7, shuffle=True))
    n = len(scheduler_identity(dask_scheduler.client)["workers"])
    with DataParallelTrainer(model, CE, sgd(model), scheduler=dask_scheduler,
                             work_load=[2, 3][:n], bucket_model=_raises_for_10) as t:
        losses = []
        for b in batches:
            if b.key == 10:  # every rank fails to build it: nobody steps, the group goes on
                with pytest.raises(lk.TaskError, match="no network for 10 steps") as info:
                    t.step(b.x, b.y, bucket_key=b.key)
                assert info.value.where["bucket_key"] == 10 and "replica" in info.value.where
                continue
            losses.append(t.step(b.x, b.y, bucket_key=b.key))
        kept = [b for b in batches if b.key != 10]
        reference, ref_losses = reference_steps(start, kept)
        assert losses == pytest.approx(ref_losses, abs=1e-5)
        assert_same_parameters(t.sync_model(), reference, atol=1e-5)
        assert t.state_dict()["steps"] == len(kept)
        scores = t.evaluate([b for b in kept if b.key == 20])
        with torch.no_grad():
            rows = [b for b in kept if b.key == 20]
            expected = sum(CE(Unrolled(reference, 20)(b.x), b.y).item() * len(b) for b in rows)
        assert scores["loss"] == pytest.approx(expected / sum(len(b) for b in rows), abs=1e-6)
    assert t.closed
