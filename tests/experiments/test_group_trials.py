"""Trials that hold groups of worker processes (``workers_per_trial=k``), on real Dask workers.

Each trial trains a tiny MLP with a ``DataParallelTrainer`` on ``trial.scheduler``
(one rank per worker of its group) for a few client-fed steps.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch
from torch import nn

import labkit as lk

STEPS = 4
SPANS: dict = {}  # trial id -> what it saw (the trial functions run on client threads)
_LOCK = threading.Lock()


@pytest.fixture(autouse=True)
def fresh_spans():
    SPANS.clear()
    yield
    SPANS.clear()


def model_and_opt(lr: float, seed: int = 0):
    """The MLP from a generator of its own: trial functions run on threads of the client,
    which share torch's global generator (``torch.manual_seed`` in one reaches the others)."""
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1)).double()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.3)
    return model, torch.optim.SGD(model.parameters(), lr=lr)


def batch(step: int):
    g = torch.Generator().manual_seed(100 + step)
    x = torch.randn(16, 5, generator=g, dtype=torch.float64)
    return x, x.sum(dim=1, keepdim=True) * 0.5


def train(scheduler, lr: float, report=None) -> list[float]:
    """STEPS steps of the MLP on ``scheduler``; the losses (``report(step, loss)`` after each)."""
    model, opt = model_and_opt(lr)
    trainer = lk.DataParallelTrainer(model, nn.functional.mse_loss, opt, scheduler=scheduler)
    losses = []
    try:
        for step in range(STEPS):
            losses.append(trainer.step(*batch(step)))
            if report is not None:
                report(step + 1, losses[-1])
    finally:
        trainer.close()
    return losses


def where():
    from distributed import get_worker

    return get_worker().address


def held_trial(config, trial):
    """Trains on its group; records its workers, the ranks, where its tasks ran, its span."""
    start = time.monotonic()
    model, opt = model_and_opt(config["lr"])
    trainer = lk.DataParallelTrainer(model, nn.functional.mse_loss, opt, scheduler=trial.scheduler)
    try:
        ranks = list(trainer.names)
        trial.scheduler.add_tasks(range(3), lk.FunctionCallable(lambda _: where()))
        tasks = set(trial.scheduler.get_results())
        big = np.ones(2**18)  # 2 MiB: copied straight to a worker, not through the graph
        trial.scheduler.add_task(big, lk.FunctionCallable(lambda a: (where(), float(a.sum()))))
        (big_where, total), = trial.scheduler.get_results()
        for step in range(STEPS):
            trial.report(step + 1, loss=trainer.step(*batch(step)))
    finally:
        trainer.close()
    with _LOCK:
        SPANS[trial.id] = dict(
            workers=trial.workers, ranks=ranks, tasks=tasks | {big_where}, total=total,
            span=(start, time.monotonic()),
        )


def test_each_running_trial_holds_its_own_workers(four):
    result = lk.sweep(held_trial, [{"lr": 0.01 * (i + 1)} for i in range(5)], scheduler=four,
                      workers_per_trial=2, metric="loss", mode="min", store=None)
    cluster = set(four.client.nthreads())
    assert [t.status.value for t in result.trials] == ["completed"] * 5
    for record in result.trials:
        seen = SPANS[record.id]
        group = seen["workers"]
        assert len(group) == 2 and len(set(group)) == 2 and set(group) <= cluster
        assert seen["ranks"] == sorted(group)  # one rank per worker of the group, no other
        assert seen["tasks"] <= set(group)  # what trial.scheduler ran stayed on the group
        assert seen["total"] == 2**18
        assert record.worker == ", ".join(group)  # the store names the group
    for a in SPANS.values():  # two trials that share a worker never ran at once
        for b in SPANS.values():
            if a is not b and set(a["workers"]) & set(b["workers"]):
                assert a["span"][1] <= b["span"][0] or b["span"][1] <= a["span"][0]


def test_more_workers_per_trial_than_the_cluster_has_is_an_input_error(four):
    with pytest.raises(lk.InputError, match=r"workers_per_trial=5.*4 worker") as err:
        lk.sweep(held_trial, [{"lr": 0.1}], scheduler=four, workers_per_trial=5,
                 metric="loss", mode="min", store=None)
    assert "workers_per_trial" in str(err.value)
    assert SPANS == {}  # nothing ran


