"""The scheduling and pipeline rooms' shape: no import circle, no private reach, declared contracts."""

from __future__ import annotations

import labkit as lk
from labkit.scheduling.tasks.open_task import TaskOwner
from labkit.scheduling.workers.offload import OffloadPool
from labkit.scheduling.workers.pools import RunsTasks, offload_pool
from labkit.scheduling.tasks.window import Window
from tests import architecture

ROOMS = ("labkit.scheduling", "labkit.pipeline")


def _in_rooms(name: str) -> bool:
    return name.startswith(ROOMS)


def test_no_import_circle_inside_scheduling_or_pipeline():
    found = [c for c in architecture.circles(architecture.graph()) if any(map(_in_rooms, c))]
    assert found == []


def test_no_private_reach_in_scheduling_or_pipeline():
    assert [r for r in architecture.private_reaches() if _in_rooms(r)] == []


def test_scheduling_and_pipeline_modules_and_functions_stay_short():
    assert not [m for m in architecture.long_modules() if _in_rooms(m)]
    assert not [f for f in architecture.long_functions() if _in_rooms(f)]


def test_a_batch_is_what_its_open_tasks_ask_of_their_owner():
    with lk.LocalScheduler() as s, s.batch() as batch:
        assert isinstance(batch, TaskOwner)
    assert not isinstance(object(), TaskOwner)


def test_an_offload_pool_is_found_by_its_token_until_it_closes():
    pool = OffloadPool(1)
    try:
        assert offload_pool(pool.token) is pool and isinstance(pool, RunsTasks)
        assert offload_pool(None) is None and offload_pool("labkit-offload-none") is None
    finally:
        pool.close()
    assert offload_pool(pool.token) is None and not pool.started


def test_a_share_counts_its_own_open_tasks_and_bytes():
    window = Window(max_in_flight=4, max_bytes_in_flight=100)
    owner = lk.LocalScheduler  # any object the window may weakly refer to
    share = window.join(owner)
    window.open(share, task=1, entry="a", nbytes=30)
    window.open(share, task=2, entry="b", nbytes=5)
    assert (share.owner, share.n_open, share.nbytes) == (owner, 2, 35)
    assert share.holds(1, "a") and not share.holds(1, "b")
    assert not share.remove(2, "a") and share.remove(2, "b") and share.nbytes == 30
    assert share.clear() == ["a"] and (share.n_open, share.nbytes) == (0, 0)
    assert window.owners() == [owner]
