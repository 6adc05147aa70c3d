"""Pipelines: stages of threads that read records, process them and write them on.

:func:`pipe` starts ``num_threads`` daemon threads that read records from an
iterable, apply a processor and write the results into a bounded
:class:`Queue` (or a list, or a writer callable).  Stages chain, a queue is a
plain iterable of records (so it can feed ``ParallelFlow.train``), and every
way a stream can end leaves no thread behind:

* the input runs out: the output closes once every thread is done;
* a processor returns :data:`STOP`: the stream ends early;
* the consumer closes the queue: producers wake up and exit, upstream too;
* a processor raises: the consumer's next read raises a labkit error naming
  the stage and the record index.

A processor returning ``None`` drops the record.  Each stage reports
:class:`StageStats` (records/s, busy time, queue fill) to ``on_event`` at most
every :data:`STATS_INTERVAL` seconds and once at the end.

Examples
--------
>>> doubled = pipe(range(5), processor=lambda x: 2 * x, num_threads=2, ordered=True)
>>> list(pipe(doubled, processor=lambda x: x + 1))
[1, 3, 5, 7, 9]
>>> out, final = pipe_and_output(range(4), final_outputs={"total": (0, lambda a, r: a + r)})
>>> list(out), final.result(timeout=5)
([0, 1, 2, 3], {'count': 4, 'total': 6})
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import InputError, LabkitError, TaskError
from .events import Event

__all__ = ["STOP", "STATS_INTERVAL", "Queue", "Stage", "Final", "ProcessingReader",
           "StageStats", "PipelineError", "pipe", "pipe_and_output"]

logger = logging.getLogger("labkit.pipeline")

#: Least number of seconds between two StageStats of one stage.
STATS_INTERVAL = 0.1


class _Stop:
    """The type of :data:`STOP`."""

    def __repr__(self) -> str:
        return "STOP"


#: Returned by a processor to end the stream; returned by ``Queue.get`` at its end.
STOP = _Stop()


class PipelineError(TaskError):
    """A stage's processor, writer or reducer raised; located by ``stage`` and ``record``."""


