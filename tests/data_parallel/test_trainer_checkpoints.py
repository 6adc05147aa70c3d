"""A trainer checkpoints to a location where its state lives, and restores from there (issue 46).

On real worker processes: ``write_checkpoint`` is written by rank 0 on its
worker and ``read_checkpoint`` read by every rank on its own, none of the
state passing through the client (measured by the bytes the workers sent and
by a client that cannot read the location); a restored trainer, a new one on
other workers too, goes on exactly as the one that wrote it; the user's model
holds the restored state as after a fit.  On threads the same calls write and
read from this process.
"""

from __future__ import annotations

import os
import shutil

import distributed.comm.tcp
import pytest
import torch
from torch import nn

import labkit as lk
from labkit.checkpoints import Checkpointable, CheckpointLocation, CheckpointRef
from labkit.data_parallel import DataParallelTrainer
from labkit.experiments.store.checkpoints import decode

from .test_faults import assert_equal_states

#: 1000 x 1000 float32 weights: 4 MB, far above what the calls themselves send
BIG = 1000


def wide(seed: int = 0) -> nn.Module:
    """A linear model of about 4 MB, seeded by a generator of its own."""
    model = nn.Linear(BIG, BIG)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.01)
    return model


def data(step: int, rows: int = 16):
    """The batch of ``step``: the same for every trainer."""
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(rows, BIG, generator=g), torch.randn(rows, BIG, generator=g)


