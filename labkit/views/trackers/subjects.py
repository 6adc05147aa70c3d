"""What a view follows (its subject) and what it reads of it, declared as protocols.

A view follows anything it can subscribe to: a scheduler, a run, a trainer
(:class:`Subject`).  What else a view reads of its subject is declared here
too, so no view probes an object's private state: the Dask client behind it
(:func:`client_of`, through the public ``client`` of a scheduler or a trainer
and the ``schedulers`` of a run), and which board shows it
(:class:`SweepRun`: a run that carries its sweep gets the sweep's board).

Examples
--------
>>> check_source(5, "lk.board")
Traceback (most recent call last):
...
labkit.errors.InputError: lk.board follows a scheduler, a run or a trainer (anything with subscribe()), got int 5; to watch a cluster by address, open lk.DaskScheduler('tcp://host:8786') first [argument source]
>>> client_of(object()) is None
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from ...errors import InputError

__all__ = ["Subject", "SweepRun", "check_source", "client_of"]


@runtime_checkable
class Subject(Protocol):
    """What a view can follow: it calls ``fn`` with each event; the result unsubscribes."""

    def subscribe(self, fn: Callable[[Any], Any], **kwargs: Any) -> Any:
        """Call ``fn`` with each event from now on; returns what unsubscribes it."""


@runtime_checkable
class SweepRun(Protocol):
    """A sweep's run: a run (``done()``) that carries its live or stored sweep (``sweep``).

    ``lk.sweep(..., wait=False)`` and ``lk.board(result)`` give such runs; the
    board of one is the sweep's comparison board.
    """

    sweep: Any

    def done(self) -> bool:
        """Whether the run has ended."""

    def subscribe(self, fn: Callable[[Any], Any], **kwargs: Any) -> Any:
        """Call ``fn`` with each event of the run."""


def check_source(source: object, what: str) -> None:
    """An ``InputError`` naming ``what`` unless ``source`` can be subscribed to."""
    if isinstance(source, (str, bytes)) or not callable(getattr(source, "subscribe", None)):
        raise InputError(
            f"{what} follows a scheduler, a run or a trainer (anything with "
            f"subscribe()), got {type(source).__name__} {source!r:.60}; to watch "
            f"a cluster by address, open lk.DaskScheduler('tcp://host:8786') "
            f"first",
            argument="source",
        )


def client_of(*sources: object) -> Any:
    """The Dask client behind the first source that has one (its own, or a run's schedulers').

    A scheduler and a trainer say it in their public ``client`` (``None`` when
    their work runs on threads); a run through the schedulers it runs on.
    """
    for source in sources:
        client = getattr(source, "client", None)
        if client is not None:
            return client
        for scheduler in getattr(source, "schedulers", None) or []:
            client = getattr(scheduler, "client", None)
            if client is not None:
                return client
    return None
