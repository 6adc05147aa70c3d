"""Trials on worker processes run in slots: long tasks that take trial after trial over a socket.

Every test runs on real worker processes (``lk.DaskScheduler(mode="processes")``):
the same results as a task a trial, early stopping and stops by hand that
reach a running trial, a cancel that leaves no task running, trial errors
named, a worker SIGKILLed under a trial; workers that close (a shutdown, a
lifetime's end) under running slots, connections to the slots' listener that
never authenticate, an error whose ``__str__`` raises.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import signal
import socket
import sys
import textwrap
import threading

import dask
import pytest
from distributed import get_task_stream

import labkit as lk
from labkit.experiments import launch
from labkit.experiments.launch.slots import SlotLauncher
from tests.experiments import closing_functions as cf
from tests.experiments import functions as f
from tests.helpers import until

X = {"x": lk.uniform(0, 1)}


@pytest.fixture(scope="module")
def processes():
    """Two worker processes of their own, for the tests of this module."""
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        yield s


def plain(record):
    """What a record says, without the times and the worker."""
    return (record.id, record.config, record.status, record.metrics, record.attempts,
            [(s, m) for s, m, _ in record.history])


def _sweep_and_keys(scheduler, **options):
    """A sweep of ``f.quadratic`` on ``scheduler`` and the keys of the Dask tasks it ran."""
    with get_task_stream(client=scheduler.client) as stream:
        result = lk.sweep(f.quadratic, X, trials=12, metric="loss", mode="min",
                          scheduler=scheduler, seed=5, store=None, **options)
    return result, [str(task["key"]) for task in stream.data]


def _left_running(scheduler) -> dict:
    """Tasks the scheduler has processing, and tasks the workers still execute, by worker."""
    processing = {w: keys for w, keys in scheduler.client.processing().items() if keys}
    executing = scheduler.client.run(
        lambda dask_worker: [str(ts.key) for ts in dask_worker.state.executing])
    return {**processing, **{w: keys for w, keys in executing.items() if keys}}


def test_a_sweep_in_slots_equals_a_task_a_trial_with_two_tasks_in_all(processes, monkeypatch):
    slots, slot_keys = _sweep_and_keys(processes)
    monkeypatch.setattr(launch, "SLOTS", False)
    tasks, task_keys = _sweep_and_keys(processes)
    assert [plain(t) for t in slots.trials] == [plain(t) for t in tasks.trials]
    assert slots.counts() == {"completed": 12} and slots.best.id == tasks.best.id
    assert {t.worker for t in slots.trials} <= set(processes.client.nthreads())
    # the slots: one long task each, on the cluster's two threads; before, a task a trial
    assert 1 <= len(slot_keys) <= 2 and all(k.startswith("labkit-slot-") for k in slot_keys)
    # (the stream may miss the last tasks: they end as the sweep returns)
    assert sum(k.startswith("labkit-trial-") for k in task_keys) > 6
    assert _left_running(processes) == {}


def test_asha_stops_trials_at_their_next_report(processes):
    # a step of 0.2 s: time enough for a report to reach the client and a stop to come back
    space = {"q": lk.uniform(0.1, 1.0), "steps": 4, "pause": 0.2}
    result = lk.sweep(f.curve, space, trials=9, metric="acc", mode="max", seed=1,
                      scheduler=processes, store=None,
                      early_stop=lk.ASHA(min_steps=1, reduction=3))
    stopped = result.by_status("stopped")
    assert len(stopped) >= 3 and result.best.status == "completed", result.counts()
    for trial in stopped:
        decided = int(re.search(r"ASHA: at step (\d+)", trial.reason).group(1))
        # the decision on the client reached the worker before the trial's next report
        assert trial.history[-1][0] <= decided + 1, (trial.id, trial.reason, trial.history)


def test_a_trial_stopped_by_hand_and_trials_added_in_slots(processes, tmp_path):
    run = lk.sweep(f.slow_steps, {"steps": 300, "x": lk.uniform(0, 1)}, trials=2,
                   metric="loss", mode="min", scheduler=processes,
                   store=tmp_path / "s.db", name="live", wait=False)
    until(lambda: any(r["step"] is not None and r["step"] >= 3
                      for r in run.sweep.snapshot() if r["id"] == 0), what="trial 0's step 3")
    assert run.sweep.stop(0) is True
    assert run.sweep.stop(1) is True
    assert run.sweep.add(2) == [2, 3]
    run.sweep.stop(3)
    result = run.result(timeout=60)
    assert [t.status for t in result.trials] == ["stopped", "stopped", "completed", "stopped"]
    assert all(t.reason == "stopped by hand" for t in result.by_status("stopped"))
    assert len(result.trials[0].history) < 300 and len(result.trials[1].history) < 300
    assert lk.load_sweep(tmp_path / "s.db", "live").counts() == {"completed": 1, "stopped": 3}
    assert _left_running(processes) == {}


def test_a_cancel_ends_every_slot_task(processes, tmp_path):
    run = lk.sweep(f.slow_steps, X, trials=6, metric="loss", mode="min", scheduler=processes,
                   store=tmp_path / "s.db", name="c", wait=False)
    until(lambda: sum(r["status"] == "running" for r in run.sweep.snapshot()) == 2,
          what="two running trials")
    run.cancel()
    with pytest.raises(lk.CancelledError):
        run.result(timeout=30)
    assert [t["status"] for t in run.sweep.snapshot()][:2] == ["cancelled", "cancelled"]
    # the slots saw their lines close and returned: none is left on a worker's thread
    until(lambda: _left_running(processes) == {}, timeout=5, what="the slots to end")
    until(lambda: not [k for keys in processes.client.has_what().values() for k in keys
                       if "labkit" in str(k)], timeout=5, what="the slots' keys to go")
    assert processes.total_open_tasks == 0


def test_a_trial_error_names_the_trial_with_the_users_traceback(processes):
    result = lk.sweep(f.failing, X, trials=10, metric="loss", mode="min",
                      scheduler=processes, seed=4, store=None)
    failed = result.by_status("failed")
    assert failed and result.by_status("completed")
    for t in failed:
        assert t.error.startswith("ValueError: x=") and "raise ValueError" in t.traceback
        assert "labkit/experiments" not in t.traceback
    with pytest.raises(lk.TaskError) as info:
        lk.sweep(f.always_fails, X, trials=2, metric="loss", mode="min", scheduler=processes,
                 seed=0, store=None, name="broken")
    assert "no trial of sweep 'broken' completed: 2 failed; trial 0" in str(info.value)
    assert "RuntimeError: broken on purpose" in str(info.value)


def test_a_function_the_workers_cannot_load_fails_each_trial_naming_the_worker(processes,
                                                                             tmp_path):
    (tmp_path / "only_here.py").write_text(textwrap.dedent("""
        def fn(config, trial):
            return {"loss": config["x"]}
    """))
    sys.path.insert(0, str(tmp_path))
    try:
        import only_here
        with pytest.raises(lk.TaskError) as info:
            lk.sweep(only_here.fn, X, trials=3, metric="loss", mode="min",
                     scheduler=processes, seed=0, store=None)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("only_here", None)
    records = info.value.result.trials
    assert [t.status for t in records] == ["failed"] * 3
    assert all("the trial function cannot be loaded on tcp://" in t.error
               and "only_here" in t.error for t in records)
    assert all(t.worker.startswith("tcp://") and t.attempts == 1 for t in records)


@pytest.mark.parametrize("limit", [dict(max_concurrent=1), dict(workers_per_trial=2)])
def test_trials_at_once_in_slots_are_bounded_by_max_concurrent_and_workers_per_trial(
        processes, limit):
    space = {"q": lk.uniform(0, 1), "steps": 3, "pause": 0.02}
    result = lk.sweep(f.curve, space, trials=4, metric="acc", mode="max", scheduler=processes,
                      store=None, **limit)
    spans = sorted((t.started, t.ended) for t in result.trials)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))   # one at a time
    free = lk.sweep(f.curve, space, trials=4, metric="acc", mode="max", scheduler=processes,
                    store=None)
    spans = sorted((t.started, t.ended) for t in free.trials)
    assert any(a[1] > b[0] for a, b in itertools.pairwise(spans))    # two at a time


def test_a_cancelled_sweep_resumed_in_slots_goes_on_from_each_checkpoint(processes, tmp_path):
    folder, store = tmp_path / "marks", tmp_path / "s.db"
    folder.mkdir()
    space = {"x": lk.uniform(0.5, 1.5), "steps": 40, "pause": 0.05, "folder": str(folder)}
    run = lk.sweep(f.marked, space, trials=3, metric="score", mode="max", seed=2,
                   scheduler=processes, store=store, name="again", wait=False)
    until(lambda: sum((r["step"] or 0) >= 2 for r in run.sweep.snapshot()) == 2,
          what="two trials past step 2")
    run.cancel()
    with pytest.raises(lk.CancelledError):
        run.result(timeout=30)
    reached = {r["id"]: r["step"] for r in run.sweep.snapshot() if r["status"] == "cancelled"}
    assert len(reached) == 2
    resumed = lk.sweep(f.marked, space, trials=3, metric="score", mode="max", seed=2,
                       scheduler=processes, store=store, name="again", resume=True)
    assert resumed.counts() == {"completed": 3}
    starts: dict = {}
    for mark in sorted(os.listdir(folder), key=lambda n: int(n.split("-")[4])):
        _, trial, step, _, _ = mark.split("-")
        starts.setdefault(int(trial), []).append(int(step))
    for trial, step in reached.items():    # the second run began at a checkpoint of the first
        assert starts[trial][0] == 0 and 0 < starts[trial][1] <= step + 1
        assert [s for s, _, _ in resumed.trials[trial].history] == list(range(40))


@pytest.mark.soak
def test_a_worker_killed_under_a_trial_restarts_it_from_its_checkpoint_and_its_slot_returns(
        tmp_path):
    gate = str(tmp_path / "gate")  # trials but the first wait for it: the sweep outlasts the kill
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        run = lk.sweep(f.gated_pid_and_steps, {"steps": 10, "pause": 0.1, "gate": gate}, trials=4,
                       metric="score", mode="max", scheduler=s, store=None, wait=False)
        until(lambda: (lambda h: bool(h) and h[-1][0] >= 3)(
            run.sweep.snapshot(history=True)[0]["history"]), what="trial 0's step 3")
        row = run.sweep.snapshot(history=True)[0]
        killed, address, at = int(row["history"][-1][1]["pid"]), row["worker"], \
            row["history"][-1][0]
        os.kill(killed, signal.SIGKILL)
        run.sweep.add(8)       # 8 s of trials for one slot: the new worker's slot starts meanwhile
        # the nanny starts a new worker process; trials added then run on it too
        until(lambda: len(s.client.nthreads()) == 2 and address not in s.client.nthreads(),
              timeout=240, what="the worker to come back")
        open(gate, "w").close()
        result = run.result(timeout=240)
        assert _left_running(s) == {}
        now = set(s.client.run(os.getpid).values())
    first = result.trials[0]
    assert result.counts() == {"completed": 12}
    assert first.attempts == 2 and [s for s, _, _ in first.history] == list(range(10))
    after = [m for _, m, _ in first.history if m["pid"] != killed]
    assert after and all(m["started"] >= at - 1 for m in after)     # from its checkpoint
    ran_on = {m["pid"] for t in result.trials[4:] for _, m, _ in t.history}
    assert killed not in ran_on and ran_on == now, (killed, ran_on, now)   # the new one has a slot


# -- workers that close when asked; the slots' listener; errors without words (issue 44) ------


class _Records(logging.Handler):
    """Keeps the records of one logger while the block runs."""

    def __init__(self, name: str):
        super().__init__(logging.DEBUG)
        self.name_, self.records = name, []

    def emit(self, record):
        self.records.append(record)

    def __enter__(self):
        logging.getLogger(self.name_).addHandler(self)
        return self

    def __exit__(self, *exc):
        logging.getLogger(self.name_).removeHandler(self)

    def messages(self) -> list[str]:
        return [r.getMessage() for r in self.records]


def _running(run, n: int) -> bool:
    return sum(r["status"] == "running" and r["step"] is not None
               for r in run.sweep.snapshot()) >= n


def test_a_shutdown_under_running_slots_lets_every_worker_process_close_itself():
    # each trial sits in one long step of its own code (10 minutes) when the scheduler shuts
    # down: the workers must not wait for it, nor be killed by their nannies
    with _Records("distributed.nanny") as nanny:
        s = lk.DaskScheduler(mode="processes", n_workers=2)
        try:
            processes = [n.process.process for n in s.cluster.workers.values()]
            run = lk.sweep(cf.long_step, X, trials=4, metric="loss", mode="min", scheduler=s,
                           store=None, wait=False)
            until(lambda: _running(run, 2), timeout=120, what="two trials in their long step")
        finally:
            s.shutdown()
        with pytest.raises((lk.SchedulerError, lk.CancelledError)):
            run.result(timeout=60)
    assert not [m for m in nanny.messages() if "still alive" in m or "killing" in m], \
        nanny.messages()
    assert [p.exitcode for p in processes] == [0, 0]      # each ended by its own close


@pytest.mark.soak
def test_workers_that_reach_their_lifetime_close_under_slots_and_their_nannies_restart_them():
    from distributed import Client, LocalCluster
    # the nanny restarts a worker that closed at its lifetime's end.  Before, a worker closing
    # under a slot waited 30 s for the slot's thread (Dask's executor timeout), longer than
    # the cluster waits for a lost worker to return (15 s): the cluster forgot it, and the
    # sweep hung with no worker.  On a loaded machine the new process alone can take longer
    # than 15 s to start: give it time (this test then shows the close and the restart).  A
    # lifetime of 10 s leaves a loaded machine time to start the slots (the first report on each
    # worker must come before its close) and costs 5 s less than 15.  The nannies are
    # labkit's LifetimeNanny, as in its embedded clusters: under load Dask's own nanny
    # follows a worker that a heartbeat crossing its retirement closed ("Scheduler was
    # unaware of this worker"), and a CI run's sweep then waited 300 s for workers that
    # Dask itself never brought back (lifetime_nanny.py; not what this test is about)
    from labkit.scheduling.dask.lifetime_nanny import LifetimeNanny
    with dask.config.set({"distributed.deploy.lost-worker-timeout": "300s"}), \
            _Records("distributed.nanny") as nanny, \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                         dashboard_address="127.0.0.1:0", lifetime="10s", lifetime_stagger="0s",
                         lifetime_restart=True, worker_class=LifetimeNanny) as cluster, \
            Client(cluster) as client, lk.DaskScheduler(client=client) as s:
        # each trial steps until its worker closes under it, then goes on from its checkpoint
        result = lk.sweep(cf.until_moved, {"x": lk.uniform(0, 1)}, trials=2, metric="loss",
                          mode="min", scheduler=s, store=None, wait=False).result(timeout=300)
        assert result.counts() == {"completed": 2}        # a move is not a failure
        for t in result.trials:
            steps = [step for step, _, _ in t.history]
            assert t.attempts >= 2 and steps == list(range(len(steps))), (t.attempts, steps)
            assert len({m["pid"] for _, m, _ in t.history}) >= 2   # on another worker process
        until(lambda: len(client.nthreads()) == 2, timeout=300, what="the workers to return")
        said = nanny.messages()    # (the cluster's own close, next, is not under test)
    assert any("Restarting worker" in m for m in said), said
    assert not [m for m in said if "still alive" in m], said


def test_connections_that_never_authenticate_hold_up_no_slot_and_leave_no_thread(
        processes, monkeypatch):
    attackers: list = []
    fill = SlotLauncher.fill

    def attacked_fill(self):
        """Before the first slot starts: one connection that says nothing, one garbage."""
        if not getattr(self, "attacked", False):
            self.attacked = True
            attackers.append(socket.create_connection(self.listener.address))
            garbage = socket.create_connection(self.listener.address)
            garbage.sendall(b"\x00\x00\x00\x20" + b"not the handshake")  # and then nothing
            attackers.append(garbage)
        fill(self)

    monkeypatch.setattr(SlotLauncher, "fill", attacked_fill)
    try:
        run = lk.sweep(f.quadratic, X, trials=6, metric="loss", mode="min", scheduler=processes,
                       store=None, wait=False)
        assert run.result(timeout=120).counts() == {"completed": 6}
        run = lk.sweep(f.slow_steps, X, trials=4, metric="loss", mode="min",
                       scheduler=processes, store=None, wait=False)
        until(lambda: _running(run, 2), timeout=120, what="two running trials")
        run.cancel()
        with pytest.raises(lk.CancelledError):
            run.result(timeout=60)
        # the listener's threads (accepting, handshakes, lines) end with the sweep
        until(lambda: not [t for t in threading.enumerate()
                           if t.name.startswith("labkit-sweep-")],
              timeout=30, what="the listeners' threads to end")
    finally:
        for sock in attackers:
            sock.close()
    assert len(attackers) == 4
    assert _left_running(processes) == {}


@pytest.mark.parametrize("slots", [True, False], ids=["slots", "a-task-a-trial"])
def test_an_error_whose_str_raises_fails_its_trial_once_naming_its_type(processes, monkeypatch,
                                                                        slots):
    monkeypatch.setattr(launch, "SLOTS", slots)
    with pytest.raises(lk.TaskError) as info:
        lk.sweep(cf.unprintable, X, trials=3, metric="loss", mode="min", scheduler=processes,
                 store=None, seed=0)
    for t in info.value.result.trials:
        assert t.status == "failed" and t.attempts == 1, (t.status, t.attempts, t.error)
        assert t.error.startswith("Unprintable: Unprintable(") and "lost" not in t.error
        assert "raise Unprintable" in t.traceback
