"""The in-flight window (labkit.scheduling.tasks.window): shares, room, open/close, waiting, limits.

One Window holds every batch's open tasks; each batch's Share gets an even
part of ``max_in_flight`` and ``max_bytes_in_flight`` among the batches that
have tasks open.  A task closes exactly once.
"""

from __future__ import annotations

import gc
import threading
import time

from labkit.scheduling.tasks.window import Share, Window


class Owner:
    """Stands in for a batch (a share's owner is held weakly)."""


def _fill(window: Window, share: Share, n: int, nbytes: int = 0, first: int = 0) -> list:
    entries = [f"t{i}" for i in range(first, first + n)]
    for i, entry in enumerate(entries, first):
        window.open(share, task=i, entry=entry, nbytes=nbytes)
    return entries


def _waiter(window: Window, ready) -> threading.Thread:
    thread = threading.Thread(target=window.wait, args=(ready,), daemon=True)
    thread.start()
    return thread


def test_an_empty_share_always_has_room_even_for_a_chunk_over_the_byte_limit():
    window = Window(max_in_flight=1, max_bytes_in_flight=10)
    share = window.join(Owner())
    assert isinstance(share, Share)
    assert window.has_room(share, nbytes=10_000)
    window.open(share, task=0, entry="big", nbytes=10_000)
    assert window.nbytes(share) == 10_000
    assert not window.has_room(share, nbytes=0)  # the big one runs alone


def test_a_lone_share_may_open_max_in_flight_tasks_and_no_more():
    window = Window(max_in_flight=4, max_bytes_in_flight=1000)
    share = window.join(Owner())
    for task in range(4):
        assert window.has_room(share, nbytes=1)
        window.open(share, task=task, entry=f"t{task}", nbytes=1)
    assert not window.has_room(share, nbytes=1)
    assert window.n_open(share) == window.total_open() == 4
    window.max_in_flight = 5  # a raised limit is read at the next question
    assert window.has_room(share, nbytes=1)


def test_the_byte_limit_counts_the_bytes_of_the_open_tasks():
    window = Window(max_in_flight=100, max_bytes_in_flight=100)
    share = window.join(Owner())
    window.open(share, task=0, entry="t0", nbytes=60)
    assert window.has_room(share, nbytes=40)
    assert not window.has_room(share, nbytes=41)
    window.open(share, task=1, entry="t1", nbytes=40)
    assert window.nbytes(share) == 100
    assert window.close(share, task=0, entry="t0")
    assert window.nbytes(share) == 40
    assert window.has_room(share, nbytes=60)


def test_a_task_closes_exactly_once():
    window = Window(max_in_flight=2, max_bytes_in_flight=100)
    share = window.join(None)
    window.open(share, task=0, entry="t0", nbytes=5)
    assert window.is_open(share, 0, "t0")
    assert window.close(share, task=0, entry="t0") is True
    assert window.close(share, task=0, entry="t0") is False
    assert not window.is_open(share, 0, "t0")
    assert (window.n_open(share), window.nbytes(share), window.total_open()) == (0, 0, 0)


def test_an_older_entry_of_the_same_task_neither_closes_nor_counts_as_open():
    window = Window(max_in_flight=2, max_bytes_in_flight=100)
    share = window.join(None)
    old, new = object(), object()
    window.open(share, task=7, entry=new, nbytes=3)
    assert not window.is_open(share, 7, old)
    assert window.close(share, task=7, entry=old) is False
    assert window.is_open(share, 7, new) and window.n_open(share) == 1
    assert window.close(share, task=8, entry=new) is False  # not a task of the share


def test_clear_closes_every_open_task_and_returns_their_entries():
    window = Window(max_in_flight=8, max_bytes_in_flight=100)
    share = window.join(Owner())
    entries = _fill(window, share, 3, nbytes=10)
    assert sorted(window.clear(share)) == sorted(entries)
    assert (window.n_open(share), window.nbytes(share)) == (0, 0)
    assert not any(window.close(share, i, e) for i, e in enumerate(entries))
    assert window.clear(share) == []


