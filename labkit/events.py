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

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from .event_bus import EventBus, Observable

if TYPE_CHECKING:  # for the types only: the record's room is above, and imports this one
    from .experiments.trials.record import TrialRecord
    from .experiments.trials.status import Status

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
    "TrialRequeued",
    "TrialFinished",
    "TrialMoved",
    "SweepWaiting",
    "SweepWorkers",
    "EventBus",
    "Observable",
    "run_of",
    "handles",
]


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
    ``objectives`` and ``modes`` name every objective of the sweep and its mode, in
    order (one each for a single metric; ``metric`` and ``mode`` are always the
    first's); left out, they are ``metric`` and ``mode`` alone.
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
    objectives: tuple = ()  # every objective's name (2 to 4 for a sweep of several)
    modes: tuple = ()  # each objective's "min" or "max", in the same order

    def __post_init__(self) -> None:
        if not self.objectives:  # one metric (or an emitter that says only the first)
            object.__setattr__(self, "objectives", (self.metric,))
            object.__setattr__(self, "modes", (self.mode,))
        object.__setattr__(self, "objectives", tuple(self.objectives))
        object.__setattr__(self, "modes", tuple(self.modes))
        if len(self.modes) != len(self.objectives):
            raise ValueError(
                f"SweepStarted: {len(self.objectives)} objective(s) {self.objectives} but "
                f"{len(self.modes)} mode(s) {self.modes}"
            )


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
class TrialRequeued(Event):
    """A trial's execution stopped and the trial waits to run again (not an end).

    Population-based training's pause (other members take their turn) or
    exploit (it goes on from a better member's checkpoint); ``reason`` says which.
    """

    run: str
    trial: int
    reason: str
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class TrialMoved(Event):
    """A trial's worker left gracefully (a retirement, a lifetime's end, a scale-down):
    the trial waits to go on from its last checkpoint on another worker (no failure).

    ``worker`` is the one it left, ``reason`` what labkit saw, ``moves`` the
    trial's moves so far, this one included.
    """

    run: str
    trial: int
    worker: str | None
    reason: str | None = None
    moves: int = 1
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class SweepWaiting(Event):
    """A sweep began to wait for workers (``waiting``: its cluster has none, and
    ``pending`` trials wait), or stopped waiting (workers joined)."""

    run: str
    name: str
    waiting: bool
    pending: int = 0
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class SweepWorkers(Event):
    """The workers a sweep on worker processes may use changed (joins, retirements, an
    adaptive cluster's scaling), first said at its start: ``workers`` of ``threads`` in all."""

    run: str
    name: str
    workers: int
    threads: int = 0
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

    Its ``status`` is completed, stopped, failed or cancelled; its ``reason``
    says why a trial was stopped (the rule's words, "stopped by hand"); its
    ``error`` and ``traceback`` why one failed (``event.record.reason``).
    ``event.trial`` is its id, and the fields a board sorts by read on the
    event too (``event.status``, ``event.value``, ``event.best``,
    ``event.step``, ``event.attempts``).
    """

    run: str
    record: TrialRecord
    time: float = field(default_factory=_now)

    @property
    def trial(self) -> int:
        """The trial's id."""
        return self.record.id

    @property
    def status(self) -> Status:
        """completed, stopped, failed or cancelled."""
        return self.record.status

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


E = TypeVar("E", bound=Event)


def handles(kind: type[E], handler: Callable[[Any, E], None]) -> tuple[type[Event], Callable]:
    """One row of a handler table: ``handler(owner, event)`` takes the events of class ``kind``.

    A view keys its table by event class (``dict([handles(TaskStarted,
    _on_task_started), ...])``, looked up with ``type(event)``), so a handler is
    found by its event's class, never by a name built from it, and mypy checks
    that each handler takes the class it is filed under.
    """
    return kind, handler


def run_of(event) -> str | None:
    """The run an event belongs to, if any (device stats and stage stats belong to none)."""
    run = getattr(event, "run", None)
    if run is None and hasattr(event, "info"):
        run = event.info.run
    return run
