"""Connecting while the scheduler tells every client something (another client's cancel)."""

from __future__ import annotations

import asyncio
import time

import pytest
from distributed import LocalCluster
from distributed.diagnostics.plugin import SchedulerPlugin

import labkit as lk
from labkit.scheduling.dask.connect import connect


class CrossHandshakes(SchedulerPlugin):
    """A scheduler plugin: the next ``times`` new clients get a message of everyone's
    batched with their ``stream-start``, as another client's cancel can be."""

    name = "cross-handshakes"

    def __init__(self, times: int):
        self.left, self.clients = times, 0
        self.stall = 0.0   # once no crossing is left: seconds each new client's greeting waits
        self.late = 0.0    # seconds each crossed greeting waits

    def add_client(self, scheduler, client):
        self.clients += 1
        if self.left <= 0 and self.stall:
            time.sleep(self.stall)   # holds the scheduler's loop: the greeting comes late
        if self.left > 0:
            time.sleep(self.late)
            self.left -= 1
            # runs once add_client has queued stream-start, before the batch is flushed
            asyncio.get_running_loop().call_soon(
                scheduler.report, {"op": "cancelled-keys", "keys": [], "reason": "elsewhere"})


@pytest.fixture
def crossing_cluster():
    """A one-worker cluster of threads whose scheduler crosses handshakes when told."""
    plugin = CrossHandshakes(0)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster:
        cluster.sync(_add_plugin, cluster.scheduler, plugin)
        yield cluster, plugin


async def _add_plugin(scheduler, plugin):
    """Add ``plugin`` to ``scheduler`` on its own loop."""
    scheduler.add_plugin(plugin)


def _clients_settle(scheduler, expected: set, seconds: float = 30) -> bool:
    """Whether the scheduler's clients (but its fire-and-forget one) come to be ``expected``."""
    deadline = time.monotonic() + seconds
    while set(scheduler.clients) - {"fire-and-forget"} != expected:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_dask_own_client_fails_a_crossed_handshake(crossing_cluster):
    """The race is real: Dask's client asserts on a first batch of two messages."""
    from distributed import Client
    cluster, plugin = crossing_cluster
    plugin.left = 1
    before = set(Client._instances)
    with pytest.raises(AssertionError):
        Client(cluster.scheduler_address, timeout=5, set_as_default=False)
    assert plugin.left == 0 and set(Client._instances) <= before


def test_connect_tries_a_crossed_handshake_again(crossing_cluster):
    cluster, plugin = crossing_cluster
    plugin.left, seen = 2, plugin.clients
    client = connect(cluster.scheduler_address, timeout=10)
    try:
        assert plugin.left == 0 and plugin.clients == seen + 3   # two crossed, one whole
        assert client.status == "running"
        assert client.submit(sum, [1, 2, 3]).result(timeout=30) == 6
        assert _clients_settle(cluster.scheduler, {client.id})   # the crossed ones left
    finally:
        client.close()


def test_a_scheduler_crossing_every_handshake_is_a_scheduler_error_and_leaves_nothing_open(
        crossing_cluster):
    cluster, plugin = crossing_cluster
    plugin.left = 10 ** 6
    # other tests of this process may hold clients of their own: only new ones count
    open_before, default_before = _open_clients(), _default_client()
    with pytest.raises(lk.SchedulerError,
                       match=r"cannot reach a Dask scheduler at .* within 1 s \(the scheduler's "
                             r"first message came batched with another client's\)"):
        connect(cluster.scheduler_address, timeout=1)
    assert plugin.clients > 2
    assert _clients_settle(cluster.scheduler, set())
    assert _open_clients() <= open_before
    assert _default_client() is default_before   # no half-made client left as the default


def test_a_last_try_that_runs_out_of_time_after_crossed_ones_still_says_they_crossed(
        crossing_cluster):
    """The scheduler answered every try but the last, whose greeting came after the timeout:
    "no answer" would send the user to check a scheduler that did answer."""
    cluster, plugin = crossing_cluster
    plugin.left, plugin.stall = 2, 1.5
    started = time.monotonic()
    with pytest.raises(lk.SchedulerError,
                       match=r"within 1 s \(the scheduler's first message came batched with "
                             r"another client's\)") as caught:
        connect(cluster.scheduler_address, timeout=1)
    assert plugin.left == 0 and plugin.clients >= 3   # two crossed, then the one left waiting
    assert "no answer" not in str(caught.value)
    assert time.monotonic() - started < 30
    plugin.stall = 0.0
    assert _clients_settle(cluster.scheduler, set())


def test_the_timeout_bounds_the_whole_connect_not_each_try(crossing_cluster):
    """A try after a late crossed greeting gets the time left, not the whole timeout again:
    with 2 s given, the first greeting crosses at 1.5 s and the next never comes in time,
    so a second try of its own 2 s would end at 3.5 s at the earliest."""
    cluster, plugin = crossing_cluster
    plugin.left, plugin.late, plugin.stall = 1, 1.5, 5.0
    started = time.monotonic()
    with pytest.raises(lk.SchedulerError,
                       match=r"within 2 s \(the scheduler's first message came batched with "
                             r"another client's\)"):
        connect(cluster.scheduler_address, timeout=2)
    elapsed = time.monotonic() - started
    assert plugin.left == 0 and plugin.clients == 2      # one crossed, one left waiting
    assert elapsed < 3.0, f"connect took {elapsed:.1f} s with a timeout of 2 s"
    plugin.stall = 0.0
    assert _clients_settle(cluster.scheduler, set())


def _open_clients() -> set:
    """The ids of this process's Dask clients that are not closed."""
    from distributed import Client
    return {id(c) for c in list(Client._instances) if c.status != "closed"}


def _default_client():
    """This process's default Dask client, or None."""
    from distributed.client import default_client
    try:
        return default_client()
    except ValueError:
        return None


def test_a_dask_scheduler_by_address_survives_a_crossed_handshake(crossing_cluster):
    """As after another client's shutdown cancelled its tasks on a shared scheduler."""
    cluster, plugin = crossing_cluster
    plugin.left = 1
    with lk.DaskScheduler(cluster.scheduler_address) as s:
        assert plugin.left == 0
        s.add_task(3, _square)
        assert s.get_results() == [9]


def _square(x):
    """A task."""
    return x * x
