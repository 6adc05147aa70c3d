"""Bounded, closable queues between stages, the stop signal, and whole-stream reductions."""

from __future__ import annotations

import collections
import threading
from typing import TYPE_CHECKING, Any, Callable

from ..errors import USER_EXITS, InputError, LabkitError, TaskError, located

if TYPE_CHECKING:
    from ..events import StageStats

__all__ = ["STOP", "Queue", "Final", "PipelineError"]


class PipelineError(TaskError):
    """A stage's processor, writer or reducer raised; located by ``stage`` and ``record``."""


class _Stop:
    """The type of :data:`STOP`."""

    def __repr__(self) -> str:
        return "STOP"


#: Returned by a processor to end the stream; returned by ``Queue.get`` at its end.
STOP = _Stop()


class Queue:
    """A bounded, thread-safe, closable queue; iterating ends when closed and drained.

    Records put before the queue ended are always read first: a failed
    stream raises its error only once the records before it were read.
    Several stages may write into one queue; it ends when the last of them
    ends (or at once when one fails).
    """

    _labkit_stream = True  # len() is what waits now, not the stream's length

    def __init__(self, capacity: int = 100):
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise InputError(f"queue capacity must be an int >= 1, got {capacity!r}")
        self.capacity = capacity
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
            if (
                len(self._items) >= self.capacity
            ):  # only a full queue waits (the fast path skips it)
                if not self._not_full.wait_for(
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
            if not self._items and not self._closed:
                if not self._not_empty.wait_for(lambda: self._items or self._closed, timeout):
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

    def __enter__(self) -> "Queue":
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

    def _attach(self, on_close: Callable[[], Any]) -> None:
        """Count one more producing stage; ``on_close`` stops it when the queue closes."""
        with self._lock:
            self._producers += 1
            closed = self._closed
            if not closed:
                self._on_close.append(on_close)
        if closed:  # a consumer already closed it: the stage has nowhere to write
            on_close()

    def _detach(self, error: LabkitError | None) -> None:
        """A producing stage ended: the queue ends with its error, or with the last one."""
        with self._lock:
            self._producers -= 1
            last = self._producers <= 0
        if error is not None:
            self.fail(error)
        elif last:
            self.close()


class Final:
    """Values reduced over a whole stream; :meth:`result` waits for its end."""

    def __init__(self, reducers: dict[str, tuple[Any, Callable]]):
        self._fns = {name: fn for name, (_, fn) in reducers.items()}
        self._values = {name: init for name, (init, _) in reducers.items()}
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._error: LabkitError | None = None

    @property
    def reduces(self) -> bool:
        """Whether records must be handed to :meth:`_add` (beyond being counted)."""
        return bool(self._fns)

    def _add(self, record) -> None:
        with self._lock:  # threads of an unordered stage deliver concurrently
            for name, fn in self._fns.items():
                try:
                    self._values[name] = fn(self._values[name], record)
                except USER_EXITS as exc:  # named as the user named it, not the stage
                    what = getattr(fn, "__qualname__", None) or type(fn).__name__
                    raise located(
                        exc, f"final output {name!r} ({what})", PipelineError, output=name
                    ) from exc

    def _end(self, error: LabkitError | None, count: int) -> None:
        self._values = {"count": count, **self._values}
        self._error = error
        self._done.set()

    def result(self, timeout: float | None = None) -> dict[str, Any]:
        """The reduced values once the stream ended; raises the stage's error."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"stream still running after {timeout} s")
        if self._error is not None:
            raise self._error.with_traceback(None)
        return dict(self._values)


def _closable(obj) -> bool:
    """Whether closing ``obj`` stops whoever produces it (never a generator: not thread-safe)."""
    return isinstance(obj, Queue) or getattr(obj, "_labkit_closable", False)