def unclosed_trial(config, trial):
    """Trains on its group and never closes its trainer: its end must free the workers."""
    model, opt = model_and_opt(config["lr"])
    trainer = lk.DataParallelTrainer(model, nn.functional.mse_loss, opt, scheduler=trial.scheduler)
    with _LOCK:
        SPANS[trial.id] = dict(workers=trial.workers, start=time.monotonic())

    def taken_back():  # a stop takes the group back at once: the trial's use of it ends here
        with _LOCK:
            SPANS[trial.id].setdefault("freed", time.monotonic())

    trial.scheduler.on_shutdown(taken_back)
    try:
        for step in range(6):
            trial.report(step + 1, loss=trainer.step(*batch(step)) + config["penalty"])
    finally:
        with _LOCK:
            SPANS[trial.id]["end"] = time.monotonic()


def ranks_held():
    from labkit.data_parallel.worker.rank import RANKS

    return len(RANKS)


def test_asha_stops_group_trials_and_frees_their_workers(four):
    configs = [{"lr": 0.05, "penalty": p} for p in (0.0, 5.0, 10.0, 20.0, 0.5, 30.0)]
    result = lk.sweep(unclosed_trial, configs, scheduler=four, workers_per_trial=2,
                      metric="loss", mode="min", store=None,
                      early_stop=lk.ASHA(min_steps=1, reduction=2, max_steps=6))
    statuses = {t.id: t.status.value for t in result.trials}
    stopped = [i for i, s in statuses.items() if s == "stopped"]
    assert stopped and set(statuses.values()) <= {"completed", "stopped"}
    for i in stopped:  # ended at a report before its last step
        assert len(result.trials[i].history) < 6
    # every trainer was closed with its trial (none did it itself): no rank left on a worker
    assert set(four.run_on_workers(ranks_held).values()) == {0}
    # and later trials ran on the workers of trials that ended before them: a stopped trial's
    # group is taken back when the stop is decided, while its function may still unwind (under
    # load its thread ran its `finally` after the next trial had begun: the test failed once)
    for a in SPANS.values():
        for b in SPANS.values():
            if a is not b and set(a["workers"]) & set(b["workers"]) and a["start"] < b["start"]:
                assert min(a["end"], a.get("freed", a["end"])) <= b["start"]


def stop_by_hand_trial(config, trial):
    model, opt = model_and_opt(0.05)
    trainer = lk.DataParallelTrainer(model, nn.functional.mse_loss, opt, scheduler=trial.scheduler)
    step = 0
    while True:  # until stopped by hand
        step += 1
        trial.report(step, loss=trainer.step(*batch(step % 3)))
        if step == 2:
            with _LOCK:
                SPANS[trial.id] = "reported"


def test_a_group_trial_stopped_by_hand_ends_at_its_next_report(four, recwarn):
    run = lk.sweep(stop_by_hand_trial, [{"lr": 0.1}], scheduler=four, workers_per_trial=2,
                   metric="loss", mode="min", store=None, wait=False)
    while 0 not in SPANS and not run.done():  # it reported twice
        time.sleep(0.05)
    assert run.sweep.stop(0)
    result = run.result(timeout=60)
    assert result.trials[0].status.value == "stopped"
    assert set(four.run_on_workers(ranks_held).values()) == {0}
    # a step that returned just before the stop: its copy back is cut short, quietly (issue 44)
    assert not [w for w in recwarn if "trained parameters" in str(w.message)]


def equal_trial(config, trial):
    train(trial.scheduler, config["lr"], lambda step, loss: trial.report(step, loss=loss))


def test_a_group_trial_trains_as_the_same_training_outside_a_sweep(four):
    result = lk.sweep(equal_trial, [{"lr": 0.05}, {"lr": 0.2}], scheduler=four,
                      workers_per_trial=2, metric="loss", mode="min", store=None)
    with lk.DaskScheduler(mode="processes", n_workers=2, threads_per_worker=1) as two:
        for record in result.trials:
            alone = train(two, record.config["lr"])
            assert [m["loss"] for _, m, _ in record.history] == alone


def in_process_trial(config, trial):
    trial.scheduler.add_tasks(range(4), lk.FunctionCallable(lambda x: x * 10))
    with _LOCK:
        SPANS[trial.id] = dict(
            workers=trial.workers, scheduler=trial.scheduler,
            results=sorted(trial.scheduler.get_results()),
        )
    trial.report(1, loss=config["lr"])


