"""What a user can trust of a trainer on Dask worker processes (issue 38).

Data a call is given is the data it uses (a worker keys what it keeps by the
Dask keys, never by block numbers alone); one call of a trainer at a time;
a lost worker ends in a labkit error or a recovery, never a hang; nothing of
a group is left on the scheduler; batches count from 1 wherever named.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import labkit as lk
from labkit.data_parallel import DataParallelTrainer

da = pytest.importorskip("dask.array")

MSE = nn.functional.mse_loss


@pytest.fixture(scope="module")
def processes():
    """Two worker processes of their own (module-wide: starting them takes seconds)."""
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        s.client.wait_for_workers(2, timeout=180)
        yield s


def linear(seed=0):
    torch.manual_seed(seed)
    return nn.Linear(4, 1)


def arrays(seed, scale=1.0, rows=256, chunks=64):
    """``(X, y)`` as numpy and as Dask arrays chunked by ``chunks`` rows."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 4)).astype(np.float32)
    y = (scale * rng.standard_normal((rows, 1))).astype(np.float32)
    return x, y, da.from_array(x, chunks=(chunks, 4)), da.from_array(y, chunks=(chunks, 1))


def loss_of(model, x, y) -> float:
    """The mean squared error of ``model`` on every row, here."""
    with torch.no_grad():
        return float(MSE(model(torch.from_numpy(x)), torch.from_numpy(y)))


def frozen(scheduler):
    """A trainer that does not learn (lr 0): every loss is the model's on the data given."""
    model = linear()
    return DataParallelTrainer(model, MSE, torch.optim.SGD(model.parameters(), lr=0.0),
                               scheduler=scheduler), linear()


# ------------------------------------------------------------ data a call is given, used

def test_a_second_fit_on_other_arrays_chunked_alike_trains_on_them(processes):
    x1, y1, X1, Y1 = arrays(1)
    x2, y2, X2, Y2 = arrays(2, scale=100.0)
    t, model = frozen(processes)
    with t:
        first = t.fit((X1, Y1), batch_size=64)
        second = t.fit((X2, Y2), batch_size=64)
        third = t.fit((X1, Y1), batch_size=64, shuffle=False)
    assert first[0]["loss"] == pytest.approx(loss_of(model, x1, y1), rel=1e-5)
    assert second[0]["loss"] == pytest.approx(loss_of(model, x2, y2), rel=1e-5)
    assert second[0]["loss"] > 1000 * first[0]["loss"]
    assert third[0]["loss"] == pytest.approx(first[0]["loss"], rel=1e-5)


def test_validation_chunked_like_the_training_data_is_evaluated_on_its_own_rows(processes):
    x, y, X, Y = arrays(3)
    xv, yv, Xv, Yv = arrays(4, scale=100.0)
    t, model = frozen(processes)
    with t:
        history = t.fit((X, Y), batch_size=64, epochs=2, validation=(Xv, Yv))
    for record in history:
        assert record["loss"] == pytest.approx(loss_of(model, x, y), rel=1e-5)
        assert record["val_loss"] == pytest.approx(loss_of(model, xv, yv), rel=1e-5)


def test_evaluate_after_a_fit_reads_the_arrays_it_is_given(processes):
    x, y, X, Y = arrays(5)
    xv, yv, Xv, Yv = arrays(6, scale=100.0)
    x3, y3, X3, Y3 = arrays(7, scale=10.0, rows=200, chunks=(64, 64, 64, 8))
    t, model = frozen(processes)
    with t:
        t.fit((X, Y), batch_size=64)
        assert t.evaluate((Xv, Yv), batch_size=64)["loss"] == pytest.approx(
            loss_of(model, xv, yv), rel=1e-5)
        assert t.evaluate((X, Y), batch_size=64)["loss"] == pytest.approx(
            loss_of(model, x, y), rel=1e-5)
        assert t.evaluate((X3, Y3), batch_size=64)["loss"] == pytest.approx(
            loss_of(model, x3, y3), rel=1e-5)
        assert t.fit((X3, Y3), batch_size=64)[0]["loss"] == pytest.approx(
            loss_of(model, x3, y3), rel=1e-5)


