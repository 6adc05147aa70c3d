"""Bad arguments to the data-parallel trainer: a labkit error naming the place, nothing broken.

Each case makes one bad call and checks the error type and that ``str(err)``
names the argument (or step, device); then the very trainer (or, for a refused
constructor, the same model and optimizer) trains a good step that equals a
plain single-device step: the bad call changed nothing.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import labkit as lk
from labkit.data_parallel import DataParallelTrainer
from labkit.scheduling.dask.connect import scheduler_identity

from .models import assert_same_parameters, batch, mlp, plain_steps, sgd

MSE = torch.nn.functional.mse_loss
CPUS = ["cpu:0", "cpu:1", "cpu:2"]
X, Y = batch()


def _pair_list():
    return [(X, Y)]


def _failing_batches():
    """Two good batches, then the source itself fails."""
    yield X, Y
    yield X, Y
    raise OSError("the disk went away")


def _under_no_grad(t):
    with torch.no_grad():
        t.step(X, Y)


# (id, call on a trainer, error type, texts str(err) must hold)
CALLS = [
    ("fit-an-int", lambda t: t.fit(5), lk.InputError, ["batches", "int"]),
    ("fit-a-tensor", lambda t: t.fit(X), lk.InputError, ["batches", "Tensor"]),
    ("fit-epochs-0", lambda t: t.fit(_pair_list(), epochs=0), lk.InputError, ["epochs", "0"]),
    ("fit-epochs-negative", lambda t: t.fit(_pair_list(), epochs=-1), lk.InputError,
     ["epochs", "-1"]),
    ("fit-epochs-str", lambda t: t.fit(_pair_list(), epochs="x"), lk.InputError,
     ["epochs", "'x'"]),
    ("fit-epochs-float", lambda t: t.fit(_pair_list(), epochs=2.0), lk.InputError, ["epochs"]),
    ("fit-one-shot-iterator", lambda t: t.fit(iter(_pair_list()), epochs=2), lk.InputError,
     ["batches", "iterate again"]),
    ("fit-batch-not-a-pair", lambda t: t.fit([X]), lk.InputError,
     ["pair", "batch 1"]),
    ("fit-batch-of-arrays", lambda t: t.fit([(X.numpy(), Y)]), lk.InputError,
     ["argument x", "ndarray", "batch 1"]),
    ("evaluate-an-int", lambda t: t.evaluate(3), lk.InputError, ["batches", "evaluate"]),
    ("step-rows-differ", lambda t: t.step(X, Y[:23]), lk.InputError,
     ["24 rows but 23 targets", "argument y", "step 1"]),
    ("step-x-not-a-tensor", lambda t: t.step(X.numpy(), Y), lk.InputError,
     ["argument x", "ndarray", "torch.as_tensor"]),
    ("step-y-a-list", lambda t: t.step(X, Y.tolist()), lk.InputError, ["argument y", "list"]),
    ("step-empty", lambda t: t.step(X[:0], Y[:0]), lk.InputError, ["empty", "argument x"]),
    ("step-scalar-x", lambda t: t.step(torch.tensor(1.0), Y), lk.InputError,
     ["scalar", "argument x"]),
    ("step-wrong-width", lambda t: t.step(X[:, :5], Y), lk.TaskError,
     ["replica 0", "device cpu:0", "mat1 and mat2"]),
    ("evaluate-empty-batch", lambda t: t.evaluate([(X[:0], Y[:0])]), lk.InputError,
     ["empty", "argument x", "batch 1"]),
    ("evaluate-rows-differ", lambda t: t.evaluate([(X, Y), (X, Y[:1])]), lk.InputError,
     ["24 rows but 1 targets", "argument y", "batch 2"]),
    ("evaluate-failing-source", lambda t: t.evaluate(_failing_batches()), lk.InputError,
     ["the batches raised OSError", "the disk went away", "batch 3"]),
    ("step-under-no-grad", _under_no_grad, lk.TrainingError,
     ["torch.no_grad()", "evaluate()", "step 1"]),
]


def test_fit_over_a_source_that_fails_names_epoch_and_batch_and_keeps_its_steps():
    model = mlp()
    with DataParallelTrainer(model, MSE, sgd(model), devices=CPUS) as t:
        with pytest.raises(lk.InputError) as info:
            t.fit(_failing_batches())
        assert info.value.where == {"epoch": 1, "batch": 3}
        assert "the batches raised OSError: the disk went away" in str(info.value)
        assert isinstance(info.value.__cause__, OSError)
        assert t.steps == 2   # the steps before the failure are kept
    assert_same_parameters(model, plain_steps(mlp(), [(X, Y), (X, Y)]), 1e-12)


def test_huge_work_loads_split_evenly_instead_of_dividing_by_infinity():
    model = mlp()
    with DataParallelTrainer(model, MSE, sgd(model), devices=CPUS[:2],
                             work_load=[1e308, 1e308]) as t:
        t.step(X, Y)
        assert [s.stop - s.start for s in t.last_split] == [12, 12]
        assert t.shares == [0.5, 0.5]
    assert_same_parameters(model, plain_steps(mlp(), [(X, Y)]), 1e-12)


def test_every_replica_runs_under_the_callers_autocast():
    """Autocast is a setting of a thread: each replica thread takes the caller's."""
    model = mlp(dtype=torch.float32)
    seen = {}
    x, y = X.float(), Y.float()
    with DataParallelTrainer(model, MSE, sgd(model), devices=CPUS) as t:
        t.add_monitor(lambda step: seen.__setitem__(step.replica, step.outputs.dtype))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            t.step(x, y)
        assert seen == {0: torch.bfloat16, 1: torch.bfloat16, 2: torch.bfloat16}
        seen.clear()
        t.step(x, y)
        assert set(seen.values()) == {torch.float32}
        with torch.no_grad():
            grads = t.evaluate([(x, y)])
        assert set(grads) == {"loss"}


