"""Routes (labkit.scheduling.routes.transport and .routes): the registry, keys, and the routes chosen.

``route_classes`` picks the registered routes that serve a cluster's
ClusterTraits, lowest priority first, the graph route last; task keys name
run, task and attempt; a route that no longer carries a chunk refuses to
resubmit it.  A real DaskScheduler opens the routes its cluster implies.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

import labkit as lk
from labkit.events import TaskInfo
from labkit.scheduling.routes.routes import DirectScatterRoute, GraphRoute, InProcessRoute
from labkit.scheduling.workers.shared import SHARE_BYTES, SharedChunk
from labkit.scheduling.tasks.open_task import OpenTask
from labkit.scheduling.workers.lazy_chunks import LazyChunk
from labkit.scheduling.routes.transport import (
    PASS, ClusterTraits, RouteContext, Transport, direct_bytes_for, open_routes, register,
    route_classes, task_key, task_key_prefix, task_of_key, unregister,
)

EXPECTED = {  # (in_process, by_reference, shares_memory) -> route names, in order
    (True, True, False): ["in-process", "graph"],
    (True, True, True): ["in-process", "graph"],
    (True, False, False): ["graph"],
    (True, False, True): ["graph"],
    (False, True, True): ["shared-memory", "direct-scatter", "graph"],
    (False, False, True): ["shared-memory", "direct-scatter", "graph"],
    (False, True, False): ["direct-scatter", "graph"],
    (False, False, False): ["direct-scatter", "graph"],
}


def _entry(task=7, run="r1", kind="train", chunk=3, nbytes=0, data=None) -> OpenTask:
    entry = OpenTask(TaskInfo(run, task, chunk, kind), batch=None, callable=None, nbytes=nbytes)
    entry.data = data
    return entry


def _context(direct_bytes=2**20) -> RouteContext:
    return RouteContext(client=None, outcomes=None, run_options=lambda: (None, None),
                        direct_bytes=direct_bytes)


@pytest.mark.parametrize("traits", list(EXPECTED))  # every combination of the three
def test_route_classes_follow_the_cluster_traits(traits):
    classes = route_classes(ClusterTraits(*traits))
    assert [cls.name for cls in classes] == EXPECTED[traits]
    assert [cls.priority for cls in classes] == sorted(cls.priority for cls in classes)
    assert classes[-1] is GraphRoute  # the last route takes every chunk


def test_open_routes_makes_one_transport_per_route_sharing_the_context():
    context = _context()
    routes = open_routes(ClusterTraits(True, True, False), context)
    assert [type(r) for r in routes] == [InProcessRoute, GraphRoute]
    assert all(r.context is context for r in routes)
    assert repr(routes[0]) == "<InProcessRoute 'in-process'>"
    assert InProcessRoute.records_own_outcome and InProcessRoute.starts_groups
    assert not GraphRoute.records_own_outcome and not GraphRoute.holds_copies
    assert DirectScatterRoute.holds_copies
    base = Transport(context)  # the base carries everything and starts nothing
    assert base.prepare(_entry(), "x") == "x" and base.submit_group([(_entry(), "x")]) is None
    with pytest.raises(NotImplementedError):
        base.submit(_entry(), "x")


def test_register_refuses_a_route_without_a_name():
    class Nameless(Transport):
        pass

    with pytest.raises(TypeError, match="Nameless needs a name"):
        register(Nameless)


def test_a_registered_route_takes_its_place_by_priority():
    class Between(Transport):
        name, priority = "test-between", 50

        @classmethod
        def usable(cls, traits):
            return not traits.in_process

    assert register(Between) is Between  # a class decorator
    try:
        traits = ClusterTraits(False, False, True)
        names = [cls.name for cls in route_classes(traits)]
        assert names == ["shared-memory", "direct-scatter", "test-between", "graph"]
        assert "test-between" not in [c.name for c in route_classes(ClusterTraits(True, True, False))]
    finally:
        unregister("test-between")
    assert "test-between" not in [cls.name for cls in route_classes(traits)]


def test_task_keys_name_run_task_and_attempt():
    entry = _entry(task=7, run="r1", kind="train")
    assert (task_key_prefix(entry), task_key(entry)) == ("labkit-train-r1-7-", "labkit-train-r1-7-1")
    entry.attempts = 3
    assert task_key(entry) == "labkit-train-r1-7-3"
    assert not task_key(_entry(task=70)).startswith(task_key_prefix(entry))


@pytest.mark.parametrize("run", ["r1", "tasks-1a2b", "a-b-c-d"])
def test_task_of_key_reads_the_task_back_whatever_the_run_is_called(run):
    entry = _entry(task=42, run=run)
    entry.attempts = 2
    assert task_of_key(task_key(entry)) == 42


@pytest.mark.parametrize("key", ["other", "a-b-c", ("x", 0), 5, ""])
def test_task_of_key_is_none_for_other_keys(key):
    assert task_of_key(key) is None


def test_direct_bytes_are_smaller_once_a_worker_is_on_another_host():
    local = ["tcp://127.0.0.1:4000", "inproc://10.0.0.5/1/2", "tcp://localhost:1"]
    assert direct_bytes_for(local) == 2**20
    assert direct_bytes_for(local + ["tcp://10.0.0.5:4000"]) == 2**16
    assert direct_bytes_for({"tcp://127.0.0.1:1": 2}) == 2**20  # a client's nthreads()


class Recording(Transport):
    """A route that records what it submits; ``carries=False``: it takes no chunk."""

    name = "test-recording"

    def __init__(self, context, carries=True):
        super().__init__(context)
        self.carries, self.sent = carries, []

    def prepare(self, entry, data):
        return ("prepared", data) if self.carries else PASS

    def submit(self, entry, payload):
        self.sent.append((task_key(entry), payload))
        return "handle"


def test_resubmit_prepares_the_same_chunk_again_and_submits_it():
    route, entry = Recording(_context()), _entry(data="chunk")
    entry.attempts = 2
    assert route.resubmit(entry) == "handle"
    assert route.sent == [("labkit-train-r1-7-2", ("prepared", "chunk"))]


def test_resubmit_refuses_a_chunk_the_route_no_longer_carries():
    route, entry = Recording(_context(), carries=False), _entry(chunk=5, data="chunk")
    with pytest.raises(RuntimeError, match="test-recording route no longer carries chunk 5"):
        route.resubmit(entry)
    assert route.sent == []


@pytest.mark.parametrize("route_class", [InProcessRoute, GraphRoute])
def test_a_lazy_block_is_computed_inside_the_task_and_an_array_goes_as_it_is(route_class):
    route, chunk = route_class(_context()), np.ones((4, 2))
    assert route.prepare(_entry(), chunk) is chunk
    lazy = route.prepare(_entry(), da.arange(8, chunks=4).to_delayed().ravel()[1])
    assert isinstance(lazy, LazyChunk)
    np.testing.assert_array_equal(lazy.materialize(), [4, 5, 6, 7])
    made = route.prepare(_entry(), dask.delayed(np.ones)(3))
    np.testing.assert_array_equal(made.materialize(), np.ones(3))


def test_direct_scatter_takes_only_chunks_of_direct_bytes_or_more():
    route = DirectScatterRoute(_context(direct_bytes=1000))
    assert route.prepare(_entry(nbytes=999), "small") is PASS
    assert route.prepare(_entry(nbytes=1000), "big") == "big"


@pytest.fixture(scope="module")
def threads():
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        yield s


def test_a_threads_scheduler_hands_chunks_by_reference_first(threads):
    assert threads.in_process
    assert [r.name for r in threads.routes] == EXPECTED[(True, True, False)]
    assert threads.route("in-process") is threads.routes[0]
    assert threads.route("shared-memory") is None and threads.route("direct-scatter") is None
    assert threads.direct_bytes == 2**20


def test_a_block_of_data_on_the_cluster_goes_by_the_graph_not_in_process(threads):
    stored = threads.client.persist(da.arange(8, chunks=4))
    block = stored.to_delayed().ravel()[1]
    assert threads.route("in-process").prepare(_entry(), block) is PASS
    assert threads.route("graph").prepare(_entry(), block) is block
    lazy = da.arange(8, chunks=4).to_delayed().ravel()[0]
    threads.add_task(block, lambda x: int(x.sum()))
    threads.add_task(lazy, lambda x: int(x.sum()))
    assert sorted(threads.get_results()) == [6, 22]


def test_threads_with_pickled_inputs_use_only_the_graph():
    class Pickling(lk.DaskScheduler):
        inputs_by_reference = False

    with Pickling(mode="threads", n_workers=1, threads_per_worker=2, shared_memory=True) as s:
        assert [r.name for r in s.routes] == ["graph"]
        assert s.route("in-process") is None
        s.add_task(np.arange(3.0), lambda x: float(x.sum()))
        assert s.get_results() == [3.0]


def test_worker_processes_use_shared_memory_then_direct_scatter_then_the_graph():
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        assert not s.in_process
        assert [r.name for r in s.routes] == EXPECTED[(False, True, True)]
        assert s.route("in-process") is None
        shared, direct, graph = s.routes
        small = np.ones(4)
        entry = _entry(task=10**6, nbytes=small.nbytes)
        assert shared.prepare(entry, small) is PASS and direct.prepare(entry, small) is PASS
        assert graph.prepare(entry, small) is small
        big = np.ones(SHARE_BYTES // 8 * 2)
        entry = _entry(task=10**6 + 1, nbytes=big.nbytes)
        try:
            assert isinstance(shared.prepare(entry, big), SharedChunk)
        finally:
            shared.release(entry)
        assert direct.prepare(_entry(nbytes=s.direct_bytes), b"x") == b"x"
        s.add_task(small, np.sum)
        s.add_task(big, np.sum)
        assert sorted(s.get_results()) == [4.0, float(big.size)]
