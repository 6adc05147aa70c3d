"""A cancelled run submits nothing more: no resubmission after ``run.result()`` raised.

On every kind of cluster (:mod:`tests.clusters`).

On worker processes, big chunks travel through shared memory and their futures
are cancelled with the run; such a cancel looked like inputs lost with their
workers, and chunks were sent again after the run had already ended.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest

import labkit as lk
from tests import helpers
from tests.clusters import KINDS, scheduler_of


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.timeout(240)
@pytest.mark.parametrize("kind", KINDS)
def test_a_cancelled_run_resubmits_nothing_and_leaves_no_task(kind, caplog):
    chunks = [np.random.default_rng(k).normal(size=(200, 100)) for k in range(40)]  # 160 KB
    caplog.set_level(logging.WARNING, logger="labkit.scheduling")
    with scheduler_of(kind) as s:
        for i in range(12):
            flow = lk.ParallelFlow([helpers.SlowPCA(delay=0.05, output_dim=3)])
            run = flow.train([chunks], scheduler=s, wait=False)
            time.sleep(0.3 + 0.05 * i)   # cancels at different moments of the phase
            run.cancel()
            with pytest.raises(lk.CancelledError):
                run.result(60)
            assert s.total_open_tasks == 0
        deadline = time.monotonic() + 10
        while any(s.client.processing().values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(s.client.processing().values())
        time.sleep(1.0)   # a late resubmission would show up now
    assert not [r.getMessage() for r in caplog.records if "resubmitting" in r.getMessage()]