def _as_error(exc: BaseException, stage: str, record: int) -> LabkitError:
    """``exc`` as a labkit error located at ``stage`` and ``record``, with traceback text."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if isinstance(exc, LabkitError):  # an upstream error keeps its own stage and record
        if exc.remote_traceback is None:
            exc.remote_traceback = text
        return exc.locate(stage=stage, record=record)
    kind = type(exc)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return PipelineError(f"stage {stage!r} failed with {name}: {exc}", original_type=name,
                         original_message=str(exc), remote_traceback=text,
                         stage=stage, record=record)


def _now() -> float:
    return time.time()


@dataclass(frozen=True)
class StageStats(Event):
    """Throughput of one pipeline stage so far."""

    stage: str
    records: int                        # records processed
    records_per_s: float
    busy_s: float                       # seconds spent in the processor, all threads
    queue_fill: float | None            # output queue length / capacity; None if not a Queue
    final: bool = False                 # the last one, sent when the stage ended
    time: float = field(default_factory=_now)


class Queue:
    """A bounded, thread-safe, closable queue; iterating ends when closed and drained."""

    def __init__(self, capacity: int = 100):
        if capacity < 1:
            raise InputError(f"queue capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._items: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._not_full = threading.Condition(self._lock)
        self._not_empty = threading.Condition(self._lock)
        self._closed = False
        self._error: LabkitError | None = None
        self._on_close: list[Callable[[], Any]] = []
        self._stats: StageStats | None = None

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    closed = property(lambda self: self._closed, doc="Whether the queue was closed.")

    def put(self, record, timeout: float | None = None) -> bool:
        """Add ``record``, waiting while full; ``False`` (record dropped) once closed."""
        return self._put(record, timeout)

    def _put(self, record, timeout=None, abort: Callable[[], bool] = lambda: False) -> bool:
        with self._lock:
            if not self._not_full.wait_for(
                    lambda: self._closed or abort() or len(self._items) < self.capacity, timeout):
                raise TimeoutError(f"queue still full after {timeout} s")
            if self._closed or abort():
                return False
            self._items.append(record)
            self._not_empty.notify()
            return True

    def get(self, timeout: float | None = None):
        """The next record, waiting while empty; ``STOP`` once closed and drained.

        Raises the error of a failed producing stage.
        """
        with self._lock:
            if not self._not_empty.wait_for(
                    lambda: self._items or self._closed or self._error is not None, timeout):
                raise TimeoutError(f"queue still empty after {timeout} s")
            if self._error is not None:
                raise self._error.with_traceback(None)  # no traceback piling up on re-raise
            if not self._items:
                return STOP
            record = self._items.popleft()
            self._not_full.notify()
            return record

    def __iter__(self):
        while True:
            record = self.get()
            if record is STOP:
                return
            yield record

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
        """Close with ``error``: every later read raises it."""
        with self._lock:
            self._error = error
            self._not_empty.notify_all()
        self.close()

    def stats(self) -> StageStats | None:
        """The latest numbers of the stage writing into this queue."""
        return self._stats

    def _wake_producers(self) -> None:
        """Let blocked puts recheck their ``abort`` condition."""
        with self._lock:
            self._not_full.notify_all()


class Final:
    """Values reduced over a whole stream; :meth:`result` waits for its end."""

    def __init__(self, reducers: dict[str, tuple[Any, Callable]]):
        self._fns = {name: fn for name, (_, fn) in reducers.items()}
        self._values = {name: init for name, (init, _) in reducers.items()}
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._error: LabkitError | None = None

    def _add(self, record) -> None:
        with self._lock:  # threads of an unordered stage deliver concurrently
            for name, fn in self._fns.items():
                self._values[name] = fn(self._values[name], record)

    def _end(self, error: LabkitError | None) -> None:
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
    return isinstance(obj, (Queue, ProcessingReader))


class Stage:
    """The threads of one :func:`pipe`: read ``input``, process, write ``output``."""

    def __init__(self, input, output, num_threads, processor, name, ordered, on_event, final):
        try:
            self._source = iter(input)  # here, so a bad input fails in the caller
        except TypeError:
            raise InputError(f"pipe input must be iterable, got {type(input).__name__}",
                             stage=name) from None
        self.name, self.output, self.final = name, output, final
        self._input, self._processor, self._ordered = input, processor, ordered
        self._on_event = on_event
        self._write = self._writer(output)
        self._read_lock = threading.Lock()    # one thread at a time pulls from the input
        self._write_lock = threading.Lock()   # writer callables need not be thread-safe
        self._state = threading.Lock()        # counters, error, live threads
        self._turn = threading.Condition()    # ordered mode: whose record is written next
        self._next_in = self._next_out = 0
        self._stopping = False
        self._error: LabkitError | None = None
        self._records, self._busy = 0, 0.0
        self._start = self._last_stats = time.monotonic()
        self._stats: StageStats | None = None
        self._done = threading.Event()
        self._alive = num_threads
        self._threads = [threading.Thread(target=self._work, name=f"labkit-pipe-{name}-{i}",
                                          daemon=True) for i in range(num_threads)]

    def _writer(self, output) -> Callable[[Any], bool]:
        """A function writing one record into ``output``; ``False`` once it is closed."""
        if isinstance(output, Queue):
            output._on_close.append(self.stop)  # a consumer closing it stops this stage
            return lambda r: output._put(r, abort=lambda: self._stopping)
        if isinstance(output, list):
            return lambda r: output.append(r) or True
        if callable(output):
            def write(record):
                with self._write_lock:
                    output(record)
                return True
            return write
        raise InputError(f"pipe output must be a Queue, a list or a callable, got "
                         f"{type(output).__name__}", stage=self.name)

    def start(self) -> "Stage":
        """Start the threads."""
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        """Stop reading; the threads finish their record and exit; upstream stops too."""
        self._stopping = True
        if isinstance(self.output, Queue):
            self.output._wake_producers()  # before taking the turn lock: a writer may hold it
        with self._turn:
            self._turn.notify_all()
        if _closable(self._input):
            self._input.close()

    def join(self, timeout: float | None = None):
        """Wait for the stream's end; the output, or raise the stage's error."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"stage {self.name!r} still running after {timeout} s")
        if self._error is not None:
            raise self._error.with_traceback(None)
        return self.output

    def stats(self) -> StageStats | None:
        """The latest numbers of this stage."""
        return self._stats

    # -- the threads ---------------------------------------------------------------

    def _work(self) -> None:
        """One thread: read, process and write until the input ends or the stage stops."""
        try:
            while not self._stopping:
                item = self._read()
                if item is None:
                    break
                self._handle(*item)
        except BaseException as exc:  # a bug here must still end the stream
            self._fail(exc, -1)
        finally:
            with self._state:
                self._alive -= 1
                last = self._alive == 0
            if last:
                self._finish()

    def _read(self) -> tuple[int, Any] | None:
        """The next ``(index, record)``, or None at the end of the input."""
        with self._read_lock:
            if self._stopping:
                return None
            index = self._next_in
            try:
                record = next(self._source)
            except StopIteration:
                return None
            except Exception as exc:
                self._fail(exc, index)
                return None
            self._next_in += 1
            return index, record

    def _handle(self, index: int, record) -> None:
        """Process one record and hand the result on, in input order if asked."""
        started = time.perf_counter()
        try:
            result = self._processor(record)
        except Exception as exc:
            return self._fail(exc, index)
        self._tick(time.perf_counter() - started)
        if self._ordered and not self._wait_turn(index):
            return
        try:
            if result is STOP:
                self.stop()
            elif result is not None and not self._stopping:
                self._deliver(index, result)
        finally:
            if self._ordered:
                with self._turn:
                    self._next_out += 1
                    self._turn.notify_all()

    def _wait_turn(self, index: int) -> bool:
        """Wait until record ``index`` is next to be written; False if the stage stops."""
        with self._turn:
            self._turn.wait_for(lambda: self._next_out == index or self._stopping)
            return not self._stopping

    def _deliver(self, index: int, result) -> None:
        """Write ``result`` and reduce it into the final values."""
        try:
            if not self._write(result):
                return self.stop()  # the consumer closed the output
            self.final._add(result)
        except Exception as exc:
            self._fail(exc, index)

    def _fail(self, exc: BaseException, index: int) -> None:
        """Keep the first error and stop the stage."""
        with self._state:
            if self._error is None:
                self._error = _as_error(exc, self.name, index)
        self.stop()

    def _finish(self) -> None:
        """Last thread out: final stats, then end the output and the final values."""
        self._publish(final=True)
        if isinstance(self.output, Queue):
            if self._error is not None:
                self.output.fail(self._error)
            else:
                self.output.close()
        self.final._end(self._error)
        self._done.set()

    # -- statistics ---------------------------------------------------------------

    def _tick(self, busy: float) -> None:
        """Count one processed record; publish stats when the interval has passed."""
        now = time.monotonic()
        with self._state:
            self._records += 1
            self._busy += busy
            due = now - self._last_stats >= STATS_INTERVAL
            if due:
                self._last_stats = now
        if due:
            self._publish(final=False)

    def _publish(self, final: bool) -> None:
        """Build a StageStats, keep it on the stage and queue, send it to ``on_event``."""
        with self._state:
            records, busy = self._records, self._busy
        elapsed = max(time.monotonic() - self._start, 1e-9)
        out = self.output
        fill = len(out) / out.capacity if isinstance(out, Queue) else None
        stats = StageStats(self.name, records, records / elapsed, busy, fill, final)
        self._stats = stats
        if isinstance(out, Queue):
            out._stats = stats
        if self._on_event is not None:
            try:
                self._on_event(stats)
            except Exception:  # a view must never stop a stream
                logger.exception("labkit pipeline on_event %r failed", self._on_event)


