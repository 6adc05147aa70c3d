"""Packs: quick in-process tasks run several to one Dask task, as joblib batches them.

A Dask task costs about a millisecond of scheduler and worker bookkeeping
(``benchmarks/RESULTS.md``, issue 30).  A labkit task of a few microseconds
would spend nearly all its time there, so the in-process route measures how
long each callable's tasks take (:class:`TaskClock`) and, for a group of
tasks started together, packs enough of them into one Dask task to make it
last about :data:`PACK_SECONDS`.  Nothing else changes for a packed task: it
has its own key, reports its own start and records its own outcome as soon
as it ends; a task whose batch was cancelled before its turn in the pack
does not run.

Tasks that take long stay one to a Dask task, and a group always makes at
least :data:`MIN_PACKS` Dask tasks, so the cluster's threads still share it.

Examples
--------
>>> clock = TaskClock()
>>> clock.pack_size("f", 64)          # nothing measured yet: one task a Dask task
1
>>> for _ in range(20):
...     clock.observe("f", 0.00001)
>>> clock.pack_size("f", 64)          # 10 microseconds a task: as many as a group allows
16
>>> clock.observe("slow", 0.5); clock.pack_size("slow", 64)
1
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

from ..workers.reference import unwrap
from ..workers.running import run_task_here

__all__ = ["PACK_SECONDS", "MIN_PACKS", "TaskClock", "clock_key", "run_pack_here"]

#: How long a packed Dask task should last (about five times a Dask task's own cost).
PACK_SECONDS = 0.005
#: A group of tasks makes at least this many Dask tasks (to keep every thread busy).
MIN_PACKS = 4
_WEIGHT = 0.2  # of each new duration in the moving average
_MAX_CALLABLES = 256  # remembered; the clock forgets them all beyond that
_FLOOR = 1e-7  # s: the shortest time a task is taken to last (a log needs a positive one)


class TaskClock:
    """A moving average of how long the tasks of each callable take, on a log scale.

    A task's time is its wall time, and a thread descheduled on a loaded machine makes
    one task of 10 microseconds last 50 ms.  A plain average would take that one for a
    verdict (weighted 0.2, it made the mean 10 ms: no packing, 204 Dask tasks for 640
    tasks in a CI run); on a log scale it moves the mean five-fold, and tasks that truly
    take long reach their time in about ten observations.

    >>> clock = TaskClock()
    >>> for _ in range(20):
    ...     clock.observe("f", 0.00001)
    >>> clock.observe("f", 0.05)          # one stall
    >>> clock.pack_size("f", 640)         # still packed: 5 ms / 55 microseconds
    91
    >>> for _ in range(11):               # its tasks now take 10 ms each
    ...     clock.observe("f", 0.01)
    >>> clock.pack_size("f", 640)
    1
    """

    def __init__(self) -> None:
        self._log_seconds: dict[Hashable, float] = {}

    def observe(self, callable_id: Hashable, seconds: float) -> None:
        """One task of ``callable_id`` took ``seconds`` (any thread; races only blur it)."""
        mean = self._log_seconds.get(callable_id)
        if mean is None and len(self._log_seconds) >= _MAX_CALLABLES:
            self._log_seconds.clear()
        value = math.log(max(seconds, _FLOOR))
        self._log_seconds[callable_id] = value if mean is None else mean + _WEIGHT * (value - mean)

    def pack_size(self, callable_id: Hashable, n_tasks: int) -> int:
        """How many of ``n_tasks`` tasks of ``callable_id`` to run to one Dask task."""
        mean = self._log_seconds.get(callable_id)
        if mean is None:
            return 1
        most = max(1, n_tasks // MIN_PACKS)
        return max(1, min(most, int(PACK_SECONDS / math.exp(mean))))


def clock_key(task_callable) -> int:
    """What the clock times ``task_callable``'s tasks under: a plain function's tasks
    under the function (each batch wraps it anew), any other callable's under itself."""
    return id(getattr(task_callable, "fn", task_callable))


def run_pack_here(helds: list, infos: list, keys: list, task_callable, topic, offload) -> None:
    """Run the tasks of one pack in turn, each as :func:`~.running.run_task_here` would.

    A task whose batch no longer holds it open (a cancel) is passed over.
    """
    for held, info, key in zip(helds, infos, keys, strict=True):
        here: Any = unwrap(held)
        if here.is_open():
            run_task_here(here, info, task_callable, topic, offload=offload, key=key)
