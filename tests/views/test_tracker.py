"""The tracker: device load, node state and task spans, on recorded and real events."""

import time

import pytest

import labkit as lk
from labkit.events import (DeviceStats, NodeJoined, PhaseFinished, TaskFailed, TaskFinished,
                           TaskInfo, TaskStarted)
from labkit.scheduling.dask.connect import scheduler_identity
from labkit.views.trackers.tracker import Tracker


def _info(task, node=0, phase=0):
    return TaskInfo("r", task, task, "train", node, "PCA", phase)


def test_busy_fraction_rates_and_running_tasks():
    t = Tracker(window=10.0)
    t(TaskFinished(_info(0), "w1", 90.0, 94.0, 100))      # 4 s inside the window [90, 100]
    t(TaskFinished(_info(1), "w1", 80.0, 85.0, 100))      # outside the window: dropped
    t(TaskStarted(_info(2), "w2", time=97.0))             # running for 3 s
    devices = {d.name: d for d in t.snapshot(now=100.0).devices}
    assert devices["w1"].busy == 0.4 and devices["w1"].tasks_per_s == 0.1
    assert devices["w1"].samples_per_s == 10.0 and devices["w1"].done == 2
    assert devices["w2"].busy == 0.3 and devices["w2"].running == 1


def test_a_rerun_elsewhere_is_not_counted_twice():
    t = Tracker()
    t(TaskStarted(_info(0), "w1", time=1.0))
    t(TaskStarted(_info(0), "w2", time=2.0))   # w1 was lost, Dask re-ran the task on w2
    devices = {d.name: d for d in t.snapshot(now=3.0).devices}
    assert devices["w1"].running == 0 and devices["w2"].running == 1
    t(TaskFinished(_info(0), "w2", 2.0, 2.5, 10))
    assert sum(d.done for d in t.snapshot(now=3.0).devices) == 1


def test_failures_and_device_stats():
    t = Tracker()
    t(TaskStarted(_info(0), "w1", time=1.0))
    t(TaskFailed(_info(0), "w1", 1.0, 2.0, "ValueError", "bad [chunk 0]"))
    t(DeviceStats("cuda:0", kind="device", memory=2**30, memory_limit=2**34,
                  samples_per_s=512.0, step_time=0.25))
    devices = {d.name: d for d in t.snapshot(now=3.0).devices}
    assert devices["w1"].failed == 1 and devices["w1"].running == 0
    gpu = devices["cuda:0"]
    assert (gpu.kind, gpu.memory, gpu.samples_per_s, gpu.step_time) == ("device", 2**30, 512.0, 0.25)
    (span,) = t.spans_since(-1)
    assert not span.ok and span.worker == "w1"


def test_node_state_grows_with_joins_and_keeps_counts_after_the_phase():
    t = Tracker()
    for joins in (1, 2):
        t(NodeJoined("r", 0, "PCA", 0, joins, {"phase": 0, "phases": 1, "training": True,
                                                "samples": 100 * joins,
                                                "plots": {"eigenvalues": [3.0] * joins}}))
    (node,) = t.snapshot().nodes
    assert (node.joins, node.samples, node.plots["eigenvalues"]) == (2, 200, [3.0, 3.0])
    t(PhaseFinished("r", 0, "PCA", 0, 2, state={"phase": 1, "phases": 1, "training": False,
                                                 "samples": 0, "joins": 0,
                                                 "plots": {"eigenvalues": [5.0, 1.0]}}))
    (node,) = t.snapshot().nodes
    assert not node.training and node.phase == 1 and (node.joins, node.samples) == (2, 200)
    assert node.plots["eigenvalues"] == [5.0, 1.0]


def test_spans_stream_in_order_after_a_real_run(dask_scheduler):
    import numpy as np
    t = Tracker()
    dask_scheduler.subscribe(t, state_every=0.5)  # node plots, as a view asks
    chunks = np.array_split(np.random.default_rng(0).normal(size=(800, 6)), 8)
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=3)])
    flow.train([chunks], scheduler=dask_scheduler, join="client")   # a join a chunk
    spans = t.spans_since(-1)
    assert len(spans) == 8 and [s.seq for s in spans] == sorted(s.seq for s in spans)
    assert t.spans_since(spans[3].seq) == spans[4:]
    workers = set(scheduler_identity(dask_scheduler.client)["workers"])
    snap = t.snapshot()
    assert {d.name for d in snap.devices} <= workers and sum(d.done for d in snap.devices) == 8
    (node,) = snap.nodes
    assert not node.training and node.joins == 8 and node.samples == 800
    assert len(node.plots["eigenvalues"]) == 3
    assert snap.phases[0].done == 8 and snap.phases[0].fraction == 1.0


def test_a_join_without_plot_arrays_keeps_the_last_ones():
    t = Tracker()
    t(NodeJoined("r", 0, "PCA", 0, 1, {"samples": 10, "plots": {"eigenvalues": [2.0, 1.0]}}))
    t(NodeJoined("r", 0, "PCA", 0, 2, {"samples": 20}))   # counts only
    (node,) = t.snapshot().nodes
    assert (node.joins, node.samples, node.plots) == (2, 20, {"eigenvalues": [2.0, 1.0]})


def test_a_shut_down_source_shows_no_load_even_with_a_task_told_open():
    """A task's start told after its end leaves it "running"; a shutdown clears the load."""
    from labkit.events import RunStarted, TaskInfo, TaskStarted
    t = Tracker(window=60.0)
    t(RunStarted("r", "train", 1))
    t(TaskStarted(TaskInfo("r", 0, 0), "w1", time.time()))
    assert t.snapshot().devices[0].running == 1
    before = t.version
    t.source_ended()
    assert t.version > before
    [device] = t.snapshot().devices
    assert device.busy == 0 and device.running == 0 and device.samples_per_s == 0


#: The trackers of the views (events in, frozen snapshots out) and what they may import of
#: the room: other trackers only, never a renderer, the words or the live loop.
TRACKERS = ("tracker", "progress", "program_tracker")
UI_LIBRARIES = {"ipywidgets", "anywidget", "bokeh", "jupyter_bokeh", "tqdm", "IPython"}


def _imports(module: str) -> set[str]:
    """What ``labkit/views/trackers/<module>.py`` imports: ``.name`` for its folder's,
    ``..name`` for the rest of the views, else top names."""
    import ast
    from pathlib import Path

    import labkit.views

    folder = Path(labkit.views.__file__).with_name("trackers")
    tree = ast.parse((folder / f"{module}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level in (1, 2):
                dots = "." * node.level
                found |= (
                    {f"{dots}{node.module}"} if node.module else {f"{dots}{a.name}" for a in node.names}
                )
            elif node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("module", TRACKERS)
def test_a_tracker_imports_no_renderer_and_no_ui_library(module):
    imported = _imports(module)
    own = {name for name in imported if name.startswith(".")}
    assert own <= {f".{t}" for t in TRACKERS}, own
    assert not imported & UI_LIBRARIES, imported & UI_LIBRARIES