# ------------------------------------------------------------ blocks of unknown length

def _masked(array):
    """``array[mask]``: the same rows, of unknown block lengths."""
    return array[da.ones(array.shape[0], chunks=array.chunks[0], dtype=bool)]


@pytest.mark.parametrize("which", ["X", "y"])
@pytest.mark.parametrize("call", ["fit", "evaluate", "validation"])
def test_arrays_of_unknown_block_lengths_are_refused_naming_them(which, call):
    _, _, X, Y = arrays(8)
    bad = (_masked(X), Y) if which == "X" else (X, _masked(Y))
    model = linear()
    with DataParallelTrainer(model, MSE, torch.optim.SGD(model.parameters(), lr=0.1),
                             devices=["cpu:0", "cpu:1"]) as t:
        with pytest.raises(lk.InputError) as info:
            if call == "fit":
                t.fit(bad, batch_size=64)
            elif call == "evaluate":
                t.evaluate(bad, batch_size=64)
            else:
                t.fit((X, Y), batch_size=64, validation=bad)
        assert t.steps == 0   # refused before anything trained
    err = info.value
    assert "unknown length" in str(err) and f"{which}.compute_chunk_sizes()" in str(err)
    assert err.where["argument"] == (which if call != "validation" else f"validation {which}")
    assert "nan" not in str(err)


# ------------------------------------------------------------ one numbering of batches

class _FailsOnCall(nn.Module):
    """A linear model whose ``fail_at``-th training forward (on any replica) raises."""

    def __init__(self, fail_at):
        super().__init__()
        torch.manual_seed(0)
        self.inner, self.fail_at, self.calls = nn.Linear(4, 1), fail_at, 0

    def forward(self, x):
        if self.training:
            self.calls += 1
            if self.calls == self.fail_at:
                raise ValueError(f"forward call {self.calls}")
        return self.inner(x)


@pytest.mark.parametrize("fail_at, epoch, batch", [(1, 1, 1), (5, 2, 2)])
@pytest.mark.parametrize("kind", ["threads", "dask-client-fed", "dask-on-workers"])
def test_an_error_names_epoch_and_batch_as_records_and_board_count_them(
        processes, kind, fail_at, epoch, batch):
    x, y, X, Y = arrays(9, rows=96, chunks=16)   # 3 batches of 32 an epoch
    model = _FailsOnCall(fail_at)
    where = {"devices": ["cpu:0", "cpu:1"]} if kind == "threads" else {"scheduler": processes}
    data = ((X, Y), {"batch_size": 32, "shuffle": False}) if kind == "dask-on-workers" else (
        [(torch.from_numpy(x[i:i + 32]), torch.from_numpy(y[i:i + 32])) for i in (0, 32, 64)],
        {})
    events = []
    with DataParallelTrainer(model, MSE, torch.optim.SGD(model.parameters(), lr=0.01),
                             **where) as t:
        t.subscribe(events.append)
        with pytest.raises(lk.LabkitError) as info:
            t.fit(data[0], epochs=3, **data[1])
    err = info.value
    assert (err.where["epoch"], err.where["batch"]) == (epoch, batch)
    assert f"epoch {epoch}, batch {batch}" in str(err)
    assert "ValueError" in str(err) and f"forward call {fail_at}" in str(err)
    # the board: epochs from 1 (a phase from 0), batches done in the failing epoch
    phases = [e.phase for e in events if type(e).__name__ == "PhaseStarted"]
    finished = {e.info.chunk for e in events
                if type(e).__name__ == "TaskFinished" and e.info.phase == phases[-1]}
    assert phases[-1] + 1 == epoch and len(finished) + 1 == batch
    records = [e.state["record"] for e in events
               if type(e).__name__ == "PhaseFinished" and e.ok and "record" in (e.state or {})]
    assert [r["epoch"] for r in records] == list(range(1, epoch))


