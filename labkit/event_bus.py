"""The bus that delivers labkit's events, and the one mixin everything that emits uses.

The engine never knows who listens: :class:`EventBus` calls each subscriber
inside ``try/except`` and logs a failure, so a broken view can never stop a
run.  The event classes themselves are in :mod:`labkit.events`; this module
imports none of them (ground floor: errors and constraints only).

>>> bus = EventBus()
>>> seen = []
>>> unsubscribe = bus.subscribe(seen.append)
>>> bus.emit("an event")
>>> seen
['an event']
>>> unsubscribe()
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from .constraints import SECONDS, Interval, check_arguments
from .constraints import Callable as IsCallable
from .errors import require_callable

__all__ = ["EventBus", "Observable", "SUBSCRIBE_RULES"]

logger = logging.getLogger("labkit.events")

#: What ``subscribe`` takes besides the subscriber.
SUBSCRIBE_RULES = {
    "state_every": [Interval(float, 0, finite=True, name=SECONDS.name), IsCallable(), None]
}
_BUS_LOCK = threading.Lock()  # makes each observable's bus, once


class EventBus:
    """Delivers events to subscribers; a failing subscriber is logged, never fatal."""

    def __init__(self):
        self._subscribers: list[tuple[Callable[[Any], Any], Any]] = []
        self._lock = threading.Lock()
        self._failing: set = set()  # (subscriber, exception type) already logged

    def subscribe(
        self,
        fn: Callable[[Any], Any],
        state_every: float | Callable[[], float | None] | None = None,
    ) -> Callable[[], None]:
        """Call ``fn(event)`` for every event; returns a function that unsubscribes.

        ``state_every`` asks for node state (plot arrays) at most every so many
        seconds; a callable is asked each time (a run forwarding to its own
        subscribers says what they want).
        """
        require_callable(fn, "fn", "subscribe")
        check_arguments(SUBSCRIBE_RULES, "subscribe", state_every=state_every)
        entry = (fn, state_every)
        with self._lock:
            self._subscribers = [*self._subscribers, entry]

        def unsubscribe():
            with self._lock:
                self._subscribers = [s for s in self._subscribers if s is not entry]

        return unsubscribe

    @property
    def has_subscribers(self) -> bool:
        """Whether anybody listens (lets the engine skip building costly events)."""
        return bool(self._subscribers)

    @property
    def state_every(self) -> float | None:
        """The shortest interval at which a subscriber wants node state; None: nobody does."""
        wanted = [every() if callable(every) else every for _, every in self._subscribers]
        wanted = [w for w in wanted if w is not None]
        return min(wanted) if wanted else None

    def emit(self, event: Any) -> None:
        """Deliver ``event`` to every subscriber, in subscription order."""
        for fn, _ in self._subscribers:  # a snapshot: the list is replaced, never mutated
            self.deliver(fn, event)

    def deliver(self, fn: Callable[[Any], Any], event: Any) -> None:
        """Call one subscriber with ``event``, a failure logged (a run replays its past so)."""
        try:
            fn(event)
        except Exception as exc:  # a view must never stop a run
            self._log_failure(fn, event, exc)

    def _log_failure(self, fn: Callable[[Any], Any], event: Any, exc: Exception) -> None:
        """Log a subscriber's failure with its traceback, once for each kind of error:
        a broken view would otherwise log one traceback for every event of a run."""
        key = (id(fn), type(exc))
        with self._lock:
            first = key not in self._failing
            self._failing.add(key)
        if first:
            logger.error(
                "labkit event subscriber %r failed on %s (its further %s failures are not logged)",
                fn,
                type(event).__name__,
                type(exc).__name__,
                exc_info=exc,
            )


class Observable:
    """The one observer mixin: ``subscribe``, ``emit``, ``has_subscribers``, ``state_every``.

    The bus is made on first use, so subclasses need not call an ``__init__``;
    a subclass that is pickled or copied drops ``_bus`` from its state
    (subscribers belong to this process), as :class:`~labkit.program.Program` does.

    Examples
    --------
    >>> from labkit.events import DeviceStats
    >>> class Counter(Observable):
    ...     pass
    >>> c, seen = Counter(), []
    >>> _ = c.subscribe(seen.append, state_every=0.5)
    >>> c.emit(DeviceStats("cpu:0", "device"))
    >>> len(seen), c.has_subscribers, c.state_every
    (1, True, 0.5)
    """

    _bus: EventBus | None = None

    @property
    def events(self) -> EventBus:
        """This object's bus."""
        bus = self._bus
        if bus is None:
            with _BUS_LOCK:
                if self._bus is None:
                    self._bus = EventBus()
                bus = self._bus
        return bus

    def subscribe(self, fn: Callable[[Any], Any], state_every=None) -> Callable[[], None]:
        """Call ``fn(event)`` for every event; returns a function that unsubscribes.

        ``state_every``: seconds between node states (plot arrays) this
        subscriber wants; ``None`` (the default) for counts only.
        """
        return self.events.subscribe(fn, state_every)

    def emit(self, event: Any) -> None:
        """Deliver ``event`` to the subscribers."""
        bus = self._bus
        if bus is not None:
            bus.emit(event)

    @property
    def has_subscribers(self) -> bool:
        """Whether anybody listens (lets the engine skip building costly events)."""
        bus = self._bus
        return bus is not None and bus.has_subscribers

    @property
    def state_every(self) -> float | None:
        """How often a subscriber wants node state; None while nobody does."""
        bus = self._bus
        return None if bus is None else bus.state_every
