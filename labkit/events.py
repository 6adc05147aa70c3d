"""Event dataclasses emitted by the engine, and the bus that delivers them.

Events are plain frozen dataclasses holding only plain data, so a view can
keep them, pickle them or ship them to a browser.  The engine never knows who
listens: :class:`EventBus` calls each subscriber inside ``try/except`` and
logs a failure, so a broken view can never stop a run.  Everything that
emits events (schedulers, runs, trainers, programs) does so through the one
:class:`Observable` mixin.

A subscriber that draws node state says how often it wants it
(``subscribe(fn, state_every=0.5)``); the engine computes a node's plot
arrays at most that often, and not at all while nobody asks.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .constraints import SECONDS, Interval, check_arguments
from .constraints import Callable as IsCallable
from .errors import require_callable

__all__ = [
    "Event",
    "TaskInfo",
    "RunStarted",
    "RunFinished",
    "PhaseStarted",
    "PhaseFinished",
    "TaskSubmitted",
    "TaskStarted",
    "TaskFinished",
    "TaskFailed",
    "NodeJoined",
    "DeviceStats",
    "StageStats",
    "ProgramStepped",
    "SweepStarted",
    "TrialsAdded",
    "TrialStarted",
    "TrialReported",
    "TrialFinished",
    "EventBus",
    "Observable",
    "run_of",
]

logger = logging.getLogger("labkit.events")

#: What ``subscribe`` takes besides the subscriber.
SUBSCRIBE_RULES = {
    "state_every": [Interval(float, 0, finite=True, name=SECONDS.name), IsCallable(), None]
}
_BUS_LOCK = threading.Lock()  # makes each observable's bus, once


@dataclass(frozen=True)
class TaskInfo:
    """Where a task belongs: its run, its id, the chunk it carries, node and phase."""

    run: str
    task: int
    chunk: int
    kind: str = "task"  # "train", "execute" or "task"
    node: int | None = None
    node_name: str | None = None
    phase: int | None = None

    def where(self) -> dict:
        """The location keys of this task, for errors."""
        return {
            "node": self.node,
            "node_name": self.node_name,
            "phase": self.phase,
            "chunk": self.chunk,
        }


@dataclass(frozen=True)
class Event:
    """Base of all events; ``time`` is seconds since the epoch."""


def _now() -> float:
    return time.time()


@dataclass(frozen=True)
class RunStarted(Event):
    run: str
    kind: str  # "train", "execute", "fit", "ensemble", "sweep" ...
    n_nodes: int
    time: float = field(default_factory=_now)
    detail: dict[str, Any] = field(default_factory=dict)  # what views say of the run: its
    #                                   name, epochs, an estimator's parameters ...


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
    local: bool  # trained on the client, no tasks
    n_tasks: int | None = None  # known only when the input has a length
    time: float = field(default_factory=_now)
    detail: str | None = None  # what the tasks are, in words: "3 estimators x 5 folds"


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
    error: str  # message with location
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

    device: str  # a Dask worker address or a torch device name
    kind: str = "worker"  # "worker" or "device"
    memory: int | None = None  # bytes in use
    memory_limit: int | None = None
    samples_per_s: float | None = None
    step_time: float | None = None  # seconds per step (data-parallel trainers)
    busy: float | None = None  # fraction of the step the device computed
    share: float | None = None  # fraction of the batch it gets (work load)
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class StageStats(Event):
    """Throughput of one pipeline stage so far."""

    stage: str
    records: int  # records processed
    records_per_s: float
    busy_s: float  # seconds spent in the processor, all threads
    queue_fill: float | None  # output queue length / capacity; None if not a Queue
    final: bool = False  # the last one, sent when the stage ended
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class ProgramStepped(Event):
    """A step-wise program changed: it stepped, started, paused or stopped."""

    steps: int
    status: str  # "INCOMPLETE", "DONE" or "NOT STARTED"
    running: bool  # stepping in the background
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class SweepStarted(Event):
    """A sweep began (or resumed): what it searches and every trial known so far.

    ``space`` maps each parameter to its description (``{"type": "loguniform",
    "lo": ..., "hi": ...}``, ``"choice"`` with ``values``, ``"grid"``,
    ``"constant"``); ``trials`` holds one plain row a trial (``id``, ``config``,
    ``status``, ``value``, ``best``, ``step``), those a resumed sweep finished before too.
    """

    run: str
    name: str
    metric: str
    mode: str  # "min" or "max"
    space: dict
    trials: tuple  # rows as in TrialsAdded
    slots: int  # trials running at once
    rule: str | None = None  # the early-stopping rule, described
    store: str | None = None  # the store's path (None: in memory)
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class TrialsAdded(Event):
    """Trials added to a running sweep (``rows`` as in SweepStarted.trials)."""

    run: str
    trials: tuple
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class TrialStarted(Event):
    """A trial started on ``worker``; ``attempt`` > 0 when it restarted (from ``step``)."""

    run: str
    trial: int
    config: dict
    worker: str
    attempt: int = 0
    step: int | float | None = None  # the step of the checkpoint it goes on from
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class TrialReported(Event):
    """Reports of one trial that arrived together: ``steps[i]`` with ``metrics[i]``.

    ``value`` is the latest value of the sweep's metric and ``best`` the best
    so far (None until the trial reports the metric).
    """

    run: str
    trial: int
    steps: tuple
    metrics: tuple  # one dict of floats a step
    value: float | None = None
    best: float | None = None
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class TrialFinished(Event):
    """A trial ended: ``record`` is the trial as it ended (a frozen ``lk.experiments.TrialRecord``).

    Its ``status`` is completed, stopped, failed or cancelled; ``reason`` says
    why a trial was stopped (the rule's words, "stopped by hand"); ``error``
    and ``traceback`` why one failed.  The record's fields read on the event
    too (``event.status``, ``event.value``), and ``event.trial`` is its id.
    """

    run: str
    record: Any  # a labkit.experiments.TrialRecord (the ground floor names no room above it)
    time: float = field(default_factory=_now)

    @property
    def trial(self) -> int:
        """The trial's id."""
        return self.record.id

    @property
    def status(self) -> str:
        """completed, stopped, failed or cancelled."""
        return self.record.status

    @property
    def metrics(self) -> dict | None:
        """The final metrics."""
        return self.record.metrics

    @property
    def value(self) -> float | None:
        """The metric's final value."""
        return self.record.value

    @property
    def best(self) -> float | None:
        """The metric's best value reported."""
        return self.record.best

    @property
    def step(self) -> int | float | None:
        """The last step reported."""
        return self.record.step

    @property
    def attempts(self) -> int:
        """Executions of the trial started."""
        return self.record.attempts

    @property
    def error(self) -> str | None:
        """Why it failed."""
        return self.record.error

    @property
    def traceback(self) -> str | None:
        """Where it failed, from the user's code."""
        return self.record.traceback

    @property
    def reason(self) -> str | None:
        """Why it was stopped."""
        return self.record.reason


def run_of(event) -> str | None:
    """The run an event belongs to, if any (device stats and stage stats belong to none)."""
    run = getattr(event, "run", None)
    if run is None and hasattr(event, "info"):
        run = event.info.run
    return run


class EventBus:
    """Delivers events to subscribers; a failing subscriber is logged, never fatal."""

    def __init__(self):
        self._subscribers: list[tuple[Callable[[Event], Any], Any]] = []
        self._lock = threading.Lock()
        self._failing: set = set()  # (subscriber, exception type) already logged

    def subscribe(
        self,
        fn: Callable[[Event], Any],
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

    def emit(self, event: Event) -> None:
        """Deliver ``event`` to every subscriber, in subscription order."""
        for fn, _ in self._subscribers:  # a snapshot: the list is replaced, never mutated
            self.deliver(fn, event)

    def deliver(self, fn: Callable[[Event], Any], event: Event) -> None:
        """Call one subscriber with ``event``, a failure logged (a run replays its past so)."""
        try:
            fn(event)
        except Exception as exc:  # a view must never stop a run
            self._log_failure(fn, event, exc)

    def _log_failure(self, fn: Callable[[Event], Any], event: Event, exc: Exception) -> None:
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

    def subscribe(self, fn: Callable[[Event], Any], state_every=None) -> Callable[[], None]:
        """Call ``fn(event)`` for every event; returns a function that unsubscribes.

        ``state_every``: seconds between node states (plot arrays) this
        subscriber wants; ``None`` (the default) for counts only.
        """
        return self.events.subscribe(fn, state_every)

    def emit(self, event: Event) -> None:
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
