"""A cluster whose workers restart at their lifetime's end keeps every nanny, for minutes.

``lk.DaskScheduler(mode="processes", lifetime=..., lifetime_restart=True)``: each nanny
restarts its worker when the worker's lifetime ends.  Dask's cluster looks once,
``lost-worker-timeout`` after a worker left, whether a worker of that name is registered
at that moment, and closes the nanny if not; a look that fell into a later restart closed
a working nanny, and the cluster drained (labkit had put that look 120 s after each
departure: issue 47, ``bench_elastic_flow.py --rounds 5``).  Here workers of a 4 s
lifetime restart for longer than 120 s while the nannies are counted, and a
``ParallelFlow`` trains exactly across retirements before and after, the cluster back at
its size.
"""

from __future__ import annotations

import time

import labkit as lk
from labkit.events import NodeJoined
from labkit.nodes.pca import PCA
from labkit.scheduling.dask.dask_adapter import scheduler_identity
from tests import helpers
from tests.flows.cases import X

#: Seconds the cluster cycles: longer than Dask's look at a departed worker used to wait (120).
CYCLING = 150.0

CHUNKS = [X[i * 50:(i + 1) * 50] for i in range(24)]


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
    with lk.DaskScheduler(mode="processes", n_workers=2, lifetime="4s", lifetime_stagger="1s",
                          lifetime_restart=True) as s:
        start = time.monotonic()
        s.subscribe(recorder)
        s.client.wait_for_workers(2, timeout=120)
        _train_exactly(s, recorder)
        fewest, names = 2, set()
        while time.monotonic() - start < CYCLING:
            fewest = min(fewest, _nannies(s.cluster))
            names |= {w["name"] for w in scheduler_identity(s.client)["workers"].values()}
            time.sleep(0.5)
        assert fewest == 2, "the cluster closed a nanny that was restarting its worker"
        s.client.wait_for_workers(2, timeout=120)
        _train_exactly(s, recorder)
        assert len(s.cluster.workers) == 2 and _nannies(s.cluster) == 2
        assert names == {0, 1}  # the same two nannies restarted their workers all along


def test_a_nanny_that_closed_in_a_lifetime_cluster_is_started_again_and_not_at_shutdown():
    """Dask's own race at a lifetime's end closes a worker *with its nanny* now and then
    ("Scheduler was unaware of this worker"): closed here by hand, the same way."""
    with lk.DaskScheduler(mode="processes", n_workers=2, lifetime="600s",
                          lifetime_restart=True) as s:
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