# ------------------------------------------------------------ one call of a trainer at a time

class _Slow(nn.Module):
    """A linear model that takes 20 ms a forward: a fit lasts while the test calls."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.inner = nn.Linear(4, 1)

    def forward(self, x):
        import time
        time.sleep(0.02)
        return self.inner(x)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["threads", "dask-client-fed", "dask-on-workers"])
def test_a_second_call_while_a_fit_runs_is_refused_at_once_naming_the_run(processes, kind):
    import threading
    import time

    x, y, X, Y = arrays(10, rows=640, chunks=160)
    batches = [(torch.from_numpy(x[i:i + 32]), torch.from_numpy(y[i:i + 32]))
               for i in range(0, 640, 32)]
    data, options = ((X, Y), {"batch_size": 32}) if kind == "dask-on-workers" else (batches, {})
    where = {"devices": ["cpu:0", "cpu:1"]} if kind == "threads" else {"scheduler": processes}
    model = _Slow()
    with DataParallelTrainer(model, MSE, torch.optim.SGD(model.parameters(), lr=0.01),
                             **where) as t:
        stepped = threading.Event()
        t.subscribe(lambda e: stepped.set() if type(e).__name__ == "TaskFinished" else None)
        run = t.fit(data, epochs=3, wait=False, **options)
        assert stepped.wait(60)
        calls = {
            "fit": lambda: t.fit(data, **options),
            "fit-wait-false": lambda: t.fit(data, wait=False, **options),
            "evaluate": lambda: t.evaluate(data, **options),
            "step": lambda: t.step(*batches[0]),
            "load_state_dict": lambda: t.load_state_dict(t.state_dict()),
        }
        for name, call in calls.items():
            started = time.monotonic()
            with pytest.raises(lk.TrainingError) as info:
                call()
            assert time.monotonic() - started < 2.0, name
            assert run.id in str(info.value) and "busy" in str(info.value), name
            assert not run.done(), name   # the test is meaningful: the fit still ran
        history = run.result(120)
        assert [h["steps"] for h in history] == [20, 20, 20]
        assert t.steps == 60
        assert len(t.fit(data, **options)) == 1   # free again once the run ended
        assert t.evaluate(data, **options)["loss"] >= 0


# ------------------------------------------------------------ nothing left, labkit errors only

def _tasks(client) -> dict:
    """Every task the scheduler knows now, with its state."""
    return client.run_on_scheduler(
        lambda dask_scheduler: {str(k): ts.state for k, ts in dask_scheduler.tasks.items()})


def _left(client, before: dict, seconds: float = 30.0) -> dict:
    """The tasks beyond ``before`` still on the scheduler once they had ``seconds`` to go."""
    import time

    deadline = time.monotonic() + seconds
    while True:
        left = {k: v for k, v in _tasks(client).items() if k not in before}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


class _FailsAt(nn.Module):
    """Fails its third training forward (a user's error mid-fit)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.inner, self.calls = nn.Linear(4, 1), 0

    def forward(self, x):
        self.calls += self.training
        if self.training and self.calls == 3:
            raise ValueError("bad batch")
        return self.inner(x)


@pytest.mark.parametrize("kind", ["dask-client-fed", "dask-on-workers"])
def test_a_failed_fit_and_close_leave_no_task_on_the_scheduler(processes, kind):
    client = processes.client
    x, y, X, Y = arrays(11, rows=256, chunks=64)
    batches = [(torch.from_numpy(x[i:i + 32]), torch.from_numpy(y[i:i + 32]))
               for i in range(0, 256, 32)]
    data, options = ((X, Y), {"batch_size": 32}) if kind == "dask-on-workers" else (batches, {})
    before = _tasks(client)
    model = _FailsAt()
    t = DataParallelTrainer(model, MSE, torch.optim.SGD(model.parameters(), lr=0.01),
                            scheduler=processes)
    try:
        with pytest.raises(lk.TaskError, match="bad batch") as info:
            t.fit(data, epochs=2, **options)
        assert info.value.where["batch"] == 3
        # the error (and its traceback) is still held, as a notebook holds the last one
        assert _left(client, before) == {}
        t.evaluate(data, **options)
        assert _left(client, before) == {}
    finally:
        t.close()
    assert _left(client, before) == {}
    assert info.value is not None


@pytest.fixture
def killable():
    """Two worker processes of a cluster of their own: a test kills one."""
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        s.client.wait_for_workers(2, timeout=180)
        yield s


@pytest.mark.timeout(240)
@pytest.mark.parametrize("rows", [32, 40000], ids=["in-the-task", "scattered"])
def test_a_worker_killed_during_a_client_fed_fit_is_a_worker_lost_error(killable, rows):
    import os
    import signal
    import threading

    client = killable.client
    before = _tasks(client)
    model = _Slow()
    t = DataParallelTrainer(model, MSE, torch.optim.SGD(model.parameters(), lr=0.01),
                            scheduler=killable)
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(rows, 4, generator=g), torch.randn(rows, 1, generator=g))
               for _ in range(40)]
    pids, victim = client.run(os.getpid), t.names[1]
    stepped, seen = threading.Event(), []

    def on_event(event):
        if type(event).__name__ == "TaskFinished":
            seen.append(event)
            if len(seen) >= 10:
                stepped.set()
    t.subscribe(on_event)

    def kill():
        if stepped.wait(120):
            os.kill(pids[victim], signal.SIGKILL)
    killer = threading.Thread(target=kill, daemon=True)
    killer.start()
    run = t.fit(batches, epochs=5, wait=False)
    try:
        with pytest.raises(lk.LabkitError) as info:
            run.result(180)      # a hang fails here, not the whole suite
    finally:
        killer.join(10)
        t.close()
    err = info.value
    assert isinstance(err, lk.WorkerLostError), repr(err)
    assert err.where["worker"] == victim and err.where["replica"] == 1
    assert err.where["epoch"] >= 1 and err.where["batch"] >= 1
    assert _left(client, before) == {}


