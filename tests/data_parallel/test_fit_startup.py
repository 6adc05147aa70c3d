"""A short fit on workers pays little beyond its steps (issue 38).

A fit's fixed cost is what its whole call takes beyond its steps (from the
first step's start to the last step's end on the workers, as the reports tell).
It once held a 50 ms wait for a quiet queue after the last report, every fit.
The least of a few warm fits is taken: a busy machine only adds to it.
"""

from __future__ import annotations

import time

import dask.array as da
import pytest
import torch

import labkit as lk

from .models import batch, mlp, sgd

#: Seconds a warm fit may take beyond its steps (about 0.035 here; 0.09 before issue 38).
FIXED_COST = 0.07


@pytest.fixture(scope="module")
def workers():
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        yield s


def _overhead(trainer, fit) -> float:
    """Seconds of one whole ``fit()`` call beyond its steps' span."""
    spans = []
    unsubscribe = trainer.subscribe(
        lambda e: spans.append((e.start, e.end)) if type(e).__name__ == "TaskFinished" else None)
    try:
        started = time.time()
        fit()
        ended = time.time()
    finally:
        unsubscribe()
    assert spans
    return (ended - started) - (max(e for _, e in spans) - min(s for s, _ in spans))


@pytest.mark.parametrize("where", ["workers", "fed"])
def test_a_warm_short_fit_pays_little_beyond_its_steps(workers, where):
    x, y = batch(n=400, seed=4)
    model = mlp()
    with lk.DataParallelTrainer(model, torch.nn.functional.mse_loss, sgd(model),
                                scheduler=workers) as t:
        if where == "workers":
            X, Y = workers.client.persist([da.from_array(x.numpy(), chunks=(200, 6)),
                                           da.from_array(y.numpy(), chunks=(200, 3))])

            def fit():
                return t.fit((X, Y), batch_size=40)
        else:
            batches = [(x[i:i + 40], y[i:i + 40]) for i in range(0, 400, 40)]

            def fit():
                return t.fit(batches)
        assert fit()[0]["steps"] == 10       # warm: replicas built, first fit done
        # the least of 10 (a fit is about 0.1 s): beside a second test run and two busy
        # loops (load 6-7) the least of 5 was 84 ms (issue 44)
        least = min(_overhead(t, fit) for _ in range(10))
    assert least < FIXED_COST, f"a 10-step fit took {least * 1000:.0f} ms beyond its steps"