@pytest.fixture
def trainer():
    model = mlp()
    t = DataParallelTrainer(model, MSE, sgd(model), devices=CPUS)
    yield t
    t.close()


@pytest.mark.parametrize("call, kind, texts", [c[1:] for c in CALLS], ids=[c[0] for c in CALLS])
def test_a_bad_call_names_the_place_and_the_trainer_goes_on(trainer, call, kind, texts):
    with pytest.raises(kind) as info:
        call(trainer)
    for text in texts:
        assert text in str(info.value)
    assert trainer.steps == 0
    trainer.step(X, Y)
    assert_same_parameters(trainer.model, plain_steps(mlp(), [(X, Y)]), 1e-12)


# (id, constructor keywords, error type, texts str(err) must hold)
BUILDS = [
    ("devices-empty", {"devices": []}, lk.InputError, ["devices is empty"]),
    ("devices-unknown", {"devices": ["abacus"]}, lk.InputError,
     ["not a torch device", "abacus", "argument devices"]),
    ("devices-none-entry", {"devices": ["cpu:0", None]}, lk.InputError,
     ["argument devices", "None"]),
    ("devices-meta", {"devices": ["meta"]}, lk.InputError, ["unsupported device type", "meta"]),
    ("devices-missing-gpu", {"devices": ["cuda:99"]}, lk.InputError,
     ["device cuda:99", "argument devices"]),
    ("devices-twice", {"devices": ["cpu:0", "cpu:0"]}, lk.InputError, ["listed twice"]),
    ("work-load-short", {"work_load": [1, 2]}, lk.InputError,
     ["work_load", "2 entries for 3 devices"]),
    ("work-load-negative", {"work_load": [1, -1, 1]}, lk.InputError,
     ["work_load", "-1", "device cpu:1"]),
    ("work-load-all-zero", {"work_load": [0, 0, 0]}, lk.InputError,
     ["work_load", "positive", "device cpu:0"]),
    ("work-load-number", {"work_load": 3}, lk.InputError, ["work_load", "list"]),
    ("work-load-word", {"work_load": "fast"}, lk.InputError, ["work_load", "'auto'"]),
    ("on-nonfinite", {"on_nonfinite": "ignore"}, lk.InputError, ["on_nonfinite", "'skip'"]),
    ("loss-not-callable", {"loss_fn": "mse"}, lk.InputError, ["loss_fn", "callable"]),
]


