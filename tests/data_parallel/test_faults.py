"""Faults of the data-parallel trainer: non-finite losses, and a Dask worker killed mid-step."""

from __future__ import annotations

import copy
import math
import os
import signal
import threading
import time

import pytest
import torch

import labkit as lk
from labkit.data_parallel import DataParallelTrainer
from labkit.data_parallel.guards import NonFiniteLossError, NonFiniteLossWarning
from labkit.scheduling.dask.connect import scheduler_identity

from .models import HoldOn, assert_same_parameters, batch, mlp, plain_steps

MSE = torch.nn.functional.mse_loss
CPUS = ["cpu:0", "cpu:1", "cpu:2"]


def adam(model):
    return torch.optim.Adam(model.parameters(), lr=0.01)


def poisoned(seed, row, value=float("nan")):
    """A batch whose target row ``row`` holds ``value``: that replica's loss is not finite."""
    x, y = batch(seed=seed)
    y = y.clone()
    y[row, 0] = value
    return x, y


def snapshot(trainer):
    """Copies of everything a step may change: parameters, buffers, optimizer state."""
    state = trainer.state_dict()
    return state["model"], state["optimizer"]


def assert_equal_states(a, b):
    """Two (nested) states hold exactly the same values."""
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_equal_states(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for u, v in zip(a, b):
            assert_equal_states(u, v)
    else:
        assert a == b


def twin_steps(model, devices, batches):
    """The parameters an in-process trainer on ``devices`` reaches over ``batches``.

    Batch norm normalises each replica's share by its own statistics, so a
    batch-norm model is compared with the same split, not with one device.
    """
    model = copy.deepcopy(model)
    with DataParallelTrainer(model, MSE, adam(model), devices=devices) as twin:
        for x, y in batches:
            twin.step(x, y)
    return model


# ------------------------------------------------------------------ non-finite losses, local

@pytest.mark.parametrize("devices, row, replica", [(["cpu"], 5, 0), (CPUS, 20, 2)])
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_nonfinite_loss_raises_and_leaves_the_model_as_it_was(trainers, devices, row,
                                                                replica, value):
    model = mlp(batchnorm=True)
    reference = twin_steps(model, devices, [batch(seed=1), batch(seed=3)])
    t = DataParallelTrainer(model, MSE, adam(model), devices=devices)
    trainers.append(t)
    t.step(*batch(seed=1))
    params, opt_state = snapshot(t)
    with pytest.raises(NonFiniteLossError) as info:
        t.step(*poisoned(2, row, value))
    err = info.value
    assert isinstance(err, lk.TrainingError)
    # the second step: numbered from 1, as epochs and batches are
    assert err.where["step"] == 2 and err.where["replica"] == replica
    assert err.where["device"] == devices[replica]
    assert "step 2" in str(err) and f"replica {replica}" in str(err)
    after, after_opt = snapshot(t)
    assert_equal_states(after, params)  # batch-norm statistics included
    assert_equal_states(after_opt, opt_state)  # Adam's moments and step count
    for r in t.replicas:
        assert_equal_states(r.state_dict(), params)
        assert all(p.grad is None for p in r.parameters())
    assert t.steps == 1
    t.step(*batch(seed=3))  # as if the poisoned batch had never come
    assert_same_parameters(model, reference, 1e-12)


def test_skip_mode_warns_counts_and_trains_on_the_good_batches(trainers):
    model = mlp()
    good = [batch(seed=1), batch(seed=2)]
    data = [good[0], poisoned(5, 11, float("inf")), good[1]]
    reference = plain_steps(model, good * 2, optimizer_fn=adam)
    t = DataParallelTrainer(model, MSE, adam(model), devices=CPUS, on_nonfinite="skip")
    trainers.append(t)
    with pytest.warns(NonFiniteLossWarning, match="replica 1") as caught:
        history = t.fit(data, epochs=2)
    assert len(caught) == 2 and "epoch 1, batch 2, step 2" in str(caught[0].message)
    assert t.skipped_batches == 2 and t.steps == 4
    assert [h["skipped"] for h in history] == [1, 1]
    assert all(h["loss"] == h["loss"] for h in history)  # the mean leaves the skipped out
    assert_same_parameters(model, reference, 1e-12)
    with pytest.warns(NonFiniteLossWarning, match="3 skipped so far"):
        assert math.isnan(t.step(*poisoned(6, 0)))
    assert t.skipped_batches == 3 and t.steps == 4
    assert_same_parameters(model, reference, 1e-12)


@pytest.mark.parametrize("devices", [["cpu"], CPUS])
def test_a_nonfinite_loss_in_a_fit_names_its_place_in_one_numbering(trainers, devices):
    """Epoch, batch and step all count from 1, as the board counts them (issue 44)."""
    model = mlp()
    t = DataParallelTrainer(model, MSE, adam(model), devices=devices)
    trainers.append(t)
    with pytest.raises(NonFiniteLossError) as info:
        t.fit([poisoned(1, 0), batch(seed=2)], epochs=2)
    where = info.value.where
    assert (where["epoch"], where["batch"], where["step"]) == (1, 1, 1)
    assert "[epoch 1, batch 1, step 1, " in str(info.value)
    t.fit([batch(seed=2), batch(seed=3)])
    with pytest.raises(NonFiniteLossError) as info:   # the trainer's third step
        t.fit([poisoned(4, 0)])
    assert "[epoch 1, batch 1, step 3, " in str(info.value)
    x, y = batch(seed=5)
    with pytest.raises(lk.InputError, match=r"step 3\b"):   # a lone step: the same numbers
        t.step(x, y[:5])
    assert t.steps == 2


def test_a_bad_policy_is_refused():
    model = mlp()
    with pytest.raises(lk.InputError, match="on_nonfinite") as info:
        DataParallelTrainer(model, MSE, adam(model), devices=["cpu"], on_nonfinite="ignore")
    assert info.value.where["argument"] == "on_nonfinite"


# ------------------------------------------------------------- on Dask workers (own cluster)

@pytest.fixture(scope="module")
def fault_cluster():
    """A cluster of its own: the test below kills one of its workers."""
    import warnings

    from distributed import LocalCluster
    with warnings.catch_warnings():  # its HTTP server moves off the shared cluster's port
        warnings.filterwarnings("ignore", "Port .* is already in use", UserWarning)
        c = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                         dashboard_address=None)
    with c:
        yield c