class ProcessingReader:
    """A lazy stage: iterating applies ``processor`` to ``input`` on the caller's thread."""

    def __init__(self, input, processor, name):
        if not hasattr(input, "__iter__"):
            raise InputError(f"pipe input must be iterable, got {type(input).__name__}",
                             stage=name)
        self.input, self.processor, self.name = input, processor, name

    def __iter__(self):
        for index, record in enumerate(self.input):
            try:
                result = self.processor(record)
            except Exception as exc:
                raise _as_error(exc, self.name, index) from exc
            if result is STOP:
                self.close()
                return
            if result is not None:
                yield result

    def close(self) -> None:
        """Stop whoever produces the input (a Queue's stage)."""
        if _closable(self.input):
            self.input.close()


def _identity(record):
    return record


def _stage_name(name: str | None, processor) -> str:
    """``name``, else the processor's function name, else ``"pipe"`` (lambdas)."""
    if name:
        return name
    fn = getattr(processor, "__name__", "")
    return fn if fn.isidentifier() else "pipe"


def _reducers(final_outputs) -> dict[str, tuple[Any, Callable]]:
    """``{name: (init, fn)}``, always with a ``count`` of the records written."""
    reducers = {"count": (0, lambda n, _: n + 1)}
    for key, spec in (final_outputs or {}).items():
        if callable(spec):
            reducers[key] = (None, spec)
        elif isinstance(spec, tuple) and len(spec) == 2 and callable(spec[1]):
            reducers[key] = spec
        else:
            raise InputError(f"final output {key!r} must be a callable (acc, record) -> acc "
                             f"or an (init, callable) tuple, got {spec!r}")
    return reducers


