"""DaskReplicaGroup on a real 2-worker Dask cluster, against plain single-process training."""

import copy
import threading
import time

import pytest
import torch
from torch import nn

from labkit.data_parallel.dask.group import DaskReplicaGroup
from labkit.errors import CancelledError, InputError, TaskError, TrainingError
from labkit.scheduling.dask.connect import scheduler_identity

COUNTS = [3, 5]  # uneven on purpose: the weights must follow the rows


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3)).double()


def sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def batch(seed, rows=8):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, 6, generator=g, dtype=torch.float64),
            torch.randn(rows, 3, generator=g, dtype=torch.float64))


def plain_step(model, optimizer, x, y):
    """One full-batch step on a single process: what the group must reproduce."""
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def max_diff(state_a, state_b):
    assert state_a.keys() == state_b.keys()
    return max((state_a[k].double() - state_b[k].double()).abs().max().item() for k in state_a)


def mean_abs_error(out, y):
    return (out - y).abs().mean()


class NaNGuard(nn.Module):
    """An MLP that refuses inputs holding NaN."""

    def __init__(self):
        super().__init__()
        self.net = mlp()

    def forward(self, x):
        if torch.isnan(x).any():
            raise ValueError("NaN row in the input")
        return self.net(x)


class Laggard(nn.Module):
    """Sleeps ``max(x) - 100`` seconds on a share holding a value above 100."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 3).double()

    def forward(self, x):
        if (x > 100).any():
            time.sleep(float(x.max()) - 100)
        return self.lin(x)


def _refuse():
    raise RuntimeError("this model cannot be built here")


class Unshippable(nn.Module):
    """Pickles fine, but unpickling it (on a worker) raises."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def __reduce__(self):
        return (_refuse, ())


def _worker_state():
    """``(open process groups, replicas held)`` in one worker process; the default group
    of torch.distributed stays untouched (labkit's groups are objects of their own)."""
    import torch.distributed as dist
    from labkit.data_parallel.worker import rank
    assert not dist.is_initialized()
    held = list(rank.RANKS.values())
    return sum(1 for r in held if r.group is not None and not r.group.closed), len(held)


def assert_workers_clean(client):
    assert set(client.run(_worker_state).values()) == {(0, 0)}


def test_uneven_steps_equal_full_batch_training(dask_scheduler):
    model = mlp()
    reference = copy.deepcopy(model)
    ref_opt = sgd(reference)
    with DaskReplicaGroup(model, nn.MSELoss(), sgd(model), dask_scheduler) as group:
        assert group.names == sorted(scheduler_identity(dask_scheduler.client)["workers"])
        assert group.backend == "gloo"
        for seed in range(3):
            x, y = batch(seed)
            loss, stats = group.step(x, y, COUNTS)
            assert loss == pytest.approx(plain_step(reference, ref_opt, x, y), rel=1e-12)
            assert [s["rows"] for s in stats] == COUNTS
            assert all(s["seconds"] > 0 and s["memory"] is None for s in stats)
        state = group.state_dict()
        assert max_diff(state["model"], reference.state_dict()) < 1e-10
        momentum = state["optimizer"]["state"][0]["momentum_buffer"]
        assert torch.allclose(momentum, ref_opt.state[reference[0].weight]["momentum_buffer"],
                              atol=1e-10)
        x, y = batch(10)
        scores = group.evaluate(x, y, [6, 2], {"mae": mean_abs_error})
        with torch.no_grad():
            out = reference(x)
        assert scores["loss"] == pytest.approx(nn.functional.mse_loss(out, y).item(), rel=1e-12)
        assert scores["mae"] == pytest.approx(mean_abs_error(out, y).item(), rel=1e-12)
    assert model[0].weight.grad is None  # the client's model is only the template


