"""A fit over Dask arrays on the workers takes in a worker that joins the cluster mid-fit
(``cluster.scale``) at its next epoch: the group re-forms over every worker, the newcomer
holding the parameters and optimizer state of the others; a fit pinned to its workers
does not grow.

Real worker processes under nannies (a ``distributed.LocalCluster`` of processes).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

import labkit as lk
from labkit.data_parallel import DataParallelTrainer
from tests.data_parallel.test_worker_loops import _Ids, _SumLoss

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

ROWS, BATCH, EPOCHS = 1200, 30, 4


class _SlowIds(_Ids):
    def forward(self, x):
        time.sleep(0.002)
        return super().forward(x)


@pytest.fixture
def two_workers():
    """A cluster of two worker processes of its own, which the test scales to three."""
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None
    )
    try:
        with lk.DaskScheduler(cluster=cluster) as s:
            yield s, cluster
    finally:
        cluster.close()


def _ranks_state() -> dict:
    """On a worker: every replica group's rank there, its ``p`` and momentum buffer."""
    from labkit.data_parallel.worker.rank import RANKS

    out = {}
    for gid, rank in RANKS.items():
        state = rank.optimizer.state_dict()["state"]
        buf = state.get(0, {}).get("momentum_buffer")
        out[gid] = (rank.model.p.item(), None if buf is None else buf.item())
    return out


def _fit_while_the_cluster_grows(s, cluster, workers=None):
    """A fit of EPOCHS epochs; during its first, the cluster scales from 2 workers to 3.

    The first step report of epoch 1 waits (on the client) until the third worker
    joined: the workers go on with the epoch, the next one starts after it joined.
    """
    x = np.stack([np.arange(ROWS, dtype=np.float64), np.ones(ROWS)], 1)
    X, Y = da.from_array(x, chunks=(100, 2)), da.from_array(np.zeros(ROWS), chunks=100)
    model = _SlowIds()
    opt = torch.optim.SGD(model.parameters(), lr=1e-7, momentum=0.9)
    if workers is not None:
        s = s.restricted(workers)
    t = DataParallelTrainer(model, _SumLoss(), opt, scheduler=s)
    ran: list = []  # (epoch, worker, rows) of every rank's step

    def gate(event):
        if type(event).__name__ != "TaskFinished":
            return
        ran.append((event.info.phase, event.worker, event.n_samples))
        if len(ran) == 1:
            cluster.scale(3)
            s.client.wait_for_workers(3, timeout=120)

    t.subscribe(gate)
    try:
        history = t.fit((X, Y), batch_size=BATCH, epochs=EPOCHS, shuffle=False)
        held = s.client.run(_ranks_state)
        names = list(t.names)
    finally:
        t.close()
    return history, model, held, names, ran


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_worker_that_joins_mid_fit_is_a_rank_from_the_next_epoch(two_workers):
    s, cluster = two_workers
    first = sorted(s.client.nthreads())
    history, model, held, names, ran = _fit_while_the_cluster_grows(s, cluster)
    joined = [j for h in history for j in h.get("joined", [])]
    newcomer = next(a for a in s.client.nthreads() if a not in first)
    assert len(joined) == 1 and joined[0]["workers"] == [newcomer]
    assert joined[0]["epoch"] == 2 and joined[0]["ranks"] == 3
    assert "joined" in history[1] and len(names) == 3 and newcomer in names
    by_epoch: dict = {}
    for epoch, worker, rows in ran:
        if rows:
            by_epoch.setdefault(epoch, set()).add(worker)
    assert by_epoch[0] == set(first)
    assert all(by_epoch[e] == set(first) | {newcomer} for e in range(1, EPOCHS))
    # every row once an epoch, grown or not
    assert [h["steps"] for h in history] == [ROWS // BATCH] * EPOCHS
    for e in range(EPOCHS):
        assert sum(r for ep, _, r in ran if ep == e) == ROWS
    losses = [h["loss"] for h in history]
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False))
    # the newcomer took the parameters and the optimizer state of the others
    states = [v for per_worker in held.values() for v in per_worker.values()]
    assert len(states) == 3
    p, buf = states[0]
    for q, b in states:
        assert q == pytest.approx(p, rel=1e-6, abs=1e-6)
        assert b == pytest.approx(buf, rel=1e-6, abs=1e-6)
    assert model.p.item() == pytest.approx(p, rel=1e-6, abs=1e-6)
    assert p < 0


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_fit_pinned_to_its_workers_does_not_grow(two_workers):
    s, cluster = two_workers
    first = sorted(s.client.nthreads())
    history, model, held, names, ran = _fit_while_the_cluster_grows(s, cluster, workers=first)
    assert not [h for h in history if "joined" in h]
    assert sorted(names) == first and len(s.client.nthreads()) == 3
    assert {w for _, w, rows in ran if rows} == set(first)
    assert [h["steps"] for h in history] == [ROWS // BATCH] * EPOCHS
    states = [v for per_worker in held.values() for v in per_worker.values()]
    assert len(states) == 2 and model.p.item() == pytest.approx(states[0][0], rel=1e-6)
