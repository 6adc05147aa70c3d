"""Event dataclasses emitted by the engine, and the bus that delivers them.

Events are plain frozen dataclasses holding only plain data, so a view can
keep them, pickle them or ship them to a browser.  The engine never knows who
listens: :class:`EventBus` calls each subscriber inside ``try/except`` and
logs a failure, so a broken view can never stop a run.

Examples
--------
>>> bus = EventBus()
>>> seen = []
>>> unsubscribe = bus.subscribe(seen.append)
>>> bus.emit(PhaseStarted(run="r1", node=0, node_name="PCA", phase=0, local=False))
>>> type(seen[0]).__name__
'PhaseStarted'
>>> unsubscribe()
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = [
    "Event", "TaskInfo", "RunStarted", "RunFinished", "PhaseStarted", "PhaseFinished",
    "TaskSubmitted", "TaskStarted", "TaskFinished", "TaskFailed", "NodeJoined", "DeviceStats",
    "EventBus",
]

logger = logging.getLogger("labkit.events")


@dataclass(frozen=True)
class TaskInfo:
    """Where a task belongs: its run, its id, the chunk it carries, node and phase."""

    run: str
    task: int
    chunk: int
    kind: str = "task"                  # "train", "execute" or "task"
    node: int | None = None
    node_name: str | None = None
    phase: int | None = None

    def where(self) -> dict:
        """The location keys of this task, for errors."""
        return {"node": self.node, "node_name": self.node_name, "phase": self.phase,
                "chunk": self.chunk}


@dataclass(frozen=True)
class Event:
    """Base of all events; ``time`` is seconds since the epoch."""


def _now() -> float:
    return time.time()


@dataclass(frozen=True)
class RunStarted(Event):
    run: str
    kind: str                           # "train" or "execute"
    n_nodes: int
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class RunFinished(Event):
    run: str
    ok: bool
    error: str | None = None
    cancelled: bool = False
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class PhaseStarted(Event):
    run: str
    node: int
    node_name: str
    phase: int
    local: bool                         # trained on the client, no tasks
    n_tasks: int | None = None          # known only when the input has a length
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class PhaseFinished(Event):
    run: str
    node: int
    node_name: str
    phase: int
    n_tasks: int
    ok: bool = True
    state: dict[str, Any] | None = None  # the node's state() after the phase, if anyone listens
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class TaskSubmitted(Event):
    info: TaskInfo
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class TaskStarted(Event):
    info: TaskInfo
    worker: str
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class TaskFinished(Event):
    info: TaskInfo
    worker: str
    start: float
    end: float
    n_samples: int | None = None


@dataclass(frozen=True)
class TaskFailed(Event):
    info: TaskInfo
    worker: str | None
    start: float | None
    end: float | None
    error_type: str
    error: str                          # message with location
    traceback: str | None = None


@dataclass(frozen=True)
class NodeJoined(Event):
    run: str
    node: int
    node_name: str
    phase: int
    joins: int
    state: dict[str, Any]
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class DeviceStats(Event):
    """A measurement of one worker or torch device (memory, throughput)."""

    device: str                         # a Dask worker address or a torch device name
    kind: str = "worker"                # "worker" or "device"
    memory: int | None = None           # bytes in use
    memory_limit: int | None = None
    samples_per_s: float | None = None
    step_time: float | None = None      # seconds per step (data-parallel trainers)
    busy: float | None = None           # fraction of the step the device computed
    share: float | None = None          # fraction of the batch it gets (work load)
    time: float = field(default_factory=_now)


class EventBus:
    """Delivers events to subscribers; a failing subscriber is logged, never fatal."""

    def __init__(self):
        self._subscribers: list[Callable[[Event], Any]] = []
        self._lock = threading.Lock()

    def subscribe(self, fn: Callable[[Event], Any]) -> Callable[[], None]:
        """Call ``fn(event)`` for every event; returns a function that unsubscribes."""
        with self._lock:
            self._subscribers = [*self._subscribers, fn]

        def unsubscribe():
            with self._lock:
                self._subscribers = [s for s in self._subscribers if s is not fn]
        return unsubscribe

    @property
    def has_subscribers(self) -> bool:
        """Whether anybody listens (lets the engine skip building costly events)."""
        return bool(self._subscribers)

    def emit(self, event: Event) -> None:
        """Deliver ``event`` to every subscriber, in subscription order."""
        for fn in self._subscribers:  # a snapshot: the list is replaced, never mutated
            try:
                fn(event)
            except Exception:  # a view must never stop a run
                logger.exception("labkit event subscriber %r failed on %s", fn, type(event).__name__)