def test_state_dict_round_trip(dask_scheduler):
    model = mlp()
    with DaskReplicaGroup(model, nn.MSELoss(), sgd(model), dask_scheduler) as group:
        start = group.state_dict()
        assert max_diff(start["model"], model.state_dict()) == 0
        group.step(*batch(0), COUNTS)
        after_one = group.state_dict()
        group.step(*batch(1), COUNTS)
        group.load_state_dict(after_one)
        assert max_diff(group.state_dict()["model"], after_one["model"]) == 0
        # Every rank got the state: a step from it matches a plain step from it.
        reference = mlp()
        reference.load_state_dict(after_one["model"])
        ref_opt = sgd(reference)
        ref_opt.load_state_dict(after_one["optimizer"])
        x, y = batch(1)
        group.step(x, y, COUNTS)
        plain_step(reference, ref_opt, x, y)
        assert max_diff(group.state_dict()["model"], reference.state_dict()) < 1e-10


def test_failing_replica_raises_and_leaves_state_alone(dask_scheduler):
    model = NaNGuard()
    reference = copy.deepcopy(model)
    ref_opt = sgd(reference)
    with DaskReplicaGroup(model, nn.MSELoss(), sgd(model), dask_scheduler) as group:
        before = group.state_dict()
        x, y = batch(0)
        bad = x.clone()
        bad[6, 2] = float("nan")  # row 6 is in rank 1's share [3, 8)
        with pytest.raises(TaskError) as info:
            group.step(bad, y, COUNTS)
        err = info.value
        assert err.where["replica"] == 1 and err.where["device"] == group.names[1]
        assert err.original_type == "ValueError" and "NaN row in the input" in str(err)
        assert "forward" in err.remote_traceback
        after = group.state_dict()
        assert max_diff(after["model"], before["model"]) == 0
        assert after["optimizer"]["state"] == before["optimizer"]["state"] == {}
        loss, _ = group.step(x, y, COUNTS)  # still usable, and the failed step left no trace
        assert loss == pytest.approx(plain_step(reference, ref_opt, x, y), rel=1e-12)
        assert max_diff(group.state_dict()["model"], reference.state_dict()) < 1e-10


def test_batchnorm_running_statistics_are_pooled_exactly(dask_scheduler):
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Tanh(), nn.Linear(8, 3)).double()
    reference = copy.deepcopy(model)
    x, y = batch(3)
    x = x + torch.arange(8, dtype=torch.float64)[:, None]  # shares with different means
    with DaskReplicaGroup(model, nn.MSELoss(), sgd(model), dask_scheduler) as group:
        group.step(x, y, COUNTS)
        state = group.state_dict()["model"]
    with torch.no_grad():
        reference(x)  # the running statistics move in the forward pass
    assert torch.allclose(state["1.running_mean"], reference[1].running_mean, rtol=0, atol=1e-9)
    assert not torch.allclose(state["1.running_mean"], torch.zeros(8, dtype=torch.float64))
    assert state["1.num_batches_tracked"].item() == 1
    # the variance of the whole batch, not an average of the shares' variances
    assert torch.allclose(state["1.running_var"], reference[1].running_var, rtol=0, atol=1e-9)


def test_close_is_idempotent_and_leaves_workers_clean(dask_scheduler):
    client = dask_scheduler.client
    model = mlp()
    group = DaskReplicaGroup(model, nn.MSELoss(), sgd(model), dask_scheduler)
    assert set(client.run(_worker_state).values()) == {(1, 1)}
    group.close()
    group.close()
    assert_workers_clean(client)
    with pytest.raises(TrainingError, match="closed"):
        group.step(*batch(0), COUNTS)


def test_set_up_errors_are_located_and_leave_nothing_behind(dask_scheduler):
    client = dask_scheduler.client
    model = Unshippable()
    with pytest.raises(TaskError, match="cannot be built here") as info:
        DaskReplicaGroup(model, nn.MSELoss(), sgd(model), dask_scheduler)
    assert info.value.where["replica"] == 0
    assert_workers_clean(client)
    with pytest.raises(InputError, match="not a worker"):
        DaskReplicaGroup(mlp(), nn.MSELoss(), sgd(mlp()), dask_scheduler,
                         workers=["tcp://127.0.0.1:1"])
    with pytest.raises(InputError, match="not the model's"):
        DaskReplicaGroup(mlp(), nn.MSELoss(), sgd(mlp()), dask_scheduler)
    assert_workers_clean(client)


