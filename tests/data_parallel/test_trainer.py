"""DataParallelTrainer in-process: equal to a single-device step, errors, small batches, state."""

from __future__ import annotations

import copy

import pytest
import torch

import labkit as lk
from labkit.data_parallel import DataParallelTrainer

from .models import assert_same_parameters, batch, mlp, plain_steps, sgd

MSE = torch.nn.functional.mse_loss
CPUS = ["cpu:0", "cpu:1", "cpu:2"]


def make(trainers, model, devices=CPUS, work_load=None, **kw):
    t = DataParallelTrainer(model, kw.pop("loss_fn", MSE), kw.pop("opt", sgd)(model),
                            devices=devices, work_load=work_load, **kw)
    trainers.append(t)
    return t


@pytest.mark.parametrize("dtype, atol", [(torch.float64, 1e-12), (torch.float32, 1e-6)])
def test_uneven_shares_equal_one_full_batch_step(trainers, dtype, atol):
    model = mlp(dtype)
    reference = plain_steps(model, [batch(dtype=dtype, seed=s) for s in (1, 2, 3)])
    t = make(trainers, model, work_load=[1, 2, 3])
    losses = [t.step(*batch(dtype=dtype, seed=s)) for s in (1, 2, 3)]
    assert [s.stop - s.start for s in t.last_split] == [4, 8, 12]
    assert_same_parameters(model, reference, atol)
    for replica in t.replicas:  # broadcast: every replica holds the new parameters
        assert_same_parameters(replica, reference, atol)
    x, y = batch(dtype=dtype, seed=1)
    assert losses[0] == pytest.approx(MSE(mlp(dtype)(x), y).item(), rel=1e-6)


def test_summed_loss_is_reduced_without_weights(trainers):
    model = mlp()
    loss = torch.nn.MSELoss(reduction="sum")
    reference = plain_steps(model, [batch()], loss_fn=loss,
                            optimizer_fn=lambda m: torch.optim.SGD(m.parameters(), lr=1e-3))
    t = make(trainers, model, work_load=[3, 1, 2], loss_fn=loss,
             opt=lambda m: torch.optim.SGD(m.parameters(), lr=1e-3))
    total = t.step(*batch())
    assert_same_parameters(model, reference, 1e-12)
    assert total == pytest.approx(loss(mlp()(batch()[0]), batch()[1]).item(), rel=1e-9)


@pytest.mark.parametrize("momentum", [0.1, None])
def test_batchnorm_statistics_equal_the_full_batch_ones(trainers, momentum):
    # Linear -> BatchNorm: on the first step every replica has the same Linear, so the
    # joined statistics must equal those of one device seeing the whole batch.
    model = mlp(batchnorm=True)
    model[1].momentum = momentum
    reference = plain_steps(model, [batch(seed=1)])
    t = make(trainers, model, work_load=[1, 2, 3])
    t.step(*batch(seed=1))
    for name in ("1.running_mean", "1.running_var", "1.num_batches_tracked"):
        want, got = reference.state_dict()[name], model.state_dict()[name]
        assert torch.allclose(got.double(), want.double(), atol=1e-12, rtol=0), name
        assert torch.equal(t.replicas[2].state_dict()[name], got)  # broadcast back
    assert not torch.allclose(model[1].running_var, torch.ones(16, dtype=torch.float64))


def test_batchnorm_running_statistics_over_several_steps(trainers):
    model = mlp(first_bn=True)
    bn_only = copy.deepcopy(model[0])
    t = make(trainers, model, work_load=[2, 1, 1])
    for s in (1, 2, 3):
        x, _ = batch(seed=s)
        bn_only(x)  # a single device seeing the whole batch
        t.step(*batch(seed=s))
    assert torch.allclose(model[0].running_mean, bn_only.running_mean, atol=1e-12)
    assert torch.allclose(model[0].running_var, bn_only.running_var, atol=1e-12)


def test_a_batch_smaller_than_the_device_count_uses_fewer_devices(trainers):
    model = mlp()
    small = batch(n=2)
    reference = plain_steps(model, [batch(), small])
    t = make(trainers, model)
    t.step(*batch())
    t.step(*small)
    assert len(t.last_split) == 2
    assert_same_parameters(model, reference, 1e-12)


