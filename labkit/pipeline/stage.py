"""A stage: the threads of one pipe reading, processing and writing records, with its stats."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

from ..errors import USER_EXITS, InputError, LabkitError
from ..events import StageStats
from .final import Final
from .queue import Queue
from .stream import STATS_INTERVAL, STOP, as_error, closable, iterate, send_stats, source_error

__all__ = ["Stage"]


class Stage:
    """The threads of one :func:`pipe`: read ``input``, process, write ``output``.

    How a stream ends decides what is still written.  Nothing more is read
    once the input runs out, a processor returns :data:`STOP`, something
    raises or :meth:`stop` is called; the records already read are still
    processed and written.  In ordered mode a STOP or an error at record
    ``k`` is where the stream ends, as if the records ran one by one:
    records before ``k`` are written, later ones (read ahead by other
    threads) are not, and of several errors the earliest record's is kept.
    Only a consumer closing the output drops what is left.
    """

    def __init__(
        self,
        input: Any,
        output: Any,
        num_threads: int,
        processor: Callable[[Any], Any],
        name: str,
        ordered: bool,
        on_event: Callable[[StageStats], Any] | None,
        final: Final,
    ):
        self._source = iterate(input, name)  # here, so a bad input fails in the caller
        self.name, self.output, self.final = name, output, final
        self._input, self._processor, self._ordered = input, processor, ordered
        self._on_event = on_event
        self._write = self._writer(output)
        self._read_lock = threading.Lock()  # one thread at a time pulls from the input
        self._write_lock = threading.Lock()  # writer callables need not be thread-safe
        self._state = threading.Lock()  # counters, live threads
        self._turn = threading.Condition()  # whose record is written next; where it all ends
        self._next_in = self._next_out = 0
        self._ended = False  # nothing more is read
        self._dropping = False  # the output was closed: nothing more is written
        self._cutoff = math.inf  # ordered mode: the record the stream ends at
        self._error: LabkitError | None = None
        self._records, self._written, self._busy = 0, 0, 0.0
        self._start = self._last_stats = time.perf_counter()
        self._stats: StageStats | None = None
        self._done = threading.Event()
        self._alive = num_threads
        self._threads = [
            threading.Thread(target=self._work, name=f"labkit-pipe-{name}-{i}", daemon=True)
            for i in range(num_threads)
        ]
        if isinstance(output, Queue):
            output.add_producer(self._output_closed)  # last: a closed queue stops the stage at once

    def _writer(self, output) -> Callable[[Any], bool]:
        """A function writing one record into ``output``; ``False`` once it is closed."""
        if isinstance(output, Queue):
            return output.put
        if isinstance(output, list):

            def append(record):
                output.append(record)
                return True

            return append
        if callable(output):

            def write(record):
                with self._write_lock:
                    output(record)
                return True

            return write
        raise InputError(
            f"pipe output must be a Queue, a list or a callable, got {type(output).__name__}",
            stage=self.name,
        )

    def start(self) -> Stage:
        """Start the threads."""
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        """Stop reading; the records already read are still written; upstream stops too."""
        self._ended = True
        with self._turn:
            self._turn.notify_all()
        if closable(self._input):
            self._input.close()

    def _output_closed(self) -> None:
        """The consumer closed the output: stop, and write nothing more."""
        self._dropping = True
        self.stop()

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
            while not self._ended:
                item = self._read()
                if item is None:
                    break
                self._handle(*item)
        except BaseException as exc:  # a bug here must still end the stream
            self._end_at(None, as_error(exc, self.name, None))
        finally:
            with self._state:
                self._alive -= 1
                last = self._alive == 0
            if last:
                self._finish()

    def _read(self) -> tuple[int, Any] | None:
        """The next ``(index, record)``, or None at the end of the input."""
        with self._read_lock:
            if self._ended:
                return None
            index = self._next_in
            try:
                record = next(self._source)
            except StopIteration:
                self._ended = True
                return None
            except USER_EXITS as exc:  # the reader thread must end the stream, not die
                self._end_at(index, source_error(exc, self.name, index))
                return None
            self._next_in += 1
            return index, record

    def _handle(self, index: int, record) -> None:
        """Process one record and hand the result on, in input order if asked."""
        started = time.perf_counter()
        try:
            result = self._processor(record)
        except BaseException as exc:  # SystemExit too: nothing above this thread would see it
            return self._end_at(index, as_error(exc, self.name, index))
        ended = time.perf_counter()
        written = False
        if result is STOP:
            self._end_at(index)
        elif not self._ordered:
            if result is not None and not self._dropping:
                written = self._deliver(index, result)
        elif self._wait_turn(index):
            try:
                if result is not None and not self._dropping:
                    written = self._deliver(index, result)
            finally:
                with self._turn:
                    self._next_out += 1
                    self._turn.notify_all()
        self._tick(ended - started, ended, written)

    def _wait_turn(self, index: int) -> bool:
        """Wait until record ``index`` is next to be written; False if it never will be."""
        with self._turn:
            self._turn.wait_for(
                lambda: self._next_out == index or index > self._cutoff or self._dropping
            )
            return self._next_out == index and index < self._cutoff

    def _deliver(self, index: int, result) -> bool:
        """Write ``result`` and reduce it into the final values; whether it was written."""
        try:
            if not self._write(result):
                self._output_closed()
                return False
            if self.final.reduces:
                self.final.add(result)
            return True
        except USER_EXITS as exc:  # the user's writer or reducer
            self._end_at(index, as_error(exc, self.name, index))
            return False

    def _end_at(self, index: int | None, error: LabkitError | None = None) -> None:
        """End the stream at record ``index`` (None: a bug, before any record), with ``error``.

        Ordered, the earliest end wins, as if the records had run one by one:
        a STOP before a failing record means the failure never happened.
        Unordered, the first error is kept.
        """
        rank = -1 if index is None else index
        with self._turn:
            if self._ordered and rank < self._cutoff:
                self._cutoff, self._error = rank, error
            elif not self._ordered and self._error is None:
                self._error = error
        self.stop()

    def _finish(self) -> None:
        """Last thread out: final stats, then end the output and the final values."""
        self._publish(final=True)
        if isinstance(self.output, Queue):
            self.output.producer_ended(self._error)
        self.final.end(self._error, self._written)
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
            out.set_stats(stats)
        send_stats(self._on_event, stats)
