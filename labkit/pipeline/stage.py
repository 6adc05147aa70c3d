"""A stage: the threads of one pipe reading, processing and writing records, with its stats."""

from __future__ import annotations

import logging
import threading
import time
import traceback
from typing import Any, Callable

from ..errors import InputError, LabkitError, TaskError, located
from ..events import StageStats
from .queue import STOP, Queue, _closable

__all__ = ["STATS_INTERVAL", "PipelineError", "StageStats", "Stage"]

logger = logging.getLogger("labkit.pipeline")

#: Least number of seconds between two StageStats of one stage.
STATS_INTERVAL = 0.1


class PipelineError(TaskError):
    """A stage's processor, writer or reducer raised; located by ``stage`` and ``record``."""


def _as_error(exc: BaseException, stage: str, record: int) -> LabkitError:
    """``exc`` as a labkit error located at ``stage`` and ``record``, with traceback text."""
    if isinstance(exc, LabkitError) and exc.remote_traceback is None:
        # an upstream error keeps its own stage and record, and gains where it surfaced
        exc.remote_traceback = "".join(traceback.format_exception(type(exc), exc,
                                                                  exc.__traceback__))
    return located(exc, f"stage {stage!r}", PipelineError, stage=stage, record=record)


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
        self._records, self._written, self._busy = 0, 0, 0.0
        self._start = self._last_stats = time.perf_counter()
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
        ended = time.perf_counter()
        written = False
        if not self._ordered or self._wait_turn(index):
            try:
                if result is STOP:
                    self.stop()
                elif result is not None and not self._stopping:
                    written = self._deliver(index, result)
            finally:
                if self._ordered:
                    with self._turn:
                        self._next_out += 1
                        self._turn.notify_all()
        self._tick(ended - started, ended, written)

    def _wait_turn(self, index: int) -> bool:
        """Wait until record ``index`` is next to be written; False if the stage stops."""
        with self._turn:
            self._turn.wait_for(lambda: self._next_out == index or self._stopping)
            return not self._stopping

    def _deliver(self, index: int, result) -> bool:
        """Write ``result`` and reduce it into the final values; whether it was written."""
        try:
            if not self._write(result):
                self.stop()  # the consumer closed the output
                return False
            if self.final.reduces:
                self.final._add(result)
            return True
        except Exception as exc:
            self._fail(exc, index)
            return False

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
        self.final._end(self._error, self._written)
        self._done.set()

    # -- statistics ---------------------------------------------------------------

    def _tick(self, busy: float, now: float, written: bool) -> None:
        """Count one processed record (one lock a record); publish stats when due."""
        with self._state:
            self._records += 1
            self._written += written
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
        elapsed = max(time.perf_counter() - self._start, 1e-9)
        out = self.output
        fill = len(out) / out.capacity if isinstance(out, Queue) else None
        stats = StageStats(self.name, records, records / elapsed, busy, fill, final)
        self._stats = stats
        if isinstance(out, Queue):
            out._stats = stats
        _send(self._on_event, stats)




def _send(on_event, stats: StageStats) -> None:
    """Give ``stats`` to ``on_event``; a failing listener is logged, never stops a stream."""
    if on_event is not None:
        try:
            on_event(stats)
        except Exception:
            logger.exception("labkit pipeline on_event %r failed", on_event)
