"""The pipeline's two verbs: :func:`pipe` starts a stage, :func:`pipe_and_output` one with final values.

Every stage checks all its arguments, those it does not use included (a
lazy reader has no capacity), so a wrong one is never silently ignored;
the rules are declared once, in :data:`ARGUMENTS`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from ..constraints import Callable as IsCallable
from ..constraints import InstanceOf, Interval, Satisfies, check_argument
from ..errors import InputError
from .final import Final
from .queue import Queue
from .reader import ProcessingReader
from .stage import Stage

__all__ = ["pipe", "pipe_and_output", "ARGUMENTS"]


def _listens(value: Any) -> bool:
    """Whether ``value`` can take events: a callable, or something with ``emit``."""
    return callable(value) or hasattr(value, "emit")


#: What each argument of a stage may be (see :mod:`labkit.constraints`).
ARGUMENTS: dict[str, list] = {
    "name": [InstanceOf(str), None],
    "processor": [IsCallable(), None],
    "num_threads": [Interval(int, 0, name="an int >= 0 (0: a lazy reader)")],
    "capacity": [Interval(int, 1, name="an int >= 1")],
    "ordered": [InstanceOf(bool, "True or False")],
    "on_event": [Satisfies(_listens, "a callable or an object with emit()"), None],
}


def _identity(record):
    return record


def _stage_name(name: str | None, processor) -> str:
    """``name``, else the processor's function name, else ``"pipe"`` (lambdas)."""
    if name:
        return name
    fn = getattr(processor, "__name__", "")
    return fn if fn.isidentifier() else "pipe"


def _reducer(key: str, spec, stage: str) -> tuple[Any, Callable]:
    """One final output as ``(init, fn)``; an InputError for anything else."""
    if key == "count":
        raise InputError(
            "final output 'count' is taken: the number of records written "
            "is always there; name yours otherwise",
            stage=stage,
        )
    if callable(spec):
        return None, spec
    if isinstance(spec, tuple) and len(spec) == 2 and callable(spec[1]):
        return spec
    raise InputError(
        f"final output {key!r} must be a callable (acc, record) -> acc "
        f"or an (init, callable) tuple, got {spec!r}",
        stage=stage,
    )


def _reducers(final_outputs, stage: str) -> dict[str, tuple[Any, Callable]]:
    """``{name: (init, fn)}``; the stage adds the ``count`` of the records written."""
    if final_outputs is None:
        return {}
    if not isinstance(final_outputs, Mapping):
        raise InputError(
            f"final_outputs must be a dict of reducers, got {type(final_outputs).__name__}",
            stage=stage,
        )
    return {key: _reducer(key, spec, stage) for key, spec in final_outputs.items()}


def _arguments(processor, name, num_threads, capacity, ordered, on_event):
    """The checked arguments of a stage: ``(processor, name, num_threads, capacity, on_event)``."""
    check_argument("name", name, ARGUMENTS["name"])
    name = _stage_name(name, processor)  # the user's processor names it, never the identity
    checked = {
        "processor": processor,
        "num_threads": num_threads,
        "capacity": capacity,
        "ordered": ordered,
        "on_event": on_event,
    }
    for argument, value in checked.items():
        check_argument(argument, value, ARGUMENTS[argument], stage=name)
    listener = on_event.emit if hasattr(on_event, "emit") else on_event
    return (
        _identity if processor is None else processor,
        name,
        operator.index(num_threads),
        operator.index(capacity),
        listener,
    )


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