def test_a_rank_past_the_timeout_breaks_the_group_not_the_workers(dask_scheduler):
    client = dask_scheduler.client
    model = Laggard()
    x, y = batch(0)
    slow = x.clone()
    slow[6, 0] = 103.0  # rank 1 sleeps 3 s; rank 0 gives up waiting for it after 1 s
    with DaskReplicaGroup(model, nn.MSELoss(), sgd(model), dask_scheduler, timeout=1) as group:
        with pytest.raises(TaskError, match="RuntimeError") as info:
            group.step(slow, y, COUNTS)
        assert info.value.where["device"] in group.names
        with pytest.raises(TrainingError, match="broken"):
            group.step(x, y, COUNTS)
    assert_workers_clean(client)
    with DaskReplicaGroup(model, nn.MSELoss(), sgd(model), dask_scheduler) as group:
        group.step(x, y, COUNTS)  # the workers take a new group at once


def test_the_trainer_on_dask_equals_the_trainer_in_process(dask_scheduler):
    from labkit.data_parallel import DataParallelTrainer
    torch.manual_seed(2)
    make = lambda: nn.Sequential(nn.Linear(6, 12), nn.BatchNorm1d(12), nn.Tanh(),
                                 nn.Linear(12, 3)).double()
    model = make()
    local_model = copy.deepcopy(model)
    data = [batch(s, rows=10) for s in range(4)]
    local = DataParallelTrainer(local_model, nn.MSELoss(), sgd(local_model),
                                devices=["cpu:0", "cpu:1"], work_load=[2, 3])
    remote = DataParallelTrainer(model, nn.MSELoss(), sgd(model), work_load=[2, 3],
                                 scheduler=dask_scheduler)
    events = []
    remote.subscribe(events.append, state_every=0.25)  # device stats as often as that
    try:
        assert remote.names == sorted(scheduler_identity(dask_scheduler.client)["workers"])
        local_history = local.fit(data, epochs=2)
        remote_history = remote.fit(data, epochs=2)
        assert [s.stop - s.start for s in remote.last_split] == [4, 6]
        for a, b in zip(local_history, remote_history):
            assert a["loss"] == pytest.approx(b["loss"], rel=1e-10)
        state = remote.state_dict()
        assert max_diff(state["model"], local_model.state_dict()) < 1e-10
        scores = remote.evaluate(data)
        assert scores["loss"] == pytest.approx(local.evaluate(data)["loss"], rel=1e-10)
    finally:
        local.close()
        remote.close()
    assert max_diff(model.state_dict(), local_model.state_dict()) < 1e-10  # synced on close
    from labkit.events import DeviceStats, TaskFinished
    spans = [e for e in events if isinstance(e, TaskFinished)]
    assert len(spans) == 16 and {e.worker for e in spans} == set(remote.names)
    assert sum(e.n_samples for e in spans) == 80 and all(e.end > e.start for e in spans)
    stats = [e for e in events if isinstance(e, DeviceStats)]
    assert stats and {e.device for e in stats} <= set(remote.names)
    assert all(e.samples_per_s > 0 and e.share in (0.4, 0.6) for e in stats)


