"""Polls a Dask cluster's own view of its workers, for the dashboards.

A labkit scheduler only hears about the tasks it submitted itself; the
cluster knows more (memory of every worker, tasks executing for anyone).
:class:`ClusterSampler` asks the scheduler for its identity once a ``interval``
and turns each worker into a :class:`~labkit.events.DeviceStats` event for a
tracker (or any event sink); the count of executing tasks, which no event
carries, is kept for :meth:`ClusterSampler.executing`, and the count of
workers at each change (workers leaving and joining: a retirement, a
lifetime's end, ``scale``, ``adapt``) for :meth:`ClusterSampler.workers_over_time`.

Examples
--------
>>> class FakeScheduler:
...     def identity(self, n_workers=-1):
...         return {"workers": {"tcp://w1": {"memory_limit": 100, "nthreads": 2,
...                                           "metrics": {"memory": 40, "executing": 1}}}}
>>> class FakeClient:
...     scheduler = FakeScheduler()
...     def sync(self, fn, callback_timeout=None, **kw):
...         return fn(**kw)
>>> seen = []
>>> s = ClusterSampler(FakeClient(), seen.append)
>>> s.sample()
>>> seen[0].device, seen[0].memory, seen[0].memory_limit, s.executing()
('tcp://w1', 40, 100, {'tcp://w1': (1, 2)})
>>> [n for _, n in s.workers_over_time()]
[1]
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ...events import DeviceStats
from ...scheduling.dask.connect import scheduler_identity
from ..priority import lower_this_thread

__all__ = ["ClusterSampler", "COUNTS_KEPT"]

#: The changes of the worker count a sampler keeps (the oldest go first).
COUNTS_KEPT = 2000

logger = logging.getLogger("labkit.views")


class ClusterSampler:
    """Emits ``DeviceStats`` for each Dask worker every ``interval`` seconds.

    Parameters
    ----------
    client : distributed.Client
        The client to ask.
    sink : callable
        Called with each event (a :class:`~labkit.views.trackers.tracker.Tracker`, say).
    interval : float
        Seconds between polls.
    """

    def __init__(self, client, sink: Callable[[Any], Any], interval: float = 1.0):
        self.client = client
        self.sink = sink
        self.interval = interval
        self._executing: dict[str, tuple[int, int]] = {}
        self._counts: deque = deque(maxlen=COUNTS_KEPT)  # (time, workers) at each change
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> ClusterSampler:
        """Poll in a daemon thread until :meth:`stop`."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._loop, daemon=True, name="labkit-cluster-sampler"
            )
            self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop polling and wait for the thread."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def executing(self) -> dict[str, tuple[int, int]]:
        """Worker address -> (tasks executing, threads), as last polled."""
        return dict(self._executing)

    def workers_over_time(self) -> list[tuple[float, int]]:
        """``[(time, workers), ...]``: the count of workers at each change (the first poll's too)."""
        return list(self._counts)

    def sample(self) -> None:
        """Poll once and emit one event per worker."""
        info = scheduler_identity(self.client)
        executing = {}
        for address, w in info.get("workers", {}).items():
            metrics = w.get("metrics", {})
            executing[address] = (
                int(metrics.get("executing", 0) or 0),
                int(w.get("nthreads", 0) or 0),
            )
            self.sink(
                DeviceStats(
                    address,
                    kind="worker",
                    memory=metrics.get("memory"),
                    memory_limit=w.get("memory_limit") or None,
                )
            )
        self._executing = executing
        if not self._counts or self._counts[-1][1] != len(executing):  # one joined or left
            self._counts.append((time.time(), len(executing)))

    def _loop(self) -> None:
        lower_this_thread()
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception as exc:  # the cluster may be busy or gone; try again later
                if self._stop.is_set():
                    return
                logger.debug("labkit cluster sampler: %s: %s", type(exc).__name__, exc)
            self._stop.wait(self.interval)