def trainer_on(scheduler, seed: int = 0, **options) -> DataParallelTrainer:
    model = wide(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    return DataParallelTrainer(
        model, nn.functional.mse_loss, optimizer, scheduler=scheduler, **options
    )


class Received:
    """Counts the bytes of every message this process reads from a Dask socket (the client).

    It wraps the TCP comm's decoding of a message's frames, which it then calls
    as before: so every result, gathered state or reply the client gets is counted.
    """

    def __init__(self, monkeypatch):
        self.nbytes = 0
        decode_frames = distributed.comm.tcp.from_frames

        async def counting(frames, *args, **kwargs):
            self.nbytes += sum(memoryview(f).nbytes for f in frames)
            return await decode_frames(frames, *args, **kwargs)

        monkeypatch.setattr(distributed.comm.tcp, "from_frames", counting)


def model_held() -> dict:
    """The model state of this worker's one rank (the test's trainer is the only one)."""
    from labkit.data_parallel.worker.rank import RANKS

    (rank,) = RANKS.values()
    return {k: v.detach().cpu().clone() for k, v in rank.model.state_dict().items()}


@pytest.fixture(scope="module")
def two():
    """Two worker processes, one thread each."""
    with lk.DaskScheduler(mode="processes", n_workers=2, threads_per_worker=1) as s:
        yield s


@pytest.fixture
def location(tmp_path):
    where = CheckpointLocation(str(tmp_path / "checkpoints"))
    yield where
    where.remove_all()


def test_a_trainer_is_checkpointable(two):
    with trainer_on(two) as trainer:
        assert isinstance(trainer, Checkpointable)


def test_rank_zero_writes_and_every_rank_reads_with_no_state_through_the_client(
    two, location, monkeypatch
):
    state_bytes = BIG * (BIG + 1) * 4 * 3  # the parameters and Adam's two moments
    with trainer_on(two, sync_model=False) as trainer:
        for step in range(2):
            trainer.step(*data(step))
        received = Received(monkeypatch)
        ref = trainer.write_checkpoint(location, "trial-0/2.lkc", step=2)
        assert isinstance(ref, CheckpointRef) and ref.step == 2 and ref.nbytes > state_bytes
        trainer.step(*data(2))

        def refused(*_):
            raise AssertionError("the client read the checkpoint")

        with monkeypatch.context() as patch:
            patch.setattr(CheckpointLocation, "read", refused)  # in this process only
            trainer.read_checkpoint(location, ref)
        # neither the write nor the read brought the state here (a step's batch went out)
        assert received.nbytes < state_bytes / 10, received.nbytes
        assert trainer.model_stale  # nothing was copied here (sync_model=False)
        # the control: the count sees a state that does come through the client
        before = received.nbytes
        state = trainer.state_dict()
        assert received.nbytes - before > state_bytes * 0.9
    written = decode(location.read(ref))
    assert_equal_states(dict(written["model"]), dict(state["model"]))
    assert_equal_states(written["optimizer"], state["optimizer"])
    assert written["steps"] == 2 and state["steps"] == 2


def test_a_restored_trainer_goes_on_as_the_one_that_wrote_it(two, location):
    with trainer_on(two) as first:
        for step in range(3):
            first.step(*data(step))
        ref = first.write_checkpoint(location, "trial-0/3.lkc", step=3)
        went_on = [first.step(*data(step)) for step in range(3, 5)]
        trained = {k: v.clone() for k, v in first.model.state_dict().items()}
    with trainer_on(two, seed=7) as second:  # other weights, a new group
        second.read_checkpoint(location, ref)
        assert second.steps == 3
        written = decode(location.read(ref))
        assert_equal_states(dict(second.model.state_dict()), dict(written["model"]))
        assert_equal_states(second.optimizer.state_dict(), written["optimizer"])
        again = [second.step(*data(step)) for step in range(3, 5)]
        assert again == pytest.approx(went_on, rel=1e-6)
        for name, value in second.model.state_dict().items():
            torch.testing.assert_close(value, trained[name], rtol=1e-5, atol=1e-7)


def test_a_checkpoint_that_is_gone_is_a_storage_error_and_every_replica_keeps_its_state(
    two, location
):
    with trainer_on(two) as trainer:
        trainer.step(*data(0))
        ref = trainer.write_checkpoint(location, "trial-0/1.lkc", step=1)
        trainer.step(*data(1))
        held = trainer.state_dict()
        location.delete(ref)
        with pytest.raises(lk.StorageError, match="not there") as caught:
            trainer.read_checkpoint(location, ref)
        assert "trial-0/1.lkc" in str(caught.value) and "replica" in str(caught.value)
        assert_equal_states(dict(trainer.state_dict()["model"]), dict(held["model"]))
        trainer.step(*data(2))  # the group is whole: it trains on
        with pytest.raises(lk.InputError, match="CheckpointLocation"):
            trainer.write_checkpoint(str(location.url), "k", 1)


def test_on_threads_the_trainer_writes_and_reads_from_this_process(location):
    model = wide()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with DataParallelTrainer(
        model, nn.functional.mse_loss, optimizer, devices=["cpu:0", "cpu:1"]
    ) as trainer:
        trainer.step(*data(0))
        ref = trainer.write_checkpoint(location, "threads/1.lkc", step=1)
        kept = {k: v.clone() for k, v in model.state_dict().items()}
        momentum = optimizer.state_dict()["state"][0]["momentum_buffer"].clone()
        trainer.step(*data(1))
        trainer.read_checkpoint(location, ref)
        assert_equal_states(dict(model.state_dict()), kept)
        assert torch.equal(optimizer.state_dict()["state"][0]["momentum_buffer"], momentum)
        assert trainer.steps == 1
        with pytest.raises(lk.InputError, match="CheckpointRef"):
            trainer.read_checkpoint(location, "threads/1.lkc")


def test_a_rank_that_cannot_read_the_location_leaves_every_replica_as_it_was(two, tmp_path):
    # a relative folder is another folder for a worker in another directory: as a worker on
    # a host without the shared folder, rank 1 cannot read what rank 0 wrote
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with trainer_on(two) as trainer:
        rank_one = trainer.names[1]
        back = two.client.run(os.getcwd, workers=[rank_one])[rank_one]
        location = CheckpointLocation("labkit-test-relative-checkpoints")
        try:
            trainer.step(*data(0))
            ref = trainer.write_checkpoint(location, "trial-0/1.lkc", step=1)
            trainer.step(*data(1))
            held = trainer.state_dict()
            two.client.run(os.chdir, str(elsewhere), workers=[rank_one])
            with pytest.raises(lk.StorageError, match="not there") as caught:
                trainer.read_checkpoint(location, ref)
            assert rank_one in str(caught.value) and "replica 1" in str(caught.value)
        finally:
            two.client.run(os.chdir, back, workers=[rank_one])
            shutil.rmtree(
                os.path.join(back, "labkit-test-relative-checkpoints"), ignore_errors=True
            )
        assert trainer.steps == 2
        states = two.client.run(model_held, workers=list(trainer.names))
        for state in states.values():  # rank 0 read it but did not load it either
            assert_equal_states(state, dict(held["model"]))
        trainer.step(*data(2))  # the group is whole: it trains on
