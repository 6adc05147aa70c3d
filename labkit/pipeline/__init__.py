"""Pipelines: stages of threads that read records, process them and write them on.

:func:`pipe` starts ``num_threads`` daemon threads that read records from an
iterable, apply a processor and write the results into a bounded
:class:`Queue` (or a list, or a writer callable).  Stages chain, a queue is a
plain iterable of records (so it can feed ``ParallelFlow.train``), and every
way a stream can end leaves no thread behind:

* the input runs out: the output closes once every thread is done;
* a processor returns :data:`STOP`: the stream ends early;
* the consumer closes the queue: producers wake up and exit, upstream too;
* a processor (or the input) raises: the records processed before are still
  written, then the consumer's next read raises a labkit error naming the
  stage and the record index, the original exception chained to it.

Records already read when a stream ends (at its input's end, a STOP, an
error or :meth:`Stage.stop`) are still processed and written (ordered: those
before the STOP or the failing record); only a consumer closing its queue
drops what is left, and ``with pipe(...) as q:`` closes it on leaving the
block, however the block is left.  A processor returning ``None`` drops the
record.  Each stage reports
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

import operator
from collections.abc import Mapping
from typing import Any, Callable

from ..errors import InputError
from .queue import STOP, Final, Queue
from .reader import ProcessingReader
from .stage import STATS_INTERVAL, PipelineError, Stage, StageStats

__all__ = [
    "STOP",
    "STATS_INTERVAL",
    "Queue",
    "Stage",
    "Final",
    "ProcessingReader",
    "StageStats",
    "PipelineError",
    "pipe",
    "pipe_and_output",
]


def _identity(record):
    return record


def _stage_name(name: str | None, processor) -> str:
    """``name``, else the processor's function name, else ``"pipe"`` (lambdas)."""
    if name:
        return name
    fn = getattr(processor, "__name__", "")
    return fn if fn.isidentifier() else "pipe"


def _count(value, least: int, what: str, stage: str) -> int:
    """``value`` as an int >= ``least``; an InputError naming the argument and stage."""
    try:
        if isinstance(value, bool):  # True is an int to Python, never a count here
            raise TypeError
        number = operator.index(value)
    except TypeError:
        number = None
    if number is None or number < least:
        raise InputError(f"{what} must be an int >= {least}, got {value!r}", stage=stage)
    return number


def _reducers(final_outputs, stage: str) -> dict[str, tuple[Any, Callable]]:
    """``{name: (init, fn)}``; the stage adds the ``count`` of the records written."""
    if final_outputs is None:
        return {}
    if not isinstance(final_outputs, Mapping):
        raise InputError(
            f"final_outputs must be a dict of reducers, got {type(final_outputs).__name__}",
            stage=stage,
        )
    reducers = {}
    for key, spec in final_outputs.items():
        if key == "count":
            raise InputError(
                "final output 'count' is taken: the number of records written "
                "is always there; name yours otherwise",
                stage=stage,
            )
        if callable(spec):
            reducers[key] = (None, spec)
        elif isinstance(spec, tuple) and len(spec) == 2 and callable(spec[1]):
            reducers[key] = spec
        else:
            raise InputError(
                f"final output {key!r} must be a callable (acc, record) -> acc "
                f"or an (init, callable) tuple, got {spec!r}",
                stage=stage,
            )
    return reducers


def _processor(processor, name: str | None):
    """``processor``, or the identity for ``None``; an InputError for anything not callable."""
    if processor is None:
        return _identity
    if not callable(processor):
        raise InputError(
            f"processor must be a callable record -> result, got {type(processor).__name__}",
            stage=name or "pipe",
        )
    return processor


def _listener(on_event, stage: str):
    """``on_event`` as a callable: a scheduler or event bus is sent the events with ``emit``."""
    if on_event is None or not hasattr(on_event, "emit"):
        if on_event is not None and not callable(on_event):
            raise InputError(
                f"on_event must be a callable or have emit(), got {on_event!r}", stage=stage
            )
        return on_event
    return on_event.emit


