"""What a trainer tells the views: per-device spans and stats, epochs, the loss curve."""

from __future__ import annotations

import torch

from labkit.data_parallel import DataParallelTrainer
from labkit.events import (DeviceStats, NodeJoined, PhaseFinished, PhaseStarted, RunFinished,
                           RunStarted, TaskFinished)
from labkit.views.trackers.tracker import Tracker

from .models import batch, mlp, sgd


def test_fit_events_feed_the_tracker(recorder):
    model = mlp()
    data = [batch(seed=s) for s in range(4)] + [batch(n=2, seed=9)]  # a small last batch
    with DataParallelTrainer(model, torch.nn.functional.mse_loss, sgd(model),
                             devices=["cpu:0", "cpu:1", "cpu:2"], work_load=[1, 1, 2]) as t:
        tracker = Tracker(window=60.0)
        t.subscribe(recorder, state_every=0.25)  # device stats and the loss curve that often
        t.subscribe(tracker)
        t.fit(data, epochs=2)
    starts = recorder.of(PhaseStarted)
    assert [(p.phase, p.n_tasks) for p in starts] == [(0, 15), (1, 15)]
    finished = recorder.of(PhaseFinished)
    assert [p.n_tasks for p in finished] == [13, 13]  # the 2-row batch went to one device
    assert finished[-1].state["plots"]["loss"] and finished[-1].state["samples"] == 2 * 98
    tasks = recorder.of(TaskFinished)
    assert len(tasks) == 26 and {e.worker for e in tasks} == {"cpu:0", "cpu:1", "cpu:2"}
    assert sum(e.n_samples for e in tasks) == 2 * 98
    assert all(e.end >= e.start for e in tasks)
    stats = recorder.of(DeviceStats)
    assert stats and {s.kind for s in stats} == {"device"}
    first = {s.device: s for s in stats[:3]}
    assert first["cpu:2"].share == 0.5 and first["cpu:0"].samples_per_s > 0
    assert all(0 <= s.busy <= 1 and s.memory > 0 for s in stats)
    assert len(recorder.of(RunStarted)) == 1 and recorder.of(RunFinished)[0].ok
    assert recorder.of(NodeJoined)[0].state["plots"]["loss"]

    snap = tracker.snapshot()
    assert [d.name for d in snap.devices] == ["cpu:0", "cpu:1", "cpu:2"]
    assert all(d.kind == "device" and d.done > 0 for d in snap.devices)
    # the fit ended: no load is left on the devices, whatever the last window held
    assert all(d.busy == 0 and d.samples_per_s == 0 and d.running == 0 for d in snap.devices)
    assert [round(p.done / p.total, 2) for p in snap.phases] == [1.0, 1.0]
    assert snap.nodes[0].plots["loss"]


def test_an_unwatched_trainer_builds_no_events():
    model = mlp()
    t = DataParallelTrainer(model, torch.nn.functional.mse_loss, sgd(model),
                            devices=["cpu:0", "cpu:1"])
    emitted = []
    t.events.emit = emitted.append  # would record anything sent
    t.fit([batch()], epochs=2)
    t.close()
    assert emitted == []


def test_the_board_ends_on_the_shares_the_trainer_has():
    """Device stats are throttled, but each epoch ends on the trainer's own shares."""
    model = mlp()
    data = [batch(seed=s) for s in range(6)]
    with DataParallelTrainer(model, torch.nn.functional.mse_loss, sgd(model),
                             devices=["cpu:0", "cpu:1"], work_load="auto") as t:
        tracker = Tracker(window=60.0)
        t.subscribe(tracker, state_every=3600)   # one report of device stats, then none
        t.fit(data, epochs=2)
        shares = t.shares
    snap = tracker.snapshot()
    assert [d.share for d in snap.devices] == shares, (snap.devices, shares)
