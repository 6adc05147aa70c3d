"""A sweep's trials as the tasks a scheduler's views count: each running trial a busy slot.

A sweep runs its trials as slots (one long task a slot, taking trial after
trial) or as tasks of their own submitted straight to Dask; neither tells a
scheduler's views of a task, so a dashboard would read "0 tasks" and idle
workers while trials run.  :class:`TrialTasks` turns the sweep's trial
events into the task events those views fold (:class:`~labkit.events.TaskStarted`,
:class:`~labkit.events.TaskFinished`, :class:`~labkit.events.TaskFailed`),
one task a trial's execution on its worker, so a worker's load, its
running and done counts, the task stream and the run's progress are true
while trials run.  A trial is named on a worker by its address (the slot,
``#n``, left out), as every other task is.  A trial that waits to run again
(:class:`~labkit.events.TrialRequeued`: a PBT member paused, or exploiting)
ends its task there; its next start is a new task, so a timeline shows each
execution as a bar of its own, not one bar over the wait.

Examples
--------
>>> from labkit.events import TrialStarted
>>> tasks = TrialTasks()
>>> [e] = tasks(TrialStarted("sweep-1", 3, {}, "inproc://10.0.0.1/1/2 #0", time=5.0))
>>> type(e).__name__, e.worker, e.info.kind, e.info.chunk, e.info.task < 0
('TaskStarted', 'inproc://10.0.0.1/1/2', 'trial', 3, True)
"""

from __future__ import annotations

import threading
import time
from typing import NamedTuple

from ...events import (
    RunStarted,
    TaskFailed,
    TaskFinished,
    TaskInfo,
    TaskStarted,
    TrialFinished,
    TrialRequeued,
    TrialStarted,
)

__all__ = ["TrialTasks", "worker_of"]


class _Ended(NamedTuple):
    """A trial that ended, as :meth:`TrialTasks.finished` reads a record."""

    id: int
    status: str
    worker: str | None
    started: float | None
    ended: float | None
    error: str | None


def worker_of(worker: str | None) -> str:
    """A trial's worker as a device is named: its address without the slot (``local`` for none)."""
    return (worker or "local").split(" #")[0]


class TrialTasks:
    """Turns trial events into task events; call it with each event, fold what it returns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: dict[tuple, int] = {}  # (run, trial) -> a task id below every real one
        self._started: dict[tuple, tuple] = {}  # (run, trial) -> (worker, start)

    def __call__(self, event) -> list:
        """The task events of ``event`` (none for any other event)."""
        if isinstance(event, TrialStarted):
            return [self.started(event.run, event.trial, event.worker, event.time)]
        if isinstance(event, TrialFinished):
            return self.finished(event.run, event.record, event.time)
        if isinstance(event, TrialRequeued):
            return self.requeued(event.run, event.trial, event.time)
        return []

    def requeued(self, run: str, trial: int, when: float) -> list:
        """Trial ``trial`` of ``run`` stopped at ``when`` to run again later: its task ends."""
        with self._lock:
            begun = self._started.pop((run, trial), None)
            info = self._info(run, trial)
        if begun is None:  # not running here (requeued before it started): nothing to end
            return []
        worker, start = begun
        return [TaskFinished(info, worker, start, max(when, start))]

    def started(self, run: str, trial: int, worker: str | None, when: float) -> TaskStarted:
        """Trial ``trial`` of ``run`` runs on ``worker`` since ``when``."""
        with self._lock:
            self._started[(run, trial)] = (worker_of(worker), when)
            return TaskStarted(self._info(run, trial), worker_of(worker), when)

    def finished(self, run: str, record, when: float | None = None) -> list:
        """The trial ``record`` ended: a finished task, or a failed one."""
        with self._lock:
            worker, start = self._started.pop(
                (run, record.id), (worker_of(record.worker), record.started)
            )
            info = self._info(run, record.id)
        end = record.ended or when or time.time()
        start = start if start is not None else end
        if str(record.status) == "failed":
            return [TaskFailed(info, worker, start, end, "TrialFailed", record.error or "", None)]
        return [TaskFinished(info, worker, start, end)]

    def seed(self, run: str, started: float | None, name: str, timeline) -> list:
        """What a view opened late missed of ``run``: its start, and its trials so far
        (``timeline``: ``(id, status, worker, started, ended)`` of each that ran)."""
        now = time.time()
        events: list = [RunStarted(run, "sweep", 1, time=started or now, detail={"name": name})]
        for trial, status, worker, since, until in timeline:
            begun = self.started(run, trial, worker, since or until or now)
            if status == "running":
                events.append(begun)
            else:
                record = _Ended(trial, status, worker, since, until or now, None)
                events.extend(self.finished(run, record))
        return events

    def _info(self, run: str, trial: int) -> TaskInfo:
        task = self._ids.get((run, trial))
        if task is None:  # scheduler task ids count up from 0: these never meet them
            task = self._ids[(run, trial)] = -1 - len(self._ids)
        return TaskInfo(run, task, trial, kind="trial", node_name="trials")
