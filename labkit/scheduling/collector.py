"""Taking a :class:`~labkit.scheduling.DaskScheduler`'s tasks back from Dask.

Two kinds of task come back two ways:

* a task on a worker process (or one that needs data on the cluster) is a
  Dask future whose result must be fetched: the collector's thread takes
  finished futures from one ``distributed.as_completed`` in batches and
  fetches each batch's results in one ``gather``;
* a task on a worker thread of this process records its own outcome
  before it returns (see :func:`~labkit.scheduling.task.run_task_here`), so
  there is nothing to fetch.  Its future is only watched, every
  :data:`WATCH_EVERY` seconds, for what can happen to it outside the task:
  a cancel, a lost worker, an input that could not be resolved.

Tracking an in-process task this way costs a dictionary entry instead of a
coroutine on the event loop and a round trip for its result (about 0.2 ms of
CPU a task on two cores, ``benchmarks/bench_core.py``).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from .batch import OpenTask

__all__ = ["Collector", "WATCH_EVERY"]

logger = logging.getLogger("labkit.scheduling")

#: Seconds between looks at the futures of tasks that record their own outcome.
WATCH_EVERY = 0.25


class Collector:
    """Follows the futures of open tasks until each task's outcome is recorded.

    Parameters
    ----------
    client : distributed.Client
    complete : callable
        ``complete(entry, outcome)`` records a fetched outcome.
    failed : callable
        ``failed(entry, future)`` handles a future that did not finish well.
    """

    def __init__(self, client, complete: Callable, failed: Callable):
        from distributed import as_completed
        self.client, self._complete, self._failed = client, complete, failed
        self._lock = threading.Lock()
        self._entries: dict[str, OpenTask] = {}   # future key -> its task
        self._watched: dict[str, object] = {}     # key -> future, for self-recording tasks
        self._completed = as_completed(loop=client.loop)
        self._cond = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="labkit-dask-collector")
        self._thread.start()

    # -- for the scheduler ---------------------------------------------------------------

    def fetch(self, items: list) -> None:
        """Fetch the outcomes of futures ``[(entry, future), ...]`` once they finish."""
        with self._lock:
            for entry, future in items:
                self._entries[future.key] = entry
        self._completed.update([future for _, future in items])
        with self._cond:
            self._cond.notify()

    def expect(self, items: list) -> None:
        """Tasks ``[(key, entry), ...]`` about to be submitted that record their own outcome."""
        with self._lock:
            for key, entry in items:
                self._entries[key] = entry

    def watch(self, futures: list) -> None:
        """Watch the futures of expected tasks that have not recorded their outcome yet."""
        with self._lock:
            for future in futures:
                if future.key in self._entries:
                    self._watched[future.key] = future
        with self._cond:
            self._cond.notify()

    def entry(self, key) -> OpenTask | None:
        """The open task of future ``key``, if it is followed."""
        return self._entries.get(key)

    def recorded(self, key) -> None:
        """The task of future ``key`` recorded its own outcome: stop following it."""
        with self._lock:
            self._entries.pop(key, None)
            self._watched.pop(key, None)

    def close(self) -> None:
        """Stop the thread (within its poll) and forget every future."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._completed.clear()
        self._thread.join(timeout=10)
        with self._lock:
            self._entries.clear()
            self._watched.clear()

    # -- the thread ------------------------------------------------------------------

    def _run(self) -> None:
        while self._wait():
            self._watch()
            self._drain()

    def _wait(self) -> bool:
        """Wait until a future is fetched, or a watched one is due a look; False when closing."""
        with self._cond:
            while self._completed.is_empty() and not self._stopping:
                if self._watched:
                    self._cond.wait(WATCH_EVERY)
                    break
                self._cond.wait()
            return not self._stopping

    def _watch(self) -> None:
        """Hand on watched futures that ended without their task recording an outcome."""
        with self._lock:
            ended = [(key, f) for key, f in self._watched.items() if f.status != "pending"]
            items = [(self._entries.pop(key, None), f) for key, f in ended]
            for key, _ in ended:
                self._watched.pop(key, None)
        self._hand_on([(e, f) for e, f in items if e is not None and e.is_open()])

    def _drain(self) -> None:
        """Handle fetched futures until none is left (a method: no batch outlives it)."""
        if self._completed.is_empty():
            return
        for futures in self._completed.batches():
            with self._lock:
                items = [(self._entries.pop(f.key, None), f) for f in futures]
            self._hand_on([(e, f) for e, f in items if e is not None and e.is_open()])
            if self._stopping:
                return

    def _hand_on(self, items: list) -> None:
        """Fetch what finished; hand the rest to the scheduler's fault handling."""
        try:
            done = [(e, f) for e, f in items if f.status == "finished"]
            if done:
                self._fetch(done)
            for entry, future in items:
                if future.status != "finished":
                    self._failed(entry, future)
        except Exception:  # never let the collector die: its tasks would hang
            logger.exception("labkit: the Dask collector failed on %d futures", len(items))

    def _fetch(self, items: list) -> None:
        """Gather ``items`` and record each; a failing gather falls back to one by one."""
        try:
            outcomes = self.client.gather([f for _, f in items])
        except BaseException:  # a result lost with its worker after it finished, say
            if len(items) > 1:
                for item in items:
                    self._fetch([item])
            else:
                self._failed(*items[0])
            return
        for (entry, _), outcome in zip(items, outcomes):
            self._complete(entry, outcome)