def _arguments(processor, name, num_threads, capacity, ordered, on_event):
    """The checked arguments of a stage: ``(processor, name, num_threads, capacity, on_event)``.

    Every stage checks all of them, those it does not use included (a lazy
    reader has no capacity), so a wrong one is never silently ignored.
    """
    if name is not None and not isinstance(name, str):
        raise InputError(f"a stage name must be a str, got {name!r}")
    name = _stage_name(name, processor)  # the user's processor names it, never the identity
    processor = _processor(processor, name)
    num_threads = _count(num_threads, 0, "num_threads (0: a lazy reader)", name)
    capacity = _count(capacity, 1, "capacity", name)
    if not isinstance(ordered, bool):
        raise InputError(f"ordered must be True or False, got {ordered!r}", stage=name)
    return processor, name, num_threads, capacity, _listener(on_event, name)


def _start(input, output, num_threads, processor, name, capacity, ordered, on_event, final_outputs):
    """Start a stage (arguments checked); ``(queue or stage, final)``."""
    final = Final(_reducers(final_outputs, name))
    out = Queue(capacity) if output is None else output
    stage = Stage(input, out, num_threads, processor, name, ordered, on_event, final).start()
    return (out if isinstance(out, Queue) else stage), final


def pipe(
    input,
    output=None,
    num_threads: int = 1,
    processor=None,
    name: str | None = None,
    capacity: int = 100,
    ordered: bool = False,
    on_event=None,
):
    """Process the records of ``input`` on ``num_threads`` threads into ``output``.

    ``input`` is any iterable (a :class:`Queue`, a :class:`ProcessingReader`);
    ``output`` a :class:`Queue`, a list or a callable taking each result, or
    ``None`` for a new ``Queue(capacity)``.  ``processor(record)`` returns the
    result, ``None`` to drop it or :data:`STOP` to end the stream (default:
    identity).  ``name`` appears in thread names, errors and stats; ``ordered``
    keeps input order; ``on_event`` receives :class:`StageStats` (a callable,
    or a scheduler or event bus: then the board of that scheduler shows them).

    Returns the output queue; for a list or callable output the running
    :class:`Stage` (``join()`` waits for it); with ``num_threads=0`` a lazy
    :class:`ProcessingReader` and no thread.

    When the processor (or the input) raises at record ``k``, the records
    processed before are still written, then the consumer's next read
    raises the error naming stage and record (with ``ordered=True`` exactly
    records ``0 .. k-1``, less those the processor dropped).
    """
    processor, name, num_threads, capacity, on_event = _arguments(
        processor, name, num_threads, capacity, ordered, on_event
    )
    if num_threads == 0:
        if output is not None:
            raise InputError("num_threads=0 makes a lazy reader and takes no output", stage=name)
        return ProcessingReader(input, processor, name, on_event)
    return _start(input, output, num_threads, processor, name, capacity, ordered, on_event, None)[0]


def pipe_and_output(
    input,
    output=None,
    num_threads: int = 1,
    processor=None,
    name: str | None = None,
    capacity: int = 100,
    ordered: bool = False,
    final_outputs: dict | None = None,
    on_event=None,
):
    """Like :func:`pipe`, and a :class:`Final` whose ``result()`` is reduced over the stream.

    ``final_outputs`` maps names to reducers ``(acc, record) -> acc`` starting
    from ``None``, or to ``(init, reducer)`` tuples; a ``count`` of the records
    written is always there.  Returns ``(queue or stage, final)``.
    """
    processor, name, num_threads, capacity, on_event = _arguments(
        processor, name, num_threads, capacity, ordered, on_event
    )
    if num_threads == 0:
        raise InputError("pipe_and_output needs threads (num_threads >= 1)", stage=name)
    return _start(
        input, output, num_threads, processor, name, capacity, ordered, on_event, final_outputs
    )