# ------------------------------------------------------------ a kill during a full-batch fit

class _Ids(nn.Module):
    """``out = x[:, 0] * p``: SGD at lr 1 on a sum loss takes the ids seen off ``p``.

    Kills its own worker process once the file ``flag`` names that process: in
    ``forward`` (before the step's collective: every peer finds it broken), or
    in ``state_dict`` (at the commit after the epoch's one step: the peers have
    finished that step and committed after it).
    """

    def __init__(self, flag, where):
        super().__init__()
        self.p = nn.Parameter(torch.zeros(1, dtype=torch.float64))
        self.flag, self.where = flag, where

    def _maybe_die(self, where):
        import os
        import signal

        if where == self.where and os.path.exists(self.flag):
            with open(self.flag) as f:
                if f.read() == str(os.getpid()):
                    os.kill(os.getpid(), signal.SIGKILL)

    def forward(self, x):
        if self.training:
            self._maybe_die("forward")
        return x[:, 0] * self.p

    def state_dict(self, *args, **kwargs):
        self._maybe_die("commit")
        return super().state_dict(*args, **kwargs)


class _SumLoss(nn.Module):
    reduction = "sum"

    def forward(self, out, y):
        return out.sum()


@pytest.mark.timeout(240)
@pytest.mark.parametrize("where", ["forward", "commit"])
def test_a_worker_killed_during_a_full_batch_fit_is_recovered(killable, where):
    import os
    import tempfile
    import threading

    # a folder of its own: pytest's numbered tmp_path folders are pruned by other sessions
    with tempfile.TemporaryDirectory(prefix="labkit-test-") as folder:
        _full_batch_fit_with_a_kill(killable, where, os.path.join(folder, "victim"))


