"""A cluster whose workers restart at their lifetime's end keeps every nanny.

``lk.DaskScheduler(mode="processes", lifetime=..., lifetime_restart=True)``: each nanny
restarts its worker when the worker's lifetime ends.  Dask's cluster looks once,
``lost-worker-timeout`` after a worker left, whether a worker of that name is registered
at that moment, and closes the nanny if not; a look that fell into a later restart closed
a working nanny, and the cluster drained (labkit had put that look 120 s after each
departure: issue 47, ``bench_elastic_flow.py --rounds 5``).  Here Dask's wait is set to
0 s, so that without labkit's change *every* departure's look falls into its restart:
workers of a 4 s lifetime restart for :data:`CYCLING` seconds while the nannies are
counted, and a ``ParallelFlow`` trains exactly across retirements before and after, the
cluster back at its size with the same two nannies.

Dask's own race at a lifetime's end (a heartbeat answered "missing" closes the worker and
asks its nanny to close: issue 44, beside a second test run) is made on purpose, once, in
:func:`test_a_worker_closed_as_forgotten_by_the_scheduler_is_restarted_by_the_same_nanny`.
"""

from __future__ import annotations

import time

import dask

import labkit as lk
from labkit.events import NodeJoined
from labkit.nodes.pca import PCA
from labkit.scheduling.dask.dask_adapter import scheduler_identity
from tests import helpers
from tests.flows.cases import X

#: Seconds the cluster cycles: about six lifetimes of each worker.  Each departure's look
#: (at Dask's wait, set to 0 s here) would close its nanny, so one lifetime would show it.
CYCLING = 25.0

CHUNKS = [X[i * 50 : (i + 1) * 50] for i in range(24)]


def _train_exactly(s, recorder) -> None:
    """A ``ParallelFlow`` trained on the cluster equals serial training, every sample once."""
    flow = lk.ParallelFlow([helpers.SlowPCA(delay=0.1, output_dim=3)])
    flow.train([CHUNKS], scheduler=s)
    assert recorder.of(NodeJoined)[-1].state["samples"] == sum(len(c) for c in CHUNKS)
    serial = lk.Flow([PCA(output_dim=3)])
    serial.train([CHUNKS])
    helpers.assert_nodes_equal(serial[0], flow[0])


def _nannies(cluster) -> int:
    """The cluster's nannies that are running (restarting a worker counts as running)."""
    return sum(1 for nanny in list(cluster.workers.values()) if nanny.status.name == "running")


def test_a_lifetime_cluster_keeps_its_nannies_and_a_flow_trains_exactly_across_retirements(
    recorder,
):
    with (
        dask.config.set({"distributed.deploy.lost-worker-timeout": "0s"}),
        lk.DaskScheduler(
            mode="processes",
            n_workers=2,
            lifetime="4s",
            lifetime_stagger="1s",
            lifetime_restart=True,
        ) as s,
    ):
        s.subscribe(recorder)
        s.client.wait_for_workers(2, timeout=120)
        first = dict(s.cluster.workers)
        _train_exactly(s, recorder)
        start = time.monotonic()
        fewest, names = 2, set()
        while time.monotonic() - start < CYCLING:
            fewest = min(fewest, _nannies(s.cluster))
            names |= {w["name"] for w in scheduler_identity(s.client)["workers"].values()}
            time.sleep(0.25)
        assert fewest == 2, "the cluster closed a nanny that was restarting its worker"
        s.client.wait_for_workers(2, timeout=120)
        _train_exactly(s, recorder)
        assert len(s.cluster.workers) == 2 and _nannies(s.cluster) == 2
        assert names == {0, 1}  # the same two nannies restarted their workers all along
        assert all(s.cluster.workers[name] is nanny for name, nanny in first.items())


async def _close_as_forgotten(dask_worker) -> None:
    """Close a worker as Dask does on a heartbeat answered "missing" (its nanny asked too)."""
    await dask_worker.close(reason="worker-heartbeat-missing")


def _worker_named(client, name) -> str | None:
    """The address of the scheduler's worker named ``name``, if one is registered."""
    workers = scheduler_identity(client)["workers"]
    return next((address for address, w in workers.items() if w["name"] == name), None)


def test_a_worker_closed_as_forgotten_by_the_scheduler_is_restarted_by_the_same_nanny():
    """The race itself, made once: the nanny restarts its worker and never stops running."""
    with lk.DaskScheduler(
        mode="processes", n_workers=2, lifetime="600s", lifetime_restart=True
    ) as s:
        s.client.wait_for_workers(2, timeout=120)
        name, nanny = next(iter(s.cluster.workers.items()))
        old = _worker_named(s.client, name)
        s.client.run(_close_as_forgotten, workers=[old], wait=False)
        deadline = time.monotonic() + 120
        while _worker_named(s.client, name) in (None, old):
            assert nanny.status.name == "running", "the nanny closed with its worker"
            assert time.monotonic() < deadline, f"worker {name!r} was not restarted"
            time.sleep(0.05)
        assert s.cluster.workers[name] is nanny and nanny.status.name == "running"
        s.client.wait_for_workers(2, timeout=120)


def test_a_nanny_that_closed_in_a_lifetime_cluster_is_started_again_and_not_at_shutdown():
    """A nanny that closes another way is started again by labkit's keeper: closed here
    by hand."""
    with lk.DaskScheduler(
        mode="processes", n_workers=2, lifetime="600s", lifetime_restart=True
    ) as s:
        s.client.wait_for_workers(2, timeout=120)
        name, nanny = next(iter(s.cluster.workers.items()))
        s.cluster.sync(nanny.close)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            kept = s.cluster.workers.get(name)
            if kept is not None and kept is not nanny and kept.status.name == "running":
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"the closed nanny {name!r} was not started again")
        s.client.wait_for_workers(2, timeout=120)
        assert sorted(w["name"] for w in scheduler_identity(s.client)["workers"].values()) == [0, 1]
        cluster = s.cluster
    # the shutdown closed every nanny for good: none was started again behind it
    assert all(n.status.name == "closed" for n in cluster.workers.values())