def test_two_busy_batches_share_the_task_limit_evenly():
    window = Window(max_in_flight=4, max_bytes_in_flight=1000)
    a, b = window.join(Owner()), window.join(Owner())
    _fill(window, a, 3)
    assert window.has_room(a, 0)  # b has nothing open: a's part is all 4
    window.open(b, task=100, entry="b0", nbytes=0)
    assert not window.has_room(a, 0)  # two busy shares: 2 each, and a holds 3
    assert window.has_room(b, 0)
    window.open(b, task=101, entry="b1", nbytes=0)
    assert not window.has_room(b, 0)
    assert window.total_open() == 5


def test_two_busy_batches_share_the_byte_limit_evenly():
    window = Window(max_in_flight=100, max_bytes_in_flight=100)
    a, b = window.join(Owner()), window.join(Owner())
    window.open(a, task=0, entry="a0", nbytes=30)
    assert window.has_room(a, nbytes=70)
    window.open(b, task=1, entry="b0", nbytes=10)
    assert window.has_room(a, nbytes=20) and not window.has_room(a, nbytes=21)
    assert window.has_room(b, nbytes=40) and not window.has_room(b, nbytes=41)


def test_a_batch_that_leaves_gives_its_part_to_the_others():
    window = Window(max_in_flight=4, max_bytes_in_flight=1000)
    a, b = window.join(Owner()), window.join(Owner())
    _fill(window, a, 2)
    _fill(window, b, 1, first=10)
    assert not window.has_room(a, 0)
    window.leave(b)
    assert window.has_room(a, 0)
    assert window.total_open() == 2  # b's open task is no longer counted


def test_spare_asks_room_for_more_tasks_once_the_part_is_large_enough():
    window = Window(max_in_flight=16, max_bytes_in_flight=10**6)
    share = window.join(Owner())
    _fill(window, share, 13)
    assert window.has_room(share, 0, spare=2)  # 13 + 2 < 16
    window.open(share, task=13, entry="t13", nbytes=0)
    assert window.has_room(share, 0) and not window.has_room(share, 0, spare=2)
    assert window.has_room(share, 0, spare=1)
    # spare is capped at an eighth of the part: asking for 63 spare asks for 2
    assert not window.has_room(share, 0, spare=63)
    small = Window(max_in_flight=4, max_bytes_in_flight=10**6)
    other = small.join(Owner())
    _fill(small, other, 3)
    assert small.has_room(other, 0, spare=63)  # a part of 4 leaves no spare


def test_owners_lists_the_live_owners_and_forgets_dropped_ones():
    window = Window(max_in_flight=2, max_bytes_in_flight=100)
    kept, dropped = Owner(), Owner()
    shares = [window.join(kept), window.join(dropped), window.join(None)]
    assert set(map(id, window.owners())) == {id(kept), id(dropped)}
    del dropped
    gc.collect()
    assert window.owners() == [kept]
    window.leave(shares[0])
    assert window.owners() == []
    _fill(window, shares[1], 2)
    assert window.total_open() == 2
    del shares  # a share its batch dropped leaves the window
    gc.collect()
    assert window.total_open() == 0


def test_a_full_window_waits_until_a_task_closes():
    window = Window(max_in_flight=1, max_bytes_in_flight=100)
    share = window.join(Owner())
    window.open(share, task=0, entry="t0", nbytes=1)
    thread = _waiter(window, lambda: window.has_room(share, 1))
    thread.join(0.2)
    assert thread.is_alive()
    assert window.close(share, task=0, entry="t0")
    thread.join(5)
    assert not thread.is_alive()


def test_clear_and_leave_wake_the_waiters_too():
    for release in (Window.clear, Window.leave):
        window = Window(max_in_flight=1, max_bytes_in_flight=100)
        share = window.join(Owner())
        window.open(share, task=0, entry="t0", nbytes=1)
        thread = _waiter(window, lambda: window.total_open() == 0)
        thread.join(0.1)
        assert thread.is_alive()
        release(window, share)
        thread.join(5)
        assert not thread.is_alive(), release.__name__


def test_notify_wakes_a_waiter_whose_condition_changed_elsewhere():
    window = Window(max_in_flight=1, max_bytes_in_flight=100)
    flag, checked = [False], threading.Event()

    def ready():
        checked.set()
        return flag[0]

    thread = _waiter(window, ready)
    assert checked.wait(5)
    with window.lock:  # held only once the waiter is in wait(): it released the lock
        flag[0] = True
    time.sleep(0.1)
    assert thread.is_alive()  # nothing told it to look again
    window.notify()
    thread.join(5)
    assert not thread.is_alive()
