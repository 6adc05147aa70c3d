"""What every stage shares about a stream: its end, its errors, its listener.

:data:`STOP` ends a stream, :class:`PipelineError` is what a failing
processor, writer or reducer becomes; the functions turn an exception into a
labkit error located at a stage and record, and hand stats to a listener.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any

from ..errors import InputError, LabkitError, TaskError, located
from ..events import StageStats

__all__ = [
    "STOP",
    "STATS_INTERVAL",
    "PipelineError",
    "as_error",
    "source_error",
    "iterate",
    "send_stats",
    "closable",
]

logger = logging.getLogger("labkit.pipeline")

#: Least number of seconds between two StageStats of one stage.
STATS_INTERVAL = 0.1


class PipelineError(TaskError):
    """A stage's processor, writer or reducer raised; located by ``stage`` and ``record``."""


class _Stop:
    """The type of :data:`STOP`."""

    def __repr__(self) -> str:
        return "STOP"


#: Returned by a processor to end the stream; returned by ``Queue.get`` at its end.
STOP = _Stop()


def as_error(exc: BaseException, stage: str, record: int | None) -> LabkitError:
    """``exc`` as a labkit error located at ``stage`` and ``record``, ``exc`` chained to it."""
    if isinstance(exc, LabkitError):
        if exc.remote_traceback is None:
            # an upstream error keeps its own stage and record, and gains where it surfaced
            exc.remote_traceback = "".join(
                traceback.format_exception(type(exc), exc, exc.__traceback__)
            )
        return exc.locate(stage=stage, record=record)
    error = located(exc, f"stage {stage!r}", PipelineError, stage=stage, record=record)
    error.__cause__ = exc  # raised in the consumer, it still shows the processor's own frames
    return error


def source_error(exc: BaseException, stage: str, record: int) -> LabkitError:
    """An exception of a stage's input as an InputError naming stage and record, chained.

    An upstream stage's labkit error keeps its own stage and record.
    """
    if isinstance(exc, LabkitError):
        return as_error(exc, stage, record)
    error = InputError(
        f"the input of stage {stage!r} raised {type(exc).__name__}: {exc} "
        f"while reading record {record}",
        stage=stage,
        record=record,
    )
    error.__cause__ = exc
    return error


def iterate(input, stage: str):
    """``iter(input)``; an InputError naming the stage for what is not iterable."""
    try:
        return iter(input)
    except Exception as exc:
        if isinstance(exc, TypeError) and not hasattr(input, "__iter__"):
            raise InputError(
                f"pipe input must be iterable, got {type(input).__name__}", stage=stage
            ) from None
        error = source_error(exc, stage, 0)  # an __iter__ of the user's that raises
        raise error from error.__cause__


def send_stats(on_event: Any, stats: StageStats) -> None:
    """Give ``stats`` to ``on_event``; a failing listener is logged, never stops a stream."""
    if on_event is not None:
        try:
            on_event(stats)
        except Exception:
            logger.exception("labkit pipeline on_event %r failed", on_event)


def closable(obj) -> bool:
    """Whether closing ``obj`` stops whoever produces it (never a generator: not thread-safe)."""
    return bool(getattr(obj, "_labkit_closable", False))
