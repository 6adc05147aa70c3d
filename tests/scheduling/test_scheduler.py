"""The scheduler verbs, the same on LocalScheduler and DaskScheduler."""

import logging
import pickle

import numpy as np
import pytest

import labkit as lk
from labkit.events import TaskFailed, TaskFinished, TaskStarted, TaskSubmitted
from tests import helpers


def test_add_task_and_get_results(scheduler):
    for x in range(5):
        scheduler.add_task(x, helpers.double)
    assert sorted(scheduler.get_results()) == [0, 2, 4, 6, 8]
    assert scheduler.n_open_tasks == 0
    assert scheduler.get_results() == []  # the container starts afresh


def test_task_callable_none_reuses_the_last_one(scheduler):
    scheduler.add_task(1, helpers.double)
    scheduler.add_task(2)
    assert sorted(scheduler.get_results()) == [2, 4]


def test_no_callable_at_all_is_a_clear_error(scheduler):
    with pytest.raises(lk.SchedulerError, match="task_callable"):
        scheduler.add_task(1)


def test_ordered_container_keeps_task_order_when_tasks_finish_out_of_order(scheduler):
    scheduler.result_container = lk.OrderedResultContainer()
    for x in range(6):
        scheduler.add_task(x, helpers.sleep_then_return)
    assert scheduler.get_results() == list(range(6))


def test_failing_task_raises_task_error_with_place_and_traceback(scheduler, recorder):
    scheduler.subscribe(recorder)
    with pytest.raises(lk.TaskError) as info:
        for x in range(5):
            scheduler.add_task(x, helpers.fail_on_two)
        scheduler.get_results()
    err = info.value
    assert err.original_type == "ZeroDivisionError"
    assert err.original_message == "chunk two is bad"
    assert err.where["chunk"] == 2
    assert "worker" in err.where
    assert "fail_on_two" in err.remote_traceback
    assert "chunk 2" in str(err)
    failed = recorder.of(TaskFailed)
    assert len(failed) == 1 and failed[0].error_type == "ZeroDivisionError"
    # usable afterwards, nothing left open
    assert scheduler.n_open_tasks == 0
    for x in range(3):
        scheduler.add_task(x, helpers.double)
    assert sorted(scheduler.get_results()) == [0, 2, 4]


def test_events_for_each_task(scheduler, recorder):
    scheduler.subscribe(recorder)
    for x in range(4):
        scheduler.add_task(x, helpers.double)
    scheduler.get_results()
    submitted = recorder.of(TaskSubmitted)
    finished = recorder.of(TaskFinished)
    assert sorted(e.info.task for e in submitted) == sorted(e.info.task for e in finished)
    assert len(finished) == 4
    assert all(e.start <= e.end for e in finished)
    started = recorder.of(TaskStarted)
    assert {e.info.task for e in started} <= {e.info.task for e in submitted}


def test_a_failing_subscriber_is_logged_not_fatal(scheduler, caplog):
    def broken(event):
        raise RuntimeError("view is broken")
    scheduler.subscribe(broken)
    with caplog.at_level(logging.ERROR, logger="labkit.events"):
        scheduler.add_task(3, helpers.double)
        assert scheduler.get_results() == [6]
    assert "view is broken" in caplog.text


def test_a_broken_subscriber_is_logged_once_for_each_kind_of_error(caplog):
    """A view that fails on every event would otherwise log a traceback per event."""
    def broken(event):
        raise RuntimeError("view is broken")
    with caplog.at_level(logging.ERROR, logger="labkit.events"), lk.LocalScheduler() as s:
        s.subscribe(broken)
        flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
        data = [np.random.default_rng(k).normal(size=(10, 3)) for k in range(20)]
        run = flow.train([data], scheduler=s, wait=False)
        run.subscribe(broken)                            # its replay of the run so far too
        run.result(30)
    logged = [r for r in caplog.records if "view is broken" in (r.exc_text or "")
              or (r.exc_info and "view is broken" in str(r.exc_info[1]))]
    assert len(logged) == 2, [r.getMessage() for r in logged]   # one per bus
    assert "further RuntimeError failures are not logged" in logged[0].getMessage()
    assert not flow[0].is_training()


def test_unsubscribe_stops_delivery(scheduler, recorder):
    unsubscribe = scheduler.subscribe(recorder)
    unsubscribe()
    scheduler.add_task(1, helpers.double)
    scheduler.get_results()
    assert recorder.events == []


def test_bounded_tasks_in_flight(scheduler):
    scheduler.max_in_flight = 2
    seen_open = []

    def chunks():
        for x in range(8):
            seen_open.append(scheduler.n_open_tasks)
            yield x

    for x in chunks():
        scheduler.add_task(x, helpers.sleep_then_return)
    scheduler.get_results()
    assert max(seen_open) <= 2


def test_shutdown_is_final_and_idempotent(scheduler):
    scheduler.shutdown()
    scheduler.shutdown()
    with pytest.raises(lk.SchedulerError, match="shut down"):
        scheduler.add_task(1, helpers.double)


def test_cancel_drops_open_tasks_and_the_owner_hears_of_it(scheduler):
    scheduler.add_task(0, helpers.sleep_then_return)
    scheduler.cancel()
    assert scheduler.n_open_tasks == 0
    with pytest.raises(lk.CancelledError, match="scheduler.cancel"):
        scheduler.get_results()  # no partial results handed over as if complete
    assert scheduler.get_results() == []  # the batch starts afresh


def test_task_error_survives_pickling():
    err = lk.TaskError("task failed", original_type="KeyError", original_message="'x'",
                       remote_traceback="Traceback ...", node=1, node_name="PCA", chunk=3)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is lk.TaskError
    assert back.where == {"node": 1, "node_name": "PCA", "chunk": 3}
    assert back.original_type == "KeyError" and back.remote_traceback == "Traceback ..."
    assert str(back) == "task failed [node 1 'PCA', chunk 3]"
