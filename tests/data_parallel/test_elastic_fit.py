"""A fit over Dask arrays on the workers goes on when a rank's worker retires gracefully
(``client.retire_workers`` mid-fit), as its in-fit recovery does for a kill: every row is
still trained once an epoch, at most ``commit_every`` steps are done again, and it learns.

Real worker processes under nannies (tests/data_parallel/test_worker_loops.py kills one).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch

import labkit as lk
from labkit.data_parallel import DataParallelTrainer
from tests.data_parallel.test_worker_loops import _Ids, _SumLoss

da = pytest.importorskip("dask.array")


class _SlowIds(_Ids):
    def forward(self, x):
        time.sleep(0.005)
        return super().forward(x)


@pytest.fixture
def three_workers():
    """A cluster of three worker processes of its own: one of them is retired."""
    with lk.DaskScheduler(mode="processes", n_workers=3) as s:
        yield s


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_worker_retired_mid_fit_costs_a_few_steps_and_every_row_is_trained_once(three_workers):
    s = three_workers
    rows, batch, epochs, every = 1800, 30, 3, 10
    x = np.stack([np.arange(rows, dtype=np.float64), np.ones(rows)], 1)
    X, Y = da.from_array(x, chunks=(200, 2)), da.from_array(np.zeros(rows), chunks=200)
    model = _SlowIds()
    t = DataParallelTrainer(model, _SumLoss(), torch.optim.SGD(model.parameters(), lr=1.0),
                            scheduler=s)
    leaving = t.names[1]
    reports = []
    t.subscribe(lambda e: reports.append(time.time()) if type(e).__name__ == "TaskFinished"
                else None)
    retired = {}

    def retire():
        while len(reports) < 3 * 75:   # in the second epoch
            time.sleep(0.005)
        retired["at"] = time.time()
        s.client.retire_workers([leaving])
    retirer = threading.Thread(target=retire, daemon=True)
    retirer.start()
    try:
        history = t.fit((X, Y), batch_size=batch, epochs=epochs, commit_every=every,
                        max_failures=0)
    finally:
        retirer.join(60)
        t.close()
    recoveries = [r for h in history for r in h.get("recoveries", [])]
    assert len(recoveries) == 1 and recoveries[0]["worker"] == leaving
    assert recoveries[0]["moved"] is True   # a move: max_failures=0 held
    assert 0 <= recoveries[0]["redone"] <= every
    assert leaving not in t.names and len(t.names) == 2
    assert leaving not in set(s.client.nthreads())
    assert [h["steps"] for h in history] == [rows // batch] * epochs
    assert model.p.item() == -epochs * sum(range(rows))   # every row once an epoch, no more
    after = [r for r in reports if r > retired["at"]]
    assert after and after[0] - retired["at"] < 10.0


@pytest.mark.slow
def test_the_elastic_fit_benchmark_runs_quick():
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "bench_elastic_fit.py"),
                           "--quick"], capture_output=True, text=True, timeout=300, cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "uninterrupted seed 0: final loss" in proc.stdout
    assert "moved=True" in proc.stdout and "the spread" in proc.stdout