@pytest.fixture
def workers(fault_cluster):
    """A DaskScheduler on that cluster, once it has both its workers."""
    with lk.DaskScheduler(fault_cluster.scheduler_address) as s:
        s.client.wait_for_workers(2, timeout=180)
        yield s


def test_a_nonfinite_loss_on_a_worker_raises_or_skips(workers, trainers):
    model = mlp(batchnorm=True)
    reference = twin_steps(model, ["cpu:0", "cpu:1"], [batch(seed=1), batch(seed=3)])
    t = DataParallelTrainer(model, MSE, adam(model), scheduler=workers)
    trainers.append(t)
    t.step(*batch(seed=1))
    params, opt_state = snapshot(t)
    with pytest.raises(NonFiniteLossError) as info:
        t.step(*poisoned(2, 20))  # row 20 is in rank 1's half
    err = info.value
    assert (err.where["step"], err.where["replica"], err.where["device"]) == (2, 1, t.names[1])
    after, after_opt = snapshot(t)
    assert_equal_states(after, params)
    assert_equal_states(after_opt, opt_state)
    t.on_nonfinite = "skip"
    with pytest.warns(NonFiniteLossWarning, match="replica 0"):
        assert math.isnan(t.step(*poisoned(2, 0)))  # row 0 is in rank 0's half
    assert t.skipped_batches == 1 and t.steps == 1
    t.step(*batch(seed=3))
    assert_same_parameters(t.sync_model(), reference, 1e-10)


def _pids(client) -> dict:
    return client.run(os.getpid)


def _kill_when_flagged(flag: str, pid: int, deadline: float) -> None:
    """Kill ``pid`` once the replica on it has touched ``flag`` (it is then mid-step)."""
    while not os.path.exists(flag) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)