def _start(input, output, num_threads, processor, name, capacity, ordered, on_event,
           final_outputs):
    """Start a stage; ``(queue or stage, final)``."""
    processor = processor or _identity
    name = _stage_name(name, processor)
    if not isinstance(num_threads, int) or num_threads < 1:
        raise InputError(f"num_threads must be a positive int (0: a lazy reader), got {num_threads!r}",
                         stage=name)
    out = Queue(capacity) if output is None else output
    final = Final(_reducers(final_outputs))
    stage = Stage(input, out, num_threads, processor, name, ordered, on_event, final).start()
    return (out if isinstance(out, Queue) else stage), final


def pipe(input, output=None, num_threads: int = 1, processor=None, name: str | None = None,
         capacity: int = 100, ordered: bool = False, on_event=None):
    """Process the records of ``input`` on ``num_threads`` threads into ``output``.

    ``input`` is any iterable (a :class:`Queue`, a :class:`ProcessingReader`);
    ``output`` a :class:`Queue`, a list or a callable taking each result, or
    ``None`` for a new ``Queue(capacity)``.  ``processor(record)`` returns the
    result, ``None`` to drop it or :data:`STOP` to end the stream (default:
    identity).  ``name`` appears in thread names, errors and stats; ``ordered``
    keeps input order; ``on_event`` receives :class:`StageStats`.

    Returns the output queue; for a list or callable output the running
    :class:`Stage` (``join()`` waits for it); with ``num_threads=0`` a lazy
    :class:`ProcessingReader` and no thread.
    """
    if num_threads == 0:
        if output is not None:
            raise InputError("num_threads=0 makes a lazy reader and takes no output")
        processor = processor or _identity
        return ProcessingReader(input, processor, _stage_name(name, processor))
    return _start(input, output, num_threads, processor, name, capacity, ordered, on_event,
                  None)[0]


def pipe_and_output(input, output=None, num_threads: int = 1, processor=None,
                    name: str | None = None, capacity: int = 100, ordered: bool = False,
                    final_outputs: dict | None = None, on_event=None):
    """Like :func:`pipe`, and a :class:`Final` whose ``result()`` is reduced over the stream.

    ``final_outputs`` maps names to reducers ``(acc, record) -> acc`` starting
    from ``None``, or to ``(init, reducer)`` tuples; a ``count`` of the records
    written is always there.  Returns ``(queue or stage, final)``.
    """
    if num_threads == 0:
        raise InputError("pipe_and_output needs threads (num_threads >= 1)")
    return _start(input, output, num_threads, processor, name, capacity, ordered, on_event,
                  final_outputs)
