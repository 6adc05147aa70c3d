"""Bounded, closable queues between stages."""

from __future__ import annotations

import collections
import operator
import threading
from collections.abc import Callable
from typing import Any

from ..constraints import POSITIVE_INT, check_argument
from ..errors import LabkitError
from ..events import StageStats
from .stream import STOP

__all__ = ["Queue"]


class Queue:
    """A bounded, thread-safe, closable queue; iterating ends when closed and drained.

    Records put before the queue ended are always read first: a failed
    stream raises its error only once the records before it were read.
    Several stages may write into one queue; it ends when the last of them
    ends (or at once when one fails).
    """

    _labkit_stream = True  # len() is what waits now, not the stream's length
    _labkit_closable = True  # closing it stops the stages writing into it

    def __init__(self, capacity: int = 100):
        check_argument("capacity", capacity, [POSITIVE_INT], "Queue")
        self.capacity = operator.index(capacity)
        self._items: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._not_full = threading.Condition(self._lock)
        self._not_empty = threading.Condition(self._lock)
        self._closed = False
        self._error: LabkitError | None = None
        self._on_close: list[Callable[[], Any]] = []
        self._producers = 0  # stages writing into the queue that have not ended yet
        self._stats: StageStats | None = None

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    closed = property(lambda self: self._closed, doc="Whether the queue was closed.")

    def put(self, record, timeout: float | None = None) -> bool:
        """Add ``record``, waiting while full; ``False`` (record dropped) once closed."""
        with self._lock:
            # only a full queue waits (the fast path skips it)
            if len(self._items) >= self.capacity and not self._not_full.wait_for(
                lambda: self._closed or len(self._items) < self.capacity, timeout
            ):
                raise TimeoutError(f"queue still full after {timeout} s")
            if self._closed:
                return False
            self._items.append(record)
            self._not_empty.notify()
            return True

    def get(self, timeout: float | None = None):
        """The next record, waiting while empty; ``STOP`` once closed and drained.

        Once drained, raises the error of a failed producing stage (and goes on
        raising it).
        """
        with self._lock:
            if (
                not self._items
                and not self._closed
                and not self._not_empty.wait_for(lambda: self._items or self._closed, timeout)
            ):
                raise TimeoutError(f"queue still empty after {timeout} s")
            if self._items:  # what was written before the failure is read before its error
                record = self._items.popleft()
                self._not_full.notify()
                return record
            if self._error is not None:
                raise self._error.with_traceback(None)  # no traceback piling up on re-raise
            return STOP

    def __iter__(self):
        while True:
            record = self.get()
            if record is STOP:
                return
            yield record

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()  # a consumer leaving early stops the producers instead of leaving them blocked

    def close(self) -> None:
        """End the stream: readers drain what is left, producers' puts return ``False``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            callbacks, self._on_close = self._on_close, []
            self._not_full.notify_all()
            self._not_empty.notify_all()
        for fn in callbacks:  # outside the lock: a callback may close other queues
            fn()

    def fail(self, error: LabkitError) -> None:
        """Close with ``error``: reads drain what is left, then raise it."""
        with self._lock:
            if self._error is None:
                self._error = error
        self.close()

    def stats(self) -> StageStats | None:
        """The latest numbers of the stage writing into this queue."""
        return self._stats

    def set_stats(self, stats: StageStats) -> None:
        """Keep the latest numbers of the stage writing into this queue (the stage calls it)."""
        self._stats = stats

    def add_producer(self, on_close: Callable[[], Any]) -> None:
        """Count one more producing stage; ``on_close`` stops it when the queue closes."""
        with self._lock:
            self._producers += 1
            closed = self._closed
            if not closed:
                self._on_close.append(on_close)
        if closed:  # a consumer already closed it: the stage has nowhere to write
            on_close()

    def producer_ended(self, error: LabkitError | None) -> None:
        """A producing stage ended: the queue ends with its error, or with the last one."""
        with self._lock:
            self._producers -= 1
            last = self._producers <= 0
        if error is not None:
            self.fail(error)
        elif last:
            self.close()