@pytest.mark.soak
def test_a_worker_killed_mid_step_is_named_and_close_tears_the_group_down(workers, tmp_path):
    client = workers.client
    flag = str(tmp_path / "in-step")
    model = HoldOn(mlp(), flag)
    reference = plain_steps(mlp(), [batch(seed=1)])
    t = DataParallelTrainer(model, MSE, torch.optim.SGD(model.parameters(), lr=0.1,
                                                        momentum=0.9), scheduler=workers)
    stores = [t._group._store_dirs[0]]
    t.step(*batch(seed=1))
    victim = t.names[1]
    x, y = batch(seed=2)
    x = x.clone()
    x[20, 0] = 500.0  # rank 1's share: its replica holds on in forward until killed
    killer = threading.Thread(target=_kill_when_flagged,
                              args=(flag, _pids(client)[victim], time.monotonic() + 300))
    killer.start()
    try:
        with pytest.raises(lk.WorkerLostError) as info:
            t.step(x, y)
    finally:
        killer.join()
    assert info.value.where["replica"] == 1 and info.value.where["worker"] == victim
    assert "replica 1" in str(info.value) and victim in str(info.value)
    with pytest.raises(lk.TrainingError, match="broken"):
        t.step(*batch(seed=3))
    t.close()  # no error: the survivor is torn down and the model gets its parameters
    t.close()
    assert_same_parameters(t.model.inner, reference, 1e-12)
    assert stores[0] is not None and not os.path.exists(stores[0])

    client.wait_for_workers(2, timeout=180)  # the nanny brings a fresh worker up
    assert victim not in scheduler_identity(client)["workers"]
    assert not any(client.run(_holds_a_group).values())
    fresh = mlp()
    t2 = DataParallelTrainer(fresh, MSE, torch.optim.SGD(fresh.parameters(), lr=0.1,
                                                         momentum=0.9), scheduler=workers)
    stores.append(t2._group._store_dirs[0])
    try:
        t2.step(*batch(seed=1))
        trained = t2.sync_model()
    finally:
        t2.close()
    for p, q in zip(trained.parameters(), reference.parameters()):
        assert torch.allclose(p, q, atol=1e-12, rtol=0)
    assert not [s for s in stores if os.path.exists(s)]


def _holds_a_group() -> bool:
    """Whether this worker process still holds a torch.distributed group or a replica."""
    import torch.distributed as dist

    from labkit.data_parallel.worker import rank
    return dist.is_initialized() or bool(rank.RANKS)


class _SlowToBuild(torch.nn.Linear):
    """A model whose copy on the worker named by ``pid_file`` is made only once ``release``
    exists: a worker that came back after a loss, importing torch on a loaded machine."""

    def __init__(self, pid_file, started, release):
        super().__init__(4, 1)
        self.files = (pid_file, started, release)

    def __setstate__(self, state):
        pid_file, started, release = state["files"]
        with open(pid_file) as f:
            slow = f.read() == str(os.getpid())
        if slow:
            open(started, "w").close()
            deadline = time.monotonic() + 300
            while not os.path.exists(release) and time.monotonic() < deadline:
                time.sleep(0.05)
        super().__setstate__(state)


def test_a_rank_slower_to_build_than_the_lag_bound_is_waited_for(workers, tmp_path):
    """A set-up rank that runs past the lag bound is slow, not hung (issue 44's soak).

    The bound is a time (the group's ``timeout`` plus ``GRACE`` after the first rank
    ended), so the slow rank is held past it and released: before, the group failed
    with "set-up did not finish: a worker hangs".
    """
    from labkit.data_parallel.dask.group import DaskReplicaGroup
    from labkit.data_parallel.dask.tasks import GRACE

    client = workers.client
    names = sorted(scheduler_identity(client)["workers"])
    pid_file, started, release = (str(tmp_path / n) for n in ("pid", "started", "release"))
    with open(pid_file, "w") as f:
        f.write(str(client.run(os.getpid, workers=[names[1]])[names[1]]))
    model = _SlowToBuild(pid_file, started, release)
    made: dict = {}

    def make():
        try:
            made["group"] = DaskReplicaGroup(model, MSE, torch.optim.SGD(model.parameters(),
                                                                         lr=0.1),
                                             workers, timeout=1.0)
        except BaseException as exc:  # noqa: BLE001 - asserted below
            made["error"] = exc
    maker = threading.Thread(target=make)
    maker.start()
    deadline = time.monotonic() + 600   # a fresh worker imports torch first: slow when loaded
    while not os.path.exists(started):
        assert time.monotonic() < deadline and maker.is_alive(), made
        time.sleep(0.05)
    while not client.run(_holds_a_group, workers=[names[0]])[names[0]]:   # rank 0 was built
        assert time.monotonic() < deadline and maker.is_alive(), made
        time.sleep(0.05)
    maker.join(1.0 + GRACE + 5.0)   # past the bound: before, the set-up raised by now
    failed = made.get("error")
    open(release, "w").close()
    maker.join(180)
    group = made.get("group")
    try:
        assert failed is None and "error" not in made, made.get("error")
        assert group is not None and group.names == names
        group.step(torch.randn(24, 4), torch.randn(24, 1), [12, 12])   # and it trains
    finally:
        if group is not None:
            group.close()