def test_a_local_group_listens_on_loopback_only_and_removes_its_store(dask_scheduler):
    import os
    import psutil
    client = dask_scheduler.client
    pids = list(client.run(os.getpid).values())
    model = mlp()
    with DaskReplicaGroup(model, nn.MSELoss(), sgd(model), dask_scheduler) as group:
        group.step(*batch(1), COUNTS)
        assert group.interfaces == ["lo 127.0.0.1 (GLOO_SOCKET_IFNAME=lo, chosen by labkit)"] * 2
        store = group._store_dirs[0]
        assert store is not None and os.path.isdir(store)
        listening = {c.laddr.ip for pid in pids
                     for c in psutil.Process(pid).net_connections("inet")
                     if c.status == psutil.CONN_LISTEN}
        assert listening == {"127.0.0.1"}, listening
    assert not os.path.exists(store)
    assert "GLOO_SOCKET_IFNAME" not in set().union(*client.run(lambda: set(os.environ)).values())


def test_the_tcp_rendezvous_works_too(dask_scheduler):
    model = mlp()
    reference = copy.deepcopy(model)
    ref_opt = sgd(reference)
    x, y = batch(4)
    with DaskReplicaGroup(model, nn.MSELoss(), sgd(model), dask_scheduler,
                          rendezvous="tcp") as group:
        assert group._store_dirs == []
        loss, _ = group.step(x, y, COUNTS)
        assert loss == pytest.approx(plain_step(reference, ref_opt, x, y), rel=1e-12)
        assert max_diff(group.state_dict()["model"], reference.state_dict()) < 1e-10
    with pytest.raises(InputError, match="rendezvous"):
        DaskReplicaGroup(model, nn.MSELoss(), sgd(model), dask_scheduler, rendezvous="udp")


def test_scheduler_cancel_reaches_the_replicas_on_the_workers(dask_scheduler):
    """The group's pinned tasks are a batch of the scheduler: its cancel stops a step."""
    from tests.data_parallel.models import Slow
    model = Slow(mlp(), per_row=0.5)         # a step of 8 rows takes 2 s on each rank
    group = DaskReplicaGroup(model, nn.MSELoss(), sgd(model), dask_scheduler)
    x, y = batch(0)
    errors = []

    def step():
        try:
            group.step(x, y, [4, 4])
        except Exception as exc:  # the test looks at it
            errors.append(exc)

    thread = threading.Thread(target=step)
    try:
        thread.start()
        time.sleep(0.5)
        started = time.monotonic()
        assert dask_scheduler.cancel() >= 2
        thread.join(30)
        assert time.monotonic() - started < 1.8, "the step ran on to its end"
        assert len(errors) == 1 and isinstance(errors[0], CancelledError)
        with pytest.raises(TrainingError, match="broken"):
            group.step(x, y, [4, 4])             # a cut collective: the group must go
    finally:
        group.close()



def test_two_trainers_fit_at_once_on_one_cluster_each_as_alone(dask_scheduler):
    """Each trainer has a process group of its own on every worker; either may end first."""
    from labkit.data_parallel import DataParallelTrainer
    client = dask_scheduler.client
    batches = [batch(seed) for seed in range(6)]

    def make(seed):
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).double()
        return model, sgd(model)

    def alone(seed):
        model, opt = make(seed)
        with DataParallelTrainer(model, nn.MSELoss(), opt, scheduler=dask_scheduler) as t:
            t.fit(batches, epochs=2)
        return copy.deepcopy(model.state_dict())

    expected = [alone(10), alone(11)]
    made = [make(10), make(11)]
    trainers = [DataParallelTrainer(m, nn.MSELoss(), o, scheduler=dask_scheduler)
                for m, o in made]
    assert set(client.run(_worker_state).values()) == {(2, 2)}
    errors = []

    def fit(t):
        try:
            t.fit(batches, epochs=2)
        except BaseException as exc:  # reported below
            errors.append(exc)
    threads = [threading.Thread(target=fit, args=(t,)) for t in trainers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    trainers[1].close()   # the second ends first: the first's group is not touched
    assert set(client.run(_worker_state).values()) == {(1, 1)}
    trainers[1].close()
    trainers[0].close()
    assert_workers_clean(client)
    for (model, _), state in zip(made, expected):
        assert max_diff(model.state_dict(), state) < 1e-12