def test_on_an_in_process_cluster_trial_scheduler_is_the_sweeps():
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        lk.sweep(in_process_trial, [{"lr": 0.1}, {"lr": 0.2}], scheduler=s,
                 workers_per_trial=2, metric="loss", mode="min", store=None)
        assert len(SPANS) == 2
        for seen in SPANS.values():
            assert seen["scheduler"] is s
            assert seen["workers"] == tuple(s.client.nthreads())
            assert seen["results"] == [0, 10, 20, 30]


def test_restricted_scheduler_runs_on_its_workers_alone_and_leaves_the_client(four):
    workers = sorted(four.client.nthreads())[:2]
    group = four.restricted(workers)
    try:
        assert group.workers == tuple(workers)
        group.add_tasks(range(8), lk.FunctionCallable(lambda _: where()))
        assert set(group.get_results()) <= set(workers)
        assert set(group.run_on_workers(lambda dask_worker: dask_worker.address)) == set(workers)
    finally:
        group.shutdown()
    assert four.client.status == "running"  # not its client to close
    four.add_task(1, lk.FunctionCallable(lambda x: x + 1))
    assert four.get_results() == [2]
    with pytest.raises(lk.InputError, match="not a worker of this cluster"):
        four.restricted(["tcp://127.0.0.1:1"])


def test_trial_scheduler_in_a_slot_says_what_gives_one():
    from labkit.experiments.launch.sinks import MemorySink
    from labkit.experiments.trials.trial import Trial

    with pytest.raises(lk.InputError, match="workers_per_trial >= 2"):
        _ = Trial(0, {}, MemorySink()).scheduler


def test_a_group_trial_function_need_not_pickle(four):
    """It runs on a client thread: it may hold what cannot travel (a lock, an open file)."""
    lock = threading.Lock()
    seen = []

    def trial_fn(config, trial):
        with lock:  # a threading.Lock does not pickle
            seen.append(trial.workers)
        trial.report(1, loss=config["lr"])

    result = lk.sweep(trial_fn, [{"lr": 0.1}, {"lr": 0.2}], scheduler=four, workers_per_trial=2,
                      metric="loss", mode="min", store=None)
    assert [t.status.value for t in result.trials] == ["completed"] * 2
    assert len(seen) == 2
    with pytest.raises(lk.InputError, match="cannot be pickled"):  # a trial a worker: it must
        lk.sweep(trial_fn, [{"lr": 0.1}], scheduler=four, metric="loss", mode="min", store=None)


def evaluating_trial(config, trial):
    """Three one-epoch fits on its group; after each, its own model's accuracy on the client."""
    from tests.data_parallel.test_model_sync import accuracy, accuracy_of_state, blobs, classifier

    x, y = blobs()
    model = classifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    trainer = lk.DataParallelTrainer(model, nn.functional.cross_entropy, optimizer,
                                     scheduler=trial.scheduler)
    seen = []
    try:
        for epoch in range(3):
            trainer.fit((x, y), batch_size=64, epochs=1, seed=epoch)
            held = accuracy(model, x, y)  # the model the trial holds, as a user reads it
            seen.append((held, accuracy_of_state(trainer.state_dict(), x, y)))
            trial.report(epoch + 1, accuracy=held)
    finally:
        trainer.close()
    with _LOCK:
        SPANS[trial.id] = seen


def test_each_group_trial_evaluates_the_model_its_fits_trained(four):
    """Issue 44: six flat, equal lines: every trial's model kept its first parameters."""
    lrs = [0.02, 0.05, 0.1, 0.3]
    result = lk.sweep(evaluating_trial, [{"lr": lr} for lr in lrs], scheduler=four,
                      workers_per_trial=2, metric="accuracy", mode="max", store=None)
    assert [t.status.value for t in result.trials] == ["completed"] * len(lrs)
    curves = []
    for record in result.trials:
        curve = [m["accuracy"] for _, m, _ in record.history]
        assert [held for held, _ in SPANS[record.id]] == curve
        assert all(held == trained for held, trained in SPANS[record.id])  # the workers' own
        assert curve[-1] > curve[0], (record.config, curve)  # it learns
        curves.append(tuple(curve))
    assert len(set(curves)) == len(lrs)  # each trial its own model, its own accuracies
