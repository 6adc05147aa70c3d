"""Task outcomes of a :class:`~labkit.scheduling.DaskScheduler`: one path, one thread, one order.

Whatever route a task took (:mod:`.transport`), what became of it arrives
here and is handed to its batch by one thread, ``labkit-outcomes``, in the
order it arrived:

* a task on a worker thread of this process hands over its outcome itself,
  right where it ran (:meth:`Outcomes.deliver`): nothing is fetched back;
* a task on a worker process is a Dask future: when it is done (Dask's
  public ``add_done_callback``), the thread fetches the results of the
  futures done together in one ``gather``;
* a route that could not send a chunk (a worker died under its copy)
  reports it (:meth:`Outcomes.fault`);
* the futures of in-process tasks are looked at every :data:`WATCH_EVERY`
  seconds (their ``status``) for what can happen to them outside the task:
  a cancel, an input that could not be resolved;
* once the client is closed, every future still pending is handed on as
  failed: Dask cancels the futures it holds when its client closes, but not
  one submitted while it was closing, which would stay pending for ever.

The thread records results (``record``), and hands futures that did not
finish well to the scheduler's fault classification (``failed``) and chunks
that could not be sent to ``failed_to_send``; those may start a task again,
from this same thread.  Tracking an in-process task costs a dictionary entry
and a queue item, not a coroutine on the event loop and a round trip.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["Outcomes", "WATCH_EVERY"]

logger = logging.getLogger("labkit.scheduling")

#: Seconds between looks at the futures of tasks that record their own outcome.
WATCH_EVERY = 0.25

_STOP = ("stop", None, None, None, None)


class Outcomes:
    """The one thread through which every task outcome reaches its batch.

    Parameters
    ----------
    client : distributed.Client
    record : callable
        ``record(entry, outcome=None, error=None)``: the task's outcome, recorded.
    failed : callable
        ``failed(entry, future)``: a future that did not finish well (a fault).
    failed_to_send : callable
        ``failed_to_send(entry, exc)``: a route could not send the task's chunk.
    """

    def __init__(self, client, record: Callable, failed: Callable, failed_to_send: Callable):
        self.client = client
        self._record, self._failed, self._failed_to_send = record, failed, failed_to_send
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._entries: dict[str, Any] = {}  # key -> its open task, while followed
        self._watched: dict[str, Any] = {}  # key -> future, of tasks that record themselves
        self._followed: dict[str, Any] = {}  # key -> future, of tasks fetched when done
        self._thread = threading.Thread(target=self._run, daemon=True, name="labkit-outcomes")
        self._thread.start()

    # -- what the routes call (any thread) --------------------------------------------------

    def expect(self, items: list) -> None:
        """Tasks ``[(key, entry), ...]`` about to start that will deliver their own outcome."""
        with self._lock:
            self._entries.update(items)

    def watch(self, futures: list) -> None:
        """Look now and then at the futures of expected tasks not delivered yet."""
        self.watch_keys([(future.key, future) for future in futures])

    def watch_keys(self, pairs: list) -> None:
        """Watch ``[(key, future), ...]``: the tasks of a pack share one future."""
        with self._lock:
            for key, future in pairs:
                if key in self._entries:
                    self._watched[key] = future

    def still_open(self, entry) -> Callable[[], bool]:
        """A function saying whether ``entry`` is still open (it holds ``entry`` weakly)."""
        ref = weakref.ref(entry)

        def is_open() -> bool:
            held = ref()
            return held is not None and held.is_open()

        return is_open

    def deliverer(self, entry, key: str) -> Callable:
        """The function an in-process task calls with its outcome (it holds ``entry`` weakly)."""
        return functools.partial(self._deliver_weak, weakref.ref(entry), key)

    def deliver(self, entry, key: str | None = None, outcome=None, error=None) -> None:
        """``entry``'s outcome (or error), handed over where the task ran."""
        self._queue.put(("done", entry, key, outcome, error))

    def follow(self, entry, future) -> None:
        """Fetch ``future``'s result for ``entry`` once it is done."""
        with self._lock:
            self._entries[future.key] = entry
            self._followed[future.key] = future
        future.add_done_callback(functools.partial(self._future_done, entry))

    def fault(self, entry, exc: BaseException) -> None:
        """A route could not send ``entry``'s chunk."""
        self._queue.put(("fault", entry, None, None, exc))

    def entry(self, key) -> Any:
        """The open task of future ``key``, while it is followed."""
        return self._entries.get(key)

    def watched(self) -> list:
        """The futures watched now (of tasks that deliver their own outcome)."""
        with self._lock:
            return list(self._watched.values())

    @property
    def followed(self) -> int:
        """How many futures are followed or watched now."""
        with self._lock:
            return len(self._entries) + len(self._watched)

    def close(self) -> None:
        """Stop the thread after what is queued, and forget every future."""
        self._queue.put(_STOP)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)
        with self._lock:
            self._entries.clear()
            self._watched.clear()
            self._followed.clear()

    # -- feeding the queue ----------------------------------------------------------------------

    def _deliver_weak(self, entry_ref, key: str, outcome=None, error=None) -> None:
        entry = entry_ref()
        if entry is not None:
            self.deliver(entry, key, outcome, error)

    def _future_done(self, entry, future) -> None:
        """On Dask's callback thread: queue the done future."""
        self._queue.put(("future", entry, future.key, future, None))

    # -- the thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        next_look = time.monotonic() + WATCH_EVERY
        while True:
            now, ended = time.monotonic(), []
            if now >= next_look:
                # Before taking the queue: a task delivers before its future ends, so
                # the delivery of whatever has ended by now is queued already.
                ended, next_look = self._ended(), now + WATCH_EVERY
            items = self._take(max(0.0, next_look - now))
            stop = _STOP in items
            try:
                self._handle([item for item in items if item is not _STOP])
                self._fail_ended(ended)
            except Exception:  # never let this thread die: its tasks would hang
                logger.exception("labkit: handling %d task outcomes failed", len(items))
            # Nothing of these may stay referenced while the thread waits: a task's entry
            # holds its batch, and so the batch's shipped callable on the cluster.
            items = ended = []
            if stop:
                return

    def _fail_ended(self, ended: list) -> None:
        """Hand on the watched tasks that ended without delivering (a cancel, a lost input)."""
        for entry, future in ended:
            if entry.is_open():
                self._failed(entry, future)

    def _take(self, timeout: float) -> list:
        """What is queued: waits up to ``timeout`` s for the first item."""
        try:
            items = [self._queue.get(timeout=timeout)]
        except queue.Empty:
            return []
        while len(items) < 1024:
            try:
                items.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return items

    def _ended(self) -> list:
        """Watched futures that are no longer pending, with their tasks; no longer watched.

        Once the client is closed, every future is taken, pending or not: one submitted
        while the client closed was never cancelled and would never end."""
        orphaned = self.client.status == "closed"
        with self._lock:
            ended = [
                (key, f) for key, f in self._watched.items() if orphaned or f.status != "pending"
            ]
            if orphaned:
                ended += list(self._followed.items())
                self._followed.clear()
            for key, _ in ended:
                self._watched.pop(key, None)
            return [(self._entries.pop(key), f) for key, f in ended if key in self._entries]

    def _forget(self, key) -> None:
        with self._lock:
            self._entries.pop(key, None)
            self._watched.pop(key, None)
            self._followed.pop(key, None)

    def _handle(self, items: list) -> None:
        """Hand each item on in arrival order; finished futures fetched in one gather first."""
        results = self._gather(
            [
                (entry, future)
                for kind, entry, _, future, _ in items
                if kind == "future" and future.status == "finished" and entry.is_open()
            ]
        )
        for kind, entry, key, payload, error in items:
            if key is not None:
                self._forget(key)
            try:
                if kind == "done":
                    self._record(entry, payload, error)
                elif kind == "fault":
                    self._failed_to_send(entry, error)
                elif entry.is_open():
                    if payload.key in results:
                        self._record(entry, results[payload.key])
                    else:
                        self._failed(entry, payload)
            except Exception:
                logger.exception(
                    "labkit: the outcome of chunk %s of %s was not handled",
                    entry.info.chunk,
                    entry.info.run,
                )

    def _gather(self, items: list) -> dict:
        """Results by key of finished futures; one that cannot be fetched is left out."""
        if not items:
            return {}
        try:
            values = self.client.gather([f for _, f in items])
        except BaseException:  # a result lost with its worker after it finished, say
            if len(items) == 1:
                return {}
            found: dict = {}
            for item in items:
                found.update(self._gather([item]))
            return found
        return {f.key: value for (_, f), value in zip(items, values, strict=True)}
