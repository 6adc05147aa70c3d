"""The dashboard's run panel: a run selector, the shown run's bars, its nodes only."""

from __future__ import annotations

import numpy as np

import labkit as lk
from labkit.views.bokeh.components import Components
from labkit.views.bokeh.run_panel import LATEST, RunPanel
from labkit.views.trackers.tracker import Tracker

X = np.random.default_rng(5).normal(size=(400, 6))


def _two_runs(s, tracker):
    s.subscribe(tracker, state_every=0.0)
    first = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
    first.train([np.array_split(X, 4)], scheduler=s)
    second = lk.ParallelFlow([lk.nodes.PCA(output_dim=3), lk.nodes.PCA(output_dim=1)])
    second.train([np.array_split(X, 6), np.array_split(X, 3)], scheduler=s)
    runs = []
    for p in tracker.snapshot().phases:
        if p.run not in runs:
            runs.append(p.run)
    return runs


def test_latest_follows_the_newest_run_and_a_chosen_run_shows_only_itself():
    tracker, panel = Tracker(), RunPanel()
    components = Components(tracker, run_filter=panel.run_filter)
    with lk.LocalScheduler() as s:
        first, second = _two_runs(s, tracker)
    panel.update(tracker.snapshot())
    components.update()
    assert panel.select.options == [LATEST, second, first]
    text = panel.progress.text
    assert f"train {second}" in text and "finished" in text and "2 phases" in text
    assert text.count("<progress") == 2 and "node 1 PCA phase 0" in text and first not in text
    assert set(components.node_rows["run"]) == {second}      # its nodes only
    panel.select.value = first                                        # as a browser would
    panel.update(tracker.snapshot())
    components.update()
    assert f"train {first}" in panel.progress.text and panel.progress.text.count("<progress") == 1
    assert set(components.node_rows["run"]) == {first}
    assert "value='4' max='4'" in panel.progress.text                 # 4/4 chunks done


def test_a_cancelled_run_is_amber_and_says_so():
    from labkit.views.trackers.progress import PhaseProgress
    p = PhaseProgress("train-x", 0, "PCA", 0, done=2, total=8, started=0.0, finished=1.0,
                      ok=False, cancelled=True)
    row = RunPanel._bar(p, now=1.0)
    assert "cancelled" in row and "#8c6d1f" in row and "value='2' max='8'" in row


def test_many_phases_keep_the_newest_rows():
    from labkit.events import PhaseFinished, PhaseStarted, RunStarted
    tracker, panel = Tracker(), RunPanel(max_phases=3)
    tracker(RunStarted("fit-1", "fit", 1))
    for epoch in range(10):
        tracker(PhaseStarted("fit-1", 0, "Net", epoch, False, 4))
        tracker(PhaseFinished("fit-1", 0, "Net", epoch, 4))
    panel.update(tracker.snapshot())
    text = panel.progress.text
    assert text.count("<progress") == 3 and "7 earlier phases not shown" in text
    assert "epoch 10" in text and "epoch 7 " not in text and "10 phases" in text


def test_a_run_without_phases_is_listed_and_shown_in_its_words():
    """A sweep has no phases: the panel still lists it and says what it is doing."""
    from labkit.events import RunFinished, RunStarted
    tracker, panel = Tracker(), RunPanel()
    tracker(RunStarted("sweep-1", "sweep", 0, detail={"name": "mlp-digits"}))
    panel.update(tracker.snapshot())
    assert panel.run == "sweep-1" and panel.select.options == [LATEST, "sweep-1"]
    assert "sweep sweep-1" in panel.progress.text and "running" in panel.progress.text
    assert "mlp-digits" in panel.progress.text
    tracker(RunFinished("sweep-1", ok=True))
    panel.update(tracker.snapshot())
    assert "finished" in panel.progress.text and "no run yet" not in panel.progress.text
