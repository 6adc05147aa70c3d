"""A ``scheduler.cancel()`` from another thread never loses a later cycle's results.

The stress test (:mod:`tests.scheduling.test_stress`) once saw a thread's
direct tasks hand over 5 results for 7 tasks while other threads called
``s.cancel()``.  A cancel of a thread's default batch decided (under the
window's lock) what the batch lost, then asked the backend to cancel the
tasks (``client.cancel``: a round trip to the Dask scheduler, long under
load) and only then emptied the batch's result container.  Meanwhile the
owner had raised the cancel (or had had nothing to lose), started a new
cycle and got some of its results recorded: the late emptying threw those
away, and ``get_results()`` handed over the rest as if complete.

Here the canceller is held in the backend's cancel for as long as the
owner needs, with events: the interleaving is forced, not waited for.
"""

from __future__ import annotations

import threading

import pytest

import labkit as lk
from labkit.events import TaskFinished
from tests import helpers
from tests.clusters import scheduler_of


class HeldCancel:
    """Holds a ``s.cancel()`` made on its own thread inside the backend's ``cancel_tasks``
    (where a slow ``client.cancel`` keeps it under load) until released."""

    def __init__(self, s, monkeypatch):
        self.s = s
        self.inside, self.release = threading.Event(), threading.Event()
        backend_cancel = s.cancel_tasks

        def held(entries, handles):
            if threading.current_thread().name == "held-cancel":
                self.inside.set()
                assert self.release.wait(60), "the test never released the cancel"
            backend_cancel(entries, handles)

        monkeypatch.setattr(s, "cancel_tasks", held)
        self.thread = threading.Thread(target=s.cancel, name="held-cancel", daemon=True)

    def start(self) -> None:
        """Start the cancel; return once it is inside the backend's cancel."""
        self.thread.start()
        assert self.inside.wait(60), "the cancel never reached the backend"

    def finish(self) -> None:
        """Let the cancel go on, and wait until it has returned."""
        self.release.set()
        self.thread.join(60)
        assert not self.thread.is_alive()


class Finished:
    """Counts the scheduler's TaskFinished events (a result is recorded before its event)."""

    def __init__(self, s):
        self.n, self.cond = 0, threading.Condition()
        s.subscribe(self._on_event)

    def _on_event(self, event) -> None:
        if isinstance(event, TaskFinished):
            with self.cond:
                self.n += 1
                self.cond.notify_all()

    def wait_for(self, n: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: self.n >= n, timeout=60), (self.n, n)


def _scheduler(kind):
    """A LocalScheduler (tasks recorded in add_task) or an in-process DaskScheduler."""
    return lk.LocalScheduler() if kind == "local" else scheduler_of("auto")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["local", "auto"])
def test_a_cancel_that_found_nothing_to_lose_keeps_the_next_cycles_results(kind, monkeypatch):
    with _scheduler(kind) as s:
        finished = Finished(s)
        s.add_task(0, helpers.double)  # this thread's default batch, and its callable, exist
        assert s.get_results() == [0]
        cancel = HeldCancel(s, monkeypatch)
        cancel.start()  # it found nothing submitted: nothing lost, nothing to raise
        for v in (1, 2, 3):
            s.add_task(v, helpers.double)
        finished.wait_for(4)  # all three recorded while the cancel is still under way
        cancel.finish()
        assert sorted(s.get_results()) == [2, 4, 6]
        assert s.n_open_tasks == 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["local", "auto"])
def test_a_cancel_already_raised_keeps_the_next_cycles_results(kind, monkeypatch):
    with _scheduler(kind) as s:
        finished = Finished(s)
        s.add_task(0, helpers.double)
        finished.wait_for(1)
        cancel = HeldCancel(s, monkeypatch)
        cancel.start()  # the batch had a task not handed over: it is lost, its owner told
        with pytest.raises(lk.CancelledError):
            s.get_results()
        for v in (1, 2, 3):  # a new cycle, started after the cancel was raised
            s.add_task(v, helpers.double)
        finished.wait_for(4)
        cancel.finish()
        assert sorted(s.get_results()) == [2, 4, 6]
        assert s.n_open_tasks == 0