def _full_batch_fit_with_a_kill(killable, where, flag):
    import os
    import threading

    client = killable.client
    rows, epochs = 400, 8
    x = np.stack([np.arange(rows, dtype=np.float64), np.ones(rows)], 1)
    X, Y = da.from_array(x, chunks=(100, 2)), da.from_array(np.zeros(rows), chunks=100)
    model = _Ids(flag, where)
    t = DataParallelTrainer(model, _SumLoss(), torch.optim.SGD(model.parameters(), lr=1.0),
                            scheduler=killable)
    victim = t.names[1]
    pid = client.run(os.getpid)[victim]
    steps, lock = [], threading.Lock()

    def on_event(event):
        if type(event).__name__ == "TaskFinished":
            with lock:
                steps.append(event.info.phase)
                if len(set(steps)) == 3 and not os.path.exists(flag):   # in the third epoch
                    with open(flag, "w") as f:   # read whole or not at all: one short write
                        f.write(str(pid))
    t.subscribe(on_event)
    run = t.fit((X, Y), batch_size=rows, epochs=epochs, shuffle=False, wait=False)
    try:
        history = run.result(180)    # a hang fails here
        assert [h["steps"] for h in history] == [1] * epochs
        recoveries = [r for h in history for r in h.get("recoveries", [])]
        assert len(recoveries) == 1 and recoveries[0]["worker"] == victim, (history, t.names)
        assert recoveries[0]["redone"] <= 1
        # the victim's restarted worker may be taken in at a later epoch (a fit grows)
        joined = [w for h in history for j in h.get("joined", []) for w in j["workers"]]
        assert victim not in t.names and len(t.names) == 1 + len(joined)
        # every row once an epoch: the step the dead worker shared is neither lost nor doubled
        assert t.sync_model().p.item() == -epochs * sum(range(rows))
        assert t.fit((X, Y), batch_size=rows)[0]["steps"] == 1   # and it goes on
    finally:
        t.close()
    assert not [n for n in client.run(os.getpid) if n == victim]


def test_the_ranks_left_go_back_to_the_latest_commit_of_the_epoch_they_all_hold():
    from labkit.data_parallel.dask.epochs import common_commit

    def at(epoch, step):
        return {"run": "r", "epoch": epoch, "step": step, "steps": 10 * epoch + step}
    # one rank finished epoch 11's last step and committed after it, one did not
    held = [[at(12, 0), at(11, 0)], [at(11, 0), at(10, 0)]]
    assert common_commit(held, "r", 11) == at(11, 0)
    # every rank left finished the epoch: back to the commit before its end
    assert common_commit([[at(12, 0), at(11, 50)], [at(12, 0), at(11, 50)]], "r", 11) == at(
        11, 50)
    assert common_commit([[at(11, 100), at(11, 50)], [at(11, 50), at(11, 0)]], "r", 11) == at(
        11, 50)
    assert common_commit([[at(12, 0)], [at(11, 0)]], "r", 11) is None
    assert common_commit([[at(11, 0)]], "other run", 11) is None


def test_one_dataset_made_on_the_workers_as_data_and_validation_keeps_each_calls_options():
    class Rows(torch.utils.data.Dataset):
        def __len__(self):
            return 40

        def __getitem__(self, i):
            return torch.tensor([float(i), 1.0, 0.0, 0.0]), torch.tensor([0.0])

    source = lk.on_workers(Rows)
    model = linear()
    with DataParallelTrainer(model, MSE, torch.optim.SGD(model.parameters(), lr=0.0),
                             devices=["cpu:0", "cpu:1"]) as t:
        history = t.fit(source, batch_size=8, epochs=2, validation=source)
        assert [h["steps"] for h in history] == [5, 5]     # batches of 8, not the validation's
        again = t.fit(source, batch_size=20)
        assert again[0]["steps"] == 2
        assert history[0]["val_loss"] == pytest.approx(history[0]["loss"], rel=1e-6)
        assert source.batch_size is None and source.shuffle   # the user's object, as given
        with pytest.raises(lk.InputError, match="batch_size"):
            t.fit(source)        # no batch size left over from an earlier call
