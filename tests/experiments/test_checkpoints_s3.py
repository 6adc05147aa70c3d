"""Sweeps on worker processes checkpointing to object storage (moto's S3 server over HTTP).

The checkpoints go from the worker processes straight to the bucket: the
client sees references only (its traced memory never holds one), a trial whose
worker is SIGKILLed goes on from what it wrote to S3, and the best trial's model
loads back from the bucket afterwards.
"""

from __future__ import annotations

import os
import signal
import time
import tracemalloc
import uuid

import numpy as np
import pytest

import labkit as lk
from labkit.checkpoints.location import CheckpointLocation
from tests.s3 import moto_s3

#: Floats in a trial's state: 8 MB, far more than the client may allocate while the sweep runs.
STATE = 1 << 20


@pytest.fixture(scope="module")
def s3():
    """``(url, storage_options)`` of a bucket on moto's S3 server (a process of its own: the
    tests measure this process's memory), stopped after the module."""
    with moto_s3("labkit-sweeps", own_process=True) as bucket:
        yield bucket


@pytest.fixture(scope="module")
def workers():
    """Two worker processes of the module's own (a test kills one; its nanny restarts it)."""
    with lk.DaskScheduler(mode="processes", n_workers=2, threads_per_worker=1) as s:
        yield s


def weights(x: float, epoch: int) -> np.ndarray:
    """The state a trial of ``x`` holds after ``epoch``: made again by the test to compare."""
    return np.full(STATE, x + epoch)


def training(config, trial):
    """Three epochs; a checkpoint of 8 MB after each; goes on from ``trial.restore()``."""
    saved = trial.restore()
    start = 0 if saved is None else saved["epoch"] + 1
    for epoch in range(start, 3):
        time.sleep(0.05)
        trial.report(epoch, loss=config["x"] / (epoch + 1), pid=os.getpid(), started=start)
        trial.checkpoint({"epoch": epoch, "weights": weights(config["x"], epoch)})
        if config["kill"] and trial.attempt == 0 and epoch == 1:
            os.kill(os.getpid(), signal.SIGKILL)  # the worker dies after its checkpoint went out


def _url(s3) -> str:
    """A prefix of the bucket of its own for one sweep."""
    return f"{s3[0]}/sweeps-{uuid.uuid4().hex[:8]}"


def test_a_sweep_on_worker_processes_checkpoints_to_s3_and_the_best_model_loads(
    s3, workers, tmp_path
):
    url, options = _url(s3), s3[1]
    store = tmp_path / "s.db"
    location = CheckpointLocation(url, options)
    location.probe("the client")  # botocore reads its models once a session: not measured
    tracemalloc.start()
    try:
        result = lk.sweep(
            training,
            {"x": lk.uniform(0, 1), "kill": False},
            trials=4,
            metric="loss",
            mode="min",
            scheduler=workers,
            seed=3,
            store=store,
            name="s3",
            checkpoints=url,
            storage_options=options,
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.counts() == {"completed": 4}
    # twelve checkpoints of 8 MB each were written, none of them through this process
    assert peak < STATE * 8 / 2, f"the client allocated {peak / 2**20:.1f} MiB at its peak"
    assert os.path.getsize(store) < STATE * 8 / 4  # the store keeps references, not bytes
    assert not [p for p in os.listdir(tmp_path) if "checkpoints" in p]  # nothing beside it
    assert location.size_of() >= STATE * 8  # the bytes are in the bucket
    best = result.best
    model = best.checkpoint()
    assert model["epoch"] == 2
    np.testing.assert_array_equal(model["weights"], weights(best.config["x"], 2))
    stored = lk.load_sweep(store, "s3").trials
    again = next(t for t in stored if t.id == best.id).checkpoint(storage_options=options)
    np.testing.assert_array_equal(again["weights"], model["weights"])
    location.remove_all()


def test_a_trial_whose_worker_is_killed_goes_on_from_its_checkpoint_on_s3(s3, workers, tmp_path):
    url, options = _url(s3), s3[1]
    result = lk.sweep(
        training,
        [{"x": 0.25, "kill": True}],
        metric="loss",
        mode="min",
        scheduler=workers,
        store=tmp_path / "s.db",
        name="killed",
        checkpoints=url,
        storage_options=options,
        max_failures=2,
    )
    trial = result.trials[0]
    assert trial.status == "completed" and trial.attempts == 2
    assert [s for s, _, _ in trial.history] == [0, 1, 2]  # every epoch once, in order
    # the second execution began after a checkpoint it read from the bucket (epoch 0's, or
    # epoch 1's if its reference reached the sweep before the worker died), on another pid
    killed, *_ = (m["pid"] for _, m, _ in trial.history)
    again = [m for _, m, _ in trial.history if m["pid"] != killed]
    assert again and all(m["started"] in (1, 2) for m in again)
    np.testing.assert_array_equal(result.best.checkpoint()["weights"], weights(0.25, 2))
    CheckpointLocation(url, options).remove_all()


def test_a_bucket_the_workers_cannot_reach_fails_before_any_trial_naming_it(s3, workers):
    _, options = s3
    with pytest.raises(lk.StorageError) as info:
        lk.sweep(
            training,
            {"x": lk.uniform(0, 1), "kill": False},
            trials=2,
            metric="loss",
            mode="min",
            scheduler=workers,
            store=None,
            checkpoints="s3://labkit-no-such-bucket/sweeps",
            storage_options=options,
        )
    text = str(info.value)
    assert "s3://labkit-no-such-bucket/sweeps" in text
    assert "worker" in text
