"""A sweep on worker processes tells its usable workers as they change (``SweepWorkers``,
issue 47's "seen"): first at its start, then at each join and retirement, and the
sweep board's frames carry them.  On a real ``LocalCluster`` of worker processes
scaled 1 -> 2 -> 1 under a running sweep; every wait is on events, bounded.
"""

from __future__ import annotations

import itertools
import time

import labkit as lk
from labkit.events import SweepWaiting, SweepWorkers
from labkit.experiments.launch.launcher import ASK_EVERY, Launcher
from labkit.views.sweep.frames import FrameEncoder
from labkit.views.sweep.workers import WorkerSteps
from labkit.views.trackers.sweep_tracker import SweepTracker
from tests.experiments import gate_functions as gf
from tests.helpers import until


def test_a_sweep_tells_its_workers_as_the_cluster_scales_1_2_1(recorder, tmp_path, monkeypatch):
    from distributed import LocalCluster

    gate = tmp_path / "open"
    asked: list[float] = []  # when the sweep asked the cluster (the loop ticks 5 times a second)
    ask = Launcher.usable_workers

    def counted(self):
        asked.append(time.monotonic())
        return ask(self)

    monkeypatch.setattr(Launcher, "usable_workers", counted)
    told = lambda: [e.workers for e in recorder.of(SweepWorkers)]  # noqa: E731
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, lk.DaskScheduler(cluster=cluster) as s:
        s.client.wait_for_workers(1, timeout=120)
        tracker, steps = SweepTracker(), WorkerSteps()
        unsubscribe = [s.subscribe(recorder), s.subscribe(tracker), s.subscribe(steps)]
        try:
            run = lk.sweep(gf.until_open, {"x": lk.uniform(0, 1), "gate": str(gate)}, trials=2,
                           metric="loss", mode="min", scheduler=s, store=None, wait=False,
                           seed=0, max_failures=0)
            frames = FrameEncoder(tracker)
            frames.workers = steps
            until(lambda: told() == [1], 120, "the sweep to tell its one worker")
            assert frames.paint()["workers"]["steps"][0][1:] == [1, 1]
            cluster.scale(2)
            until(lambda: told() == [1, 2], 120, "the sweep to tell the worker that joined")
            delta = frames.delta(tracker.take())
            assert [n for _, n, _ in delta["workers"]["steps"]] == [2]
            cluster.scale(1)
            until(lambda: told() == [1, 2, 1], 120, "the sweep to tell the worker that left")
            gate.touch()
            result = run.result(timeout=300)
        finally:
            for u in unsubscribe:
                u()
    assert result.counts() == {"completed": 2}
    said = recorder.of(SweepWorkers)
    assert told() == [1, 2, 1] and [e.threads for e in said] == [1, 2, 1]
    assert all(e.run == run.id and e.name == result.name for e in said)
    assert [e.time for e in said] == sorted(e.time for e in said)
    assert not recorder.of(SweepWaiting)  # it never waited: a worker all along
    paint = frames.paint()
    assert [n for _, n, _ in paint["workers"]["steps"]] == [1, 2, 1]
    assert paint["workers"]["until"] is not None  # the sweep ended: held flat until then
    assert steps.counts() == [1, 2, 1]
    # one look a while serves the wait and the count: never two within ASK_EVERY
    assert len(asked) >= 3 and all(b - a >= ASK_EVERY for a, b in itertools.pairwise(asked))
