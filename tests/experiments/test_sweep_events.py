"""The sweep's events a view draws from: every objective in ``SweepStarted``, a trial
that moved (``TrialMoved``), and a sweep waiting for workers (``SweepWaiting``).

Moves and waits on real worker processes: ``client.retire_workers`` under a
running trial, and a cluster that starts with no worker and then scales up.
"""

from __future__ import annotations


import pytest

import labkit as lk
from labkit.events import SweepStarted, SweepWaiting, TrialMoved, TrialStarted
from tests.experiments import objective_functions as F
from tests.helpers import until
from tests.scheduling import elastic_functions as ef

XY = {"x": lk.uniform(0, 1), "y": lk.uniform(0, 1)}


def _running_on(run) -> dict:
    """Running trials that reported, by worker."""
    return {r["worker"]: r["id"] for r in run.sweep.snapshot()
            if r["status"] == "running" and r["step"] is not None and r["worker"]}


def test_sweep_started_carries_every_objective_and_mode(local_scheduler, recorder):
    unsubscribe = local_scheduler.subscribe(recorder)
    try:
        result = lk.sweep(F.two_objectives, XY, trials=3, seed=1, store=None,
                          scheduler=local_scheduler, metric=("loss", "latency_ms"),
                          mode=("min", "max"))
        lk.sweep(F.two_objectives, XY, trials=2, seed=1, store=None,
                 scheduler=local_scheduler, metric="loss", mode="min")
    finally:
        unsubscribe()
    several, one = recorder.of(SweepStarted)
    assert (several.objectives, several.modes) == (("loss", "latency_ms"), ("min", "max"))
    assert (several.metric, several.mode) == ("loss", "min")  # the first, as views read it
    assert (one.objectives, one.modes) == (("loss",), ("min",))
    assert several.objectives == result.objectives


def test_sweep_started_of_a_finished_sweep_and_by_hand(tmp_path, recorder):
    from labkit.experiments.live import finished_run

    store = tmp_path / "s.db"
    lk.sweep(F.two_objectives, XY, trials=3, seed=1, store=store, name="two",
             metric=("loss", "latency_ms"), mode=("min", "max"))
    run = finished_run(lk.load_sweep(store, "two"))
    run.subscribe(recorder)  # replays what came before
    (started,) = recorder.of(SweepStarted)
    assert (started.objectives, started.modes) == (("loss", "latency_ms"), ("min", "max"))
    old = SweepStarted("r", "demo", "acc", "max", {}, (), 1)  # as views and notebooks make it
    assert (old.objectives, old.modes) == (("acc",), ("max",))
    with pytest.raises(ValueError, match="mode"):
        SweepStarted("r", "d", "a", "max", {}, (), 1, objectives=("a", "b"), modes=("max",))


def test_a_trial_that_moves_is_told_with_the_worker_it_left(recorder):
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        unsubscribe = s.subscribe(recorder)
        try:
            run = lk.sweep(ef.epochs, {"x": lk.uniform(0, 1), "pause": 0.4}, trials=3,
                           metric="loss", mode="min", scheduler=s, store=None, wait=False,
                           max_failures=0, seed=0)
            until(lambda: len(_running_on(run)) == 2, 180, "two trials on two workers")
            leaving = sorted(_running_on(run))[0]
            moved = _running_on(run)[leaving]
            s.client.retire_workers([leaving])
            result = run.result(timeout=300)
        finally:
            unsubscribe()
    assert result.counts() == {"completed": 3}
    told = [e for e in recorder.of(TrialMoved) if e.trial == moved]
    assert told and told[0].worker == leaving and told[0].moves == 1 and told[0].run == run.id
    assert sum(len([e for e in recorder.of(TrialMoved) if e.trial == t.id]) for t in
               result.trials) == sum(t.moves for t in result.trials)
    kinds = [type(e) for e in recorder.events if getattr(e, "trial", None) == moved]
    first = kinds.index(TrialMoved)
    assert TrialStarted in kinds[first:]  # it started again after the move was told


def _sweep_from_no_worker(recorder):
    """A sweep of 2 trials on a cluster with no worker, scaled to 1 once the sweep said it
    waits; its run and result (``recorder`` heard its events)."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, lk.DaskScheduler(cluster=cluster) as s:
        unsubscribe = s.subscribe(recorder)
        try:
            run = lk.sweep(ef.square, {"x": lk.uniform(0, 1)}, trials=2, metric="loss",
                           mode="min", scheduler=s, store=None, wait=False, seed=0)
            until(lambda: recorder.of(SweepWaiting), 120, "the sweep to say it waits")
            cluster.scale(1)
            return run, run.result(timeout=300)
        finally:
            unsubscribe()


def test_a_sweep_on_a_cluster_with_no_worker_says_it_waits_then_goes_on(recorder):
    run, result = _sweep_from_no_worker(recorder)
    assert result.counts() == {"completed": 2}
    said = recorder.of(SweepWaiting)
    assert [e.waiting for e in said] == [True, False]
    assert said[0].name == result.name and said[0].pending == 2 and said[0].run == run.id


def test_a_wait_the_trials_ended_before_the_next_look_is_still_said_over(recorder, monkeypatch):
    """The cluster is looked at once only: the trials that ran after a worker joined
    end the wait unseen, and the sweep's end says it is over all the same."""
    from labkit.experiments.launch import launcher

    monkeypatch.setattr(launcher, "ASK_EVERY", 3600.0)
    _, result = _sweep_from_no_worker(recorder)
    assert result.counts() == {"completed": 2}
    assert [e.waiting for e in recorder.of(SweepWaiting)] == [True, False]
