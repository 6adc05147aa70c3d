"""The progress tracker on recorded event sequences, and the console renderer."""

import io

import labkit as lk
from labkit.events import (PhaseFinished, PhaseStarted, RunFinished, RunStarted, TaskFailed,
                           TaskFinished, TaskInfo, TaskStarted, TaskSubmitted)
from labkit.views import ConsoleProgress, ProgressTracker
from tests import helpers


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
    assert lines[0].startswith("node 0 PCA phase 0: 100%|") and "| 6/6 [" in lines[0]
    assert "task/s]" in lines[0]
    assert lines[1] == "node 1 OnlineLinearRegression phase 0: done"


class _Terminal(io.StringIO):
    """A stream that says it is a terminal, so the console draws live bars."""

    def isatty(self):
        return True


def test_console_draws_live_tqdm_bars_on_a_terminal(dask_scheduler):
    import numpy as np
    out = _Terminal()
    progress = ConsoleProgress(dask_scheduler, stream=out)
    flow = lk.ParallelFlow([helpers.SlowPCA(delay=0.1, output_dim=2)])
    flow.train([np.array_split(np.random.default_rng(1).normal(size=(400, 4)), 8)],
               scheduler=dask_scheduler)
    progress.close()
    frames = [f for f in out.getvalue().replace("\n", "\r").split("\r") if f.strip()]
    mine = [f for f in frames if f.startswith("node 0 SlowPCA phase 0:")]
    assert len(mine) >= 2, frames                  # redrawn while it ran, not one line at the end
    assert "| 8/8 [" in mine[-1] and "100%" in mine[-1]
    assert not progress._bars                      # closed with their phase


def test_a_cancelled_phase_says_cancelled_not_failed():
    from labkit.views.console.bars import format_phase
    from labkit.views.trackers.progress import PhaseProgress
    p = PhaseProgress("r", 0, "PCA", 0, done=3, total=8, started=0.0, finished=2.0, ok=False,
                      cancelled=True)
    line = format_phase(p, now=2.0)
    assert line.startswith("node 0 PCA phase 0:  38%|") and "cancelled" in line
    assert "FAILED" not in line
    failed = format_phase(PhaseProgress("r", 0, "PCA", 0, done=3, failed=1, total=8,
                                        started=0.0, finished=2.0, ok=False), now=2.0)
    assert "1 failed, FAILED" in failed