@pytest.mark.parametrize("kw, kind, texts", [b[1:] for b in BUILDS], ids=[b[0] for b in BUILDS])
def test_a_bad_constructor_argument_is_refused_and_the_model_stays_usable(kw, kind, texts):
    model = mlp()
    optimizer = sgd(model)
    settings = dict({"devices": CPUS, "loss_fn": MSE}, **kw)
    loss_fn = settings.pop("loss_fn")
    with pytest.raises(kind) as info:
        DataParallelTrainer(model, loss_fn, optimizer, **settings)
    for text in texts:
        assert text in str(info.value)
    with DataParallelTrainer(model, MSE, optimizer, devices=CPUS) as t:
        t.step(X, Y)
    assert_same_parameters(model, plain_steps(mlp(), [(X, Y)]), 1e-12)


def test_a_loss_that_is_not_one_number_is_named_and_changes_nothing():
    model = mlp()
    rows = DataParallelTrainer(model, lambda out, y: (out - y) ** 2, sgd(model), devices=CPUS)
    with rows, pytest.raises(lk.InputError) as info:
        rows.step(X, Y)
    assert "loss_fn must return a tensor holding one number" in str(info.value)
    assert "argument loss_fn" in str(info.value) and "replica" in info.value.where
    assert_same_parameters(model, mlp(), 0)
    assert all(p.grad is None for p in model.parameters())


def test_a_batch_smaller_than_the_device_count_is_trained_not_refused():
    model = mlp()
    with DataParallelTrainer(model, MSE, sgd(model), devices=CPUS) as t:
        t.step(X[:2], Y[:2])
        assert len(t.last_split) == 2
    assert_same_parameters(model, plain_steps(mlp(), [(X[:2], Y[:2])]), 1e-12)


def _holds_a_group() -> bool:
    import torch.distributed as dist

    from labkit.data_parallel.worker import rank
    return dist.is_initialized() or bool(rank.RANKS)


def test_a_refused_work_load_on_dask_leaves_no_group_on_the_workers(dask_scheduler):
    client = dask_scheduler.client
    model = mlp()
    n = len(scheduler_identity(client)["workers"])
    with pytest.raises(lk.InputError, match=f"work_load has {n + 1} entries for {n} devices"):
        DataParallelTrainer(model, MSE, sgd(model), work_load=[1] * (n + 1),
                            scheduler=dask_scheduler)
    assert not any(client.run(_holds_a_group).values())
    with DataParallelTrainer(model, MSE, sgd(model), scheduler=dask_scheduler) as t:
        with pytest.raises(lk.InputError, match="argument x"):
            t.step(X.numpy(), Y)
        t.step(X, Y)
    assert_same_parameters(model, plain_steps(mlp(), [(X, Y)]), 1e-12)


def test_on_dask_bad_arguments_and_a_shut_down_scheduler_are_labkit_errors(capfd):
    """A loss that cannot be pickled names ``loss_fn``; a replica's own error is told
    once (no worker logs "Compute Failed"), with only the caller's frames and the
    replica's as its cause; a step after shutdown is a SchedulerError."""
    import threading
    import traceback

    from .models import Refuses
    lock = threading.Lock()

    def loss_with_a_lock(out, y, _held=lock):
        return MSE(out, y)
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        model = mlp()
        with pytest.raises(lk.InputError) as info:
            DataParallelTrainer(model, loss_with_a_lock, sgd(model), scheduler=s)
        assert info.value.where == {"argument": "loss_fn"}
        assert "cannot pickle '_thread.lock'" in str(info.value)
        refuses = Refuses()
        with DataParallelTrainer(refuses, MSE, sgd(refuses), scheduler=s) as t:
            with pytest.raises(lk.TaskError, match="replica 0 failed with ValueError"):
                t._group.evaluate(X, Y, [12, 12])   # a task that raises on the worker
            with pytest.raises(lk.TaskError) as info:
                t.step(X, Y)
        assert str(info.value).startswith("replica 0 failed with ValueError: this replica "
                                          "refuses its rows")
        assert "refuses its rows" in str(info.value.__cause__)   # the replica's own lines
        for frame, _ in traceback.walk_tb(info.value.__traceback__):
            assert frame.f_code.co_filename == __file__ or frame.f_locals.get(
                "__tracebackhide__"), frame.f_code.co_filename
        trainer = DataParallelTrainer(model, MSE, sgd(model), scheduler=s)
    with pytest.raises(lk.SchedulerError, match="shut down"):
        trainer.step(X, Y)
    # it trained nothing the model lacks: closing warns of no lost parameters (issue 44;
    # it warned "could not fetch the trained parameters" here before)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        trainer.close()
    assert "Compute Failed" not in capfd.readouterr().err
