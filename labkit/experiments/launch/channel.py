"""How a running trial talks to its sweep: one protocol, four channels, one receiver.

Wherever a trial runs, it talks to the sweep on the client through a
:class:`TrialChannel`: ``start``, ``report`` (whether the trial must stop),
``checkpoint`` and ``end``, and ``restore`` and ``stopped`` for what it
asks.  The four channels (:mod:`.sinks`, :mod:`.slot`):

* a direct call (:class:`~.sinks.DirectSink`: a thread of this process);
* Dask's event stream (:class:`~.sinks.EventSink`: a task a trial), its
  reports gathered as a fit's are
  (:class:`~labkit.scheduling.workers.gathering.Gathering`);
* the slot's socket (:class:`~.slot.SlotSink`: slots on worker processes);
* the offload pool's socket (:class:`~.sinks.PipeSink`: a GIL-holding trial
  beside an in-process cluster).

What a channel carries reaches the engine on the client through
:func:`deliver`, the one receiver every launcher hands its messages to.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["TrialChannel", "deliver", "KINDS", "FIELDS"]

#: What a channel carries to the client, in the order a trial sends it.
KINDS = ("start", "reports", "checkpoint", "end")


class TrialChannel(Protocol):
    """What a running trial says to its sweep, and asks of it."""

    def start(self) -> None:
        """The trial begins (on this worker, in this execution)."""

    def report(self, step: Any, metrics: dict, t: float) -> bool:
        """One report; whether the trial must stop."""
        ...

    def checkpoint(self, step: Any, ref: Any) -> None:
        """The trial's latest checkpoint's reference (written already), after the reports before it."""

    def end(self, outcome: dict) -> None:
        """What the trial came to (after its last reports)."""

    def restore(self) -> Any:
        """The reference of the latest checkpoint to go on from, or ``None``."""
        ...

    def stopped(self) -> bool:
        """Whether the sweep stopped the trial."""
        ...


#: The fields each kind carries after ``(kind, trial, execution)``, in order.
FIELDS = {
    "start": ("worker",),
    "reports": ("reports",),
    "checkpoint": ("step", "ref"),
    "end": ("outcome",),
}


def deliver(engine, kind: str, trial: int, execution: str | None, *fields: Any) -> bool:
    """One message of a trial's channel (a :data:`KINDS`) to the sweep's ``engine``.

    ``fields`` as :data:`FIELDS` names them: a start's ``worker``, the
    ``reports`` (``(step, metrics, t)`` each), a checkpoint's ``step`` and
    ``ref`` (a CheckpointRef, or its fields), the ``outcome``.  Returns whether the trial must stop (a
    report's answer), else False.  (Positional, and one test a kind: a trial
    in a slot sends a few messages, and each must cost next to nothing.)
    """
    if kind == "reports":
        return engine.reported(trial, execution, *fields)
    if kind == "start":
        engine.started(trial, execution, *fields)
    elif kind == "checkpoint":
        engine.checkpointed(trial, execution, *fields)
    elif kind == "end":
        engine.finished(trial, execution, *fields)
    else:
        raise ValueError(f"a trial's channel carries {KINDS}, not {kind!r}")
    return False
