"""A fit over Dask arrays goes on when a rank's worker gets a preemption notice (SIGTERM to its
process) mid-fit, as for a retirement: a move (``max_failures=0`` holds), at most
``commit_every`` steps done again, every row trained once an epoch.  A SIGKILL stays a
failure that ``max_failures`` counts (tests/data_parallel/test_worker_loops.py kills one).

Real worker processes under nannies.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest
import torch

import labkit as lk
from labkit.data_parallel import DataParallelTrainer
from tests.data_parallel.test_elastic_fit import _SlowIds
from tests.data_parallel.test_worker_loops import _SumLoss

da = pytest.importorskip("dask.array")


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_sigterm_to_a_ranks_worker_mid_fit_moves_it_and_every_row_is_trained_once():
    rows, batch, epochs, every = 1800, 30, 3, 10
    x = np.stack([np.arange(rows, dtype=np.float64), np.ones(rows)], 1)
    X, Y = da.from_array(x, chunks=(200, 2)), da.from_array(np.zeros(rows), chunks=200)
    with lk.DaskScheduler(mode="processes", n_workers=3) as s:
        model = _SlowIds()
        t = DataParallelTrainer(model, _SumLoss(), torch.optim.SGD(model.parameters(), lr=1.0),
                                scheduler=s)
        leaving = t.names[1]
        pid = s.run_on_workers(os.getpid)[leaving]
        reports = []
        t.subscribe(lambda e: reports.append(time.time()) if type(e).__name__ == "TaskFinished"
                    else None)

        def preempt():
            deadline = time.monotonic() + 200
            while len(reports) < 3 * 75 and time.monotonic() < deadline:  # the second epoch
                time.sleep(0.005)
            os.kill(pid, signal.SIGTERM)
        signaller = threading.Thread(target=preempt, daemon=True)
        signaller.start()
        try:
            history = t.fit((X, Y), batch_size=batch, epochs=epochs, commit_every=every,
                            max_failures=0)
        finally:
            signaller.join(60)
            t.close()
        recoveries = [r for h in history for r in h.get("recoveries", [])]
        assert len(recoveries) == 1 and recoveries[0]["worker"] == leaving, recoveries
        assert recoveries[0]["moved"] is True   # a move: max_failures=0 held
        assert 0 <= recoveries[0]["redone"] <= every
        assert leaving not in t.names and len(t.names) == 2
        assert leaving not in set(s.client.nthreads())
        assert [h["steps"] for h in history] == [rows // batch] * epochs
        assert model.p.item() == -epochs * sum(range(rows))   # every row once an epoch