def test_a_failing_replica_is_named_and_the_trainer_stays_usable(trainers):
    model = torch.nn.Sequential(mlp(), )
    before = copy.deepcopy(model)
    t = make(trainers, model, work_load=[1, 1, 1])
    x, y = batch(n=9)
    bad = x.clone()
    bad[7] = float("nan")  # row 7 lies in replica 2's share

    def refuse_nan(module, inputs):
        if torch.isnan(inputs[0]).any():
            raise ValueError("NaN in the input")
    for replica in t.replicas:
        replica.register_forward_pre_hook(refuse_nan)
    with pytest.raises(lk.TaskError, match="NaN in the input") as info:
        t.step(bad, y)
    assert info.value.where["replica"] == 2 and info.value.where["device"] == "cpu:2"
    assert "replica 2 failed with ValueError" in str(info.value)
    assert_same_parameters(model, before, 0)
    assert all(p.grad is None for r in t.replicas for p in r.parameters())
    t.step(x, y)
    assert_same_parameters(model, plain_steps(before, [(x, y)]), 1e-12)


def test_bad_input_is_refused_with_labkit_errors(trainers):
    model = mlp()
    with pytest.raises(lk.InputError, match="2 entries for 3 devices"):
        make(trainers, model, work_load=[1, 2])
    with pytest.raises(lk.InputError, match="positive"):
        make(trainers, model, work_load=[1, 0, 1])
    with pytest.raises(lk.InputError, match="'auto'"):
        make(trainers, model, work_load="fast")
    with pytest.raises(lk.InputError, match="listed twice"):
        make(trainers, model, devices=["cpu:0", "cpu:0"])
    with pytest.raises(lk.InputError, match="not a torch device"):
        make(trainers, model, devices=["abacus"])
    t = make(trainers, model)
    x, y = batch()
    with pytest.raises(lk.InputError, match="24 rows but 23 targets"):
        t.step(x, y[:23])
    with pytest.raises(lk.InputError, match="torch tensors"):
        t.step(x.numpy(), y)
    t.close()
    with pytest.raises(lk.TrainingError, match="closed"):
        t.step(x, y)


def test_fit_evaluate_and_state(trainers):
    model = mlp()
    data = [batch(seed=s) for s in range(6)]
    t = make(trainers, model, work_load=[1, 1, 2])
    history = t.fit(data, epochs=4)
    assert [h["epoch"] for h in history] == [1, 2, 3, 4]
    assert history[-1]["loss"] < history[0]["loss"]
    reference = plain_steps(mlp(), data * 4)
    assert_same_parameters(model, reference, 1e-12)
    scores = t.evaluate(data, metrics={"mae": lambda o, y: (o - y).abs().mean()})
    with torch.no_grad():
        full_x, full_y = torch.cat([x for x, _ in data]), torch.cat([y for _, y in data])
        out = reference(full_x)
    assert scores["loss"] == pytest.approx(MSE(out, full_y).item(), rel=1e-9)
    assert scores["mae"] == pytest.approx((out - full_y).abs().mean().item(), rel=1e-9)
    assert all(r.training for r in t.replicas)

    state = t.state_dict()
    other = make(trainers, mlp(seed=5))
    other.load_state_dict(state)
    for replica in other.replicas:
        assert_same_parameters(replica, model, 0)
    t.step(*data[0])
    other.step(*data[0])  # same optimizer state (momentum) too
    assert_same_parameters(other.model, model, 1e-12)


def test_fit_errors_name_epoch_and_batch(trainers):
    t = make(trainers, mlp())
    with pytest.raises(lk.InputError, match="iterate again"):
        t.fit(iter([batch()]), epochs=2)
    with pytest.raises(lk.InputError) as info:
        t.fit([batch(), batch()[0]], epochs=1)
    assert info.value.where == {"epoch": 1, "batch": 2}
    x, y = batch()
    steps = t.steps
    with pytest.raises(lk.InputError) as info:
        t.fit([(x, y), (x, y[:3])])
    assert info.value.where["batch"] == 2 and t.steps == steps + 1


def test_monitors_see_each_replica_and_their_errors_are_located(trainers):
    t = make(trainers, mlp(), work_load=[1, 2, 3])
    seen = []
    remove = t.add_monitor(lambda r: seen.append((r.device, r.rows, float(r.loss) > 0,
                                                  tuple(r.outputs.shape))))
    t.step(*batch())
    assert sorted(seen) == [("cpu:0", 4, True, (4, 3)), ("cpu:1", 8, True, (8, 3)),
                            ("cpu:2", 12, True, (12, 3))]
    remove()

    def strict(record):
        raise RuntimeError(f"loss too high on {record.device}")
    t.add_monitor(strict, devices=["cpu:1"])
    with pytest.raises(lk.TaskError, match="loss too high on cpu:1") as info:
        t.step(*batch())
    assert info.value.where["replica"] == 1


def test_one_device_trains_the_model_in_place_without_threads(trainers):
    model = mlp()
    reference = plain_steps(model, [batch()])
    t = make(trainers, model, devices=["cpu"])
    assert t.replicas == [model] and t._group._threads._pool is None
    t.step(*batch())
    assert_same_parameters(model, reference, 0)
