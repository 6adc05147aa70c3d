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

from typing import Any, Callable

from ..errors import InputError
from .queue import STOP, Final, Queue
from .reader import ProcessingReader
from .stage import STATS_INTERVAL, PipelineError, Stage, StageStats

__all__ = ["STOP", "STATS_INTERVAL", "Queue", "Stage", "Final", "ProcessingReader",
           "StageStats", "PipelineError", "pipe", "pipe_and_output"]


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
    reducers = {}  # the stage counts the records itself
    for key, spec in (final_outputs or {}).items():
        if callable(spec):
            reducers[key] = (None, spec)
        elif isinstance(spec, tuple) and len(spec) == 2 and callable(spec[1]):
            reducers[key] = spec
        else:
            raise InputError(f"final output {key!r} must be a callable (acc, record) -> acc "
                             f"or an (init, callable) tuple, got {spec!r}")
    return reducers


def _processor(processor, name: str | None):
    """``processor``, or the identity for ``None``; an InputError for anything not callable."""
    if processor is None:
        return _identity
    if not callable(processor):
        raise InputError(f"processor must be a callable record -> result, got "
                         f"{type(processor).__name__}", stage=name or "pipe")
    return processor


def _listener(on_event):
    """``on_event`` as a callable: a scheduler or event bus is sent the events with ``emit``."""
    if on_event is None or not hasattr(on_event, "emit"):
        if on_event is not None and not callable(on_event):
            raise InputError(f"on_event must be a callable or have emit(), got {on_event!r}")
        return on_event
    return on_event.emit


def _start(input, output, num_threads, processor, name, capacity, ordered, on_event,
           final_outputs):
    """Start a stage; ``(queue or stage, final)``."""
    processor, on_event = _processor(processor, name), _listener(on_event)
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
    keeps input order; ``on_event`` receives :class:`StageStats` (a callable,
    or a scheduler or event bus: then the board of that scheduler shows them).

    Returns the output queue; for a list or callable output the running
    :class:`Stage` (``join()`` waits for it); with ``num_threads=0`` a lazy
    :class:`ProcessingReader` and no thread.
    """
    if num_threads == 0:
        if output is not None:
            raise InputError("num_threads=0 makes a lazy reader and takes no output")
        processor = _processor(processor, name)
        return ProcessingReader(input, processor, _stage_name(name, processor),
                                _listener(on_event))
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

