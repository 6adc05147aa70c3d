"""The lazy stage: a reader that processes records on the consumer's thread."""

from __future__ import annotations

import itertools
import time

from ..errors import USER_EXITS, InputError
from ..events import StageStats
from .stream import STATS_INTERVAL, STOP, as_error, closable, iterate, send_stats, source_error

__all__ = ["ProcessingReader"]


class ProcessingReader:
    """A lazy stage: iterating applies ``processor`` to ``input`` on the caller's thread.

    Its :class:`StageStats` (``queue_fill`` None) go to ``on_event`` at most
    every ``STATS_INTERVAL`` seconds while it is iterated, and once at the end.
    """

    _labkit_closable = True  # closing it closes its input, stopping the stage upstream

    def __init__(self, input, processor, name, on_event=None):
        if not hasattr(input, "__iter__"):
            raise InputError(f"pipe input must be iterable, got {type(input).__name__}", stage=name)
        self.input, self.processor, self.name = input, processor, name
        self._on_event, self._stats = on_event, None

    def __iter__(self):
        started = last = time.monotonic()
        records, busy = 0, 0.0
        try:
            source = iterate(self.input, self.name)
            for index in itertools.count():
                try:
                    record = next(source)
                except StopIteration:
                    return
                except USER_EXITS as exc:
                    error = source_error(exc, self.name, index)
                    raise error from error.__cause__  # chained to exc
                t0 = time.perf_counter()
                try:
                    result = self.processor(record)
                except USER_EXITS as exc:
                    error = as_error(exc, self.name, index)
                    raise error from error.__cause__  # chained to exc
                records, busy = records + 1, busy + time.perf_counter() - t0
                if time.monotonic() - last >= STATS_INTERVAL:
                    last = time.monotonic()
                    self._publish(records, busy, last - started, False)
                if result is STOP:
                    self.close()
                    return
                if result is not None:
                    yield result
        finally:
            self._publish(records, busy, time.monotonic() - started, True)

    def stats(self) -> StageStats | None:
        """The latest numbers of this reader."""
        return self._stats

    def _publish(self, records: int, busy: float, elapsed: float, final: bool) -> None:
        self._stats = StageStats(
            self.name, records, records / max(elapsed, 1e-9), busy, None, final
        )
        send_stats(self._on_event, self._stats)

    def __enter__(self) -> ProcessingReader:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Stop whoever produces the input (a Queue's stage)."""
        if closable(self.input):
            self.input.close()
