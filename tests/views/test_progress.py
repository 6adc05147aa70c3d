"""The progress tracker on recorded event sequences, and the console renderer."""

import io

import labkit as lk
from labkit.events import (PhaseFinished, PhaseStarted, RunFinished, RunStarted, TaskFailed,
                           TaskFinished, TaskInfo, TaskStarted, TaskSubmitted)
from labkit.views import ConsoleProgress, ProgressTracker


def _info(task, chunk=None):
    return TaskInfo("r1", task, task if chunk is None else chunk, "train", 0, "PCA", 0)


def test_counts_running_done_failed_and_retries():
    t = ProgressTracker()
    t(PhaseStarted("r1", 0, "PCA", 0, local=False, n_tasks=3, time=100.0))
    for i in range(3):
        t(TaskSubmitted(_info(i)))
    t(TaskStarted(_info(0), "w1"))
    t(TaskStarted(_info(1), "w2"))
    t(TaskStarted(_info(1), "w1"))  # re-run after losing w2: still one running task
    (p,) = t.snapshot()
    assert (p.submitted, p.running, p.done) == (3, 2, 0)
    t(TaskFinished(_info(0), "w1", 100.0, 101.0, 50))
    t(TaskFailed(_info(1), "w1", None, None, "ValueError", "bad [chunk 1]"))
    (p,) = t.snapshot()
    assert (p.running, p.done, p.failed, p.samples) == (0, 1, 1, 50)
    assert p.errors == ("bad [chunk 1]",) and p.fraction == 1 / 3
    assert p.eta(now=102.0) == 4.0  # 0.5 tasks/s, 2 left
    t(PhaseFinished("r1", 0, "PCA", 0, 3, ok=False, time=103.0))
    (p,) = t.snapshot()
    assert not p.ok and p.finished == 103.0 and p.eta() is None


def test_execute_runs_are_tracked_by_run():
    t = ProgressTracker()
    t(RunStarted("e1", "execute", 2, time=10.0))
    info = TaskInfo("e1", 0, 0, "execute")
    t(TaskSubmitted(info))
    t(TaskFinished(info, "w", 10.0, 11.0, 5))
    t(RunFinished("e1", ok=True, time=12.0))
    (p,) = t.snapshot()
    assert (p.node_name, p.done, p.total, p.rate()) == ("execute", 1, 1, 0.5)


def test_console_progress_after_a_real_run(dask_scheduler):
    import numpy as np
    out = io.StringIO()
    progress = ConsoleProgress(dask_scheduler, stream=out)
    chunks = np.array_split(np.random.default_rng(0).normal(size=(600, 5)), 6)
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=2), lk.nodes.OnlineLinearRegression()])
    flow.train([chunks, [(c, c[:, :1]) for c in chunks]], scheduler=dask_scheduler)
    progress.close()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("node 0 PCA phase 0: [####################] 6/6")
    assert lines[1] == "node 1 OnlineLinearRegression phase 0: done"
