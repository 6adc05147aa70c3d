"""Batches: each owner's tasks apart, sharing one scheduler at the same time."""

import threading
import time

import pytest

import labkit as lk
from tests import helpers


def test_batches_keep_their_results_apart(scheduler):
    with scheduler.batch() as a, scheduler.batch(lk.OrderedResultContainer()) as b:
        for x in range(4):
            a.add_task(x, helpers.double)
            b.add_task(100 + x, helpers.sleep_then_return)
        scheduler.add_task(7, helpers.double)   # the default batch, beside them
        assert sorted(a.get_results()) == [0, 2, 4, 6]
        assert b.get_results() == [100, 101, 102, 103]
    assert scheduler.get_results() == [14]
    assert scheduler.total_open_tasks == 0


def test_a_failing_task_fails_its_own_batch_only(scheduler):
    with scheduler.batch() as bad, scheduler.batch() as good:
        for x in range(4):
            good.add_task(x, helpers.double)
        with pytest.raises(lk.TaskError, match="chunk two is bad"):  # at add_task when local
            for x in range(4):
                bad.add_task(x, helpers.fail_on_two)
            bad.get_results()
        assert sorted(good.get_results()) == [0, 2, 4, 6]
        assert bad.n_open_tasks == 0
        bad.add_task(1, helpers.double)            # afresh after its error
        assert bad.get_results() == [2]


def test_cancel_of_one_batch_leaves_the_others(dask_scheduler):
    with dask_scheduler.batch() as a, dask_scheduler.batch() as b:
        for x in range(4):
            a.add_task(x, helpers.sleep_then_return)
            b.add_task(x, helpers.sleep_then_return)
        assert a.cancel() > 0
        with pytest.raises(lk.CancelledError, match="cancelled"):
            a.get_results()
        assert sorted(b.get_results()) == [0, 1, 2, 3]


def test_a_closed_batch_refuses_tasks_and_cancels_what_it_left_open(dask_scheduler):
    b = dask_scheduler.batch()
    b.add_task(0, helpers.sleep_then_return)
    b.close()
    assert b.n_open_tasks == 0 and dask_scheduler.total_open_tasks == 0
    with pytest.raises(lk.SchedulerError, match="closed"):
        b.add_task(1)


def test_batches_from_two_threads_run_at_the_same_time_not_in_turns(cluster):
    """A batch holding the whole window does not make a second one wait for its end."""
    with lk.DaskScheduler(cluster.scheduler_address, max_in_flight=4) as s:
        long_open = threading.Event()
        with s.batch() as slow:
            def fill():
                for _ in range(12):               # 12 x 0.5 s on 2 workers: about 3 s
                    slow.add_task(0.5, time.sleep)
                    long_open.set()
            thread = threading.Thread(target=fill)
            thread.start()
            assert long_open.wait(30)
            with s.batch() as quick:
                for x in range(3):
                    quick.add_task(x, helpers.double)
                assert sorted(quick.get_results()) == [0, 2, 4]
                assert slow.n_open_tasks > 0, "the quick batch waited for the slow one"
            thread.join(30)
            assert len(slow.get_results()) == 12


def test_a_chunk_that_cannot_be_shipped_names_itself_and_leaves_nothing_open(dask_scheduler):
    with dask_scheduler.batch() as b:
        b.add_task(1, helpers.double)
        with pytest.raises(lk.InputError, match=r"chunk 1 could not be sent.*lock") as info:
            b.add_task(threading.Lock())
        assert info.value.where["chunk"] == 1
        assert b.n_open_tasks <= 1                  # only the good one, if still running
        b.add_task(2)
        assert sorted(b.get_results()) == [2, 4]    # the good tasks are kept
    # the same on the scheduler's own verbs: nothing stays open, the next call works
    with pytest.raises(lk.InputError, match="nothing was submitted"):
        dask_scheduler.add_task(threading.Lock(), helpers.double)
    assert dask_scheduler.n_open_tasks == 0
    dask_scheduler.add_task(3)
    assert dask_scheduler.get_results() == [6]


def test_shutdown_makes_a_waiting_owner_raise(cluster):
    s = lk.DaskScheduler(cluster.scheduler_address)
    errors = []

    def owner():
        try:
            with s.batch() as b:
                for _ in range(4):
                    b.add_task(2.0, time.sleep)
                b.get_results()
        except lk.LabkitError as exc:
            errors.append(exc)

    thread = threading.Thread(target=owner)
    thread.start()
    deadline = time.monotonic() + 60
    while s.total_open_tasks == 0 and time.monotonic() < deadline:   # tasks under way
        time.sleep(0.02)
    s.shutdown()
    thread.join(30)
    assert not thread.is_alive()
    assert len(errors) == 1 and type(errors[0]) is lk.SchedulerError
    assert "shut down" in str(errors[0])


def test_a_failing_join_is_the_batch_error_naming_the_task(scheduler):
    class Picky(lk.ListResultContainer):
        def add_result(self, result, task_index):
            if result == 4:
                raise ValueError("no fours")
            super().add_result(result, task_index)

    with scheduler.batch(Picky()) as b:
        with pytest.raises(lk.TaskError, match="no fours") as info:
            for x in range(4):
                b.add_task(x, helpers.double)
            b.get_results()
    assert info.value.where["chunk"] == 2


def test_add_tasks_keeps_the_chunks_it_started_before_one_that_cannot_be_shipped(dask_scheduler):
    with dask_scheduler.batch() as b:
        with pytest.raises(lk.InputError, match=r"chunk 2 could not be sent") as info:
            b.add_tasks([1, 2, threading.Lock(), 4], helpers.double, ready=True)
        assert info.value.where["chunk"] == 2
        assert sorted(b.get_results()) == [2, 4]    # as add_task one by one would keep
