"""The tracker behind every view: events in, plain snapshots out.

One :class:`Tracker` follows a scheduler (or run) and keeps three things a
view draws: task progress per phase (:class:`ProgressTracker`), the load of
each Dask worker and torch device, and the state of each node as forks are
joined in.  It also keeps the spans of finished tasks for task-stream plots;
renderers ask for the spans after the last one they drew, so they stream.
No UI library is imported here.

Examples
--------
>>> from labkit.events import TaskInfo, TaskFinished, NodeJoined
>>> t = Tracker(window=10.0)
>>> info = TaskInfo("r", 0, 0, "train", 0, "PCA", 0)
>>> t(TaskFinished(info, "tcp://w1", 100.0, 102.0, 500))
>>> t(NodeJoined("r", 0, "PCA", 0, 1, {"samples": 500, "plots": {}}))
>>> snap = t.snapshot(now=104.0)
>>> snap.devices[0].busy, snap.devices[0].samples_per_s, snap.nodes[0].joins
(0.2, 50.0, 1)
>>> [s.worker for s in t.spans_since(-1)]
['tcp://w1']
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from ...events import (
    DeviceStats,
    Event,
    NodeJoined,
    PhaseFinished,
    RunFinished,
    StageStats,
    TaskFailed,
    TaskFinished,
    TaskStarted,
    handles,
)
from .progress import PhaseProgress, ProgressTracker

__all__ = ["Tracker", "Snapshot", "DeviceLoad", "NodeView", "TaskSpan"]


@dataclass(frozen=True)
class DeviceLoad:
    """Load of one Dask worker or torch device over the last ``window`` seconds."""

    name: str
    kind: str = "worker"
    busy: float = 0.0  # fraction of the window spent running tasks
    tasks_per_s: float = 0.0
    samples_per_s: float = 0.0
    running: int = 0
    done: int = 0
    failed: int = 0
    memory: int | None = None
    memory_limit: int | None = None
    step_time: float | None = None
    share: float | None = None


@dataclass(frozen=True)
class NodeView:
    """What a view shows of one node: phase, samples, joins and arrays to plot."""

    run: str
    node: int
    name: str
    phase: int
    phases: int | None
    training: bool
    samples: int
    joins: int
    plots: dict[str, list]
    buckets: dict = field(default_factory=dict)  # steps per bucket key (bucketed trainers)


@dataclass(frozen=True)
class TaskSpan:
    """One finished (or failed) task, for task-stream plots."""

    seq: int
    worker: str
    start: float
    end: float
    run: str
    node: int | None
    node_name: str | None
    phase: int | None
    chunk: int
    ok: bool


@dataclass(frozen=True)
class Snapshot:
    """Everything a view draws, at one moment."""

    time: float
    version: int
    phases: tuple[PhaseProgress, ...]
    devices: tuple[DeviceLoad, ...]
    nodes: tuple[NodeView, ...]
    last_span: int
    stages: tuple = ()  # the latest StageStats of each pipeline stage
    runs: tuple = ()  # every run seen (RunProgress), oldest first


@dataclass
class _Device:
    kind: str = "worker"
    spans: deque = field(default_factory=deque)  # (start, end, samples) in the window
    running: dict = field(default_factory=dict)  # task id -> (start time, run id)
    done: int = 0
    failed: int = 0
    stats: DeviceStats | None = None


class Tracker:
    """Follows events; :meth:`snapshot` and :meth:`spans_since` are safe from any thread.

    Parameters
    ----------
    window : float
        Seconds over which busy fraction and rates are measured.
    max_spans : int
        Finished-task spans kept for task-stream plots.
    """

    def __init__(self, window: float = 5.0, max_spans: int = 5000):
        self.window = window
        self.progress = ProgressTracker()
        self._lock = threading.Lock()
        self._devices: dict[str, _Device] = {}
        self._nodes: dict[tuple, NodeView] = {}
        self._spans: deque[TaskSpan] = deque(maxlen=max_spans)
        self._stages: dict[str, Any] = {}
        self._seq = -1
        self._version = 0
        self._source_ended = False  # what it follows shut down: no load any more

    @property
    def version(self) -> int:
        """Changes whenever anything a view shows changed."""
        return self._version + self.progress.version

    def __call__(self, event: Event) -> None:
        self.progress(event)
        handler = self._HANDLERS.get(type(event))
        if handler is not None:
            with self._lock:
                handler(self, event)
                self._version += 1

    # -- reading -----------------------------------------------------------------

    def snapshot(self, now: float | None = None) -> Snapshot:
        """The current state, as plain frozen data."""
        now = time.time() if now is None else now
        runs = self.progress.runs()
        with self._lock:
            # nothing running any more (every run ended, no task open): no load to show,
            # whatever the last few seconds held; a board's last frame reads zero
            # (a task's start can be told after its end, from another thread: the runs'
            # ends decide, not the count of open tasks)
            idle = self._source_ended or (bool(runs) and all(r.finished is not None for r in runs))
            devices = tuple(
                self._load(name, d, now, idle) for name, d in sorted(self._devices.items())
            )
            nodes = tuple(self._nodes[k] for k in sorted(self._nodes, key=lambda k: (k[1], k[0])))
            return Snapshot(
                now,
                self.version,
                tuple(self.progress.snapshot()),
                devices,
                nodes,
                self._seq,
                tuple(self._stages.values()),
                tuple(runs),
            )

    def source_ended(self) -> None:
        """What it follows shut down: from now on no load is shown."""
        with self._lock:
            self._source_ended = True
            self._version += 1

    def spans_since(self, seq: int) -> list[TaskSpan]:
        """Finished-task spans with a sequence number above ``seq``."""
        with self._lock:
            return [s for s in self._spans if s.seq > seq]

    def _load(self, name: str, d: _Device, now: float, idle: bool = False) -> DeviceLoad:
        if idle:
            st = d.stats
            return DeviceLoad(
                name,
                d.kind,
                0.0,
                0.0,
                0.0,
                0,
                d.done,
                d.failed,
                st.memory if st else None,
                st.memory_limit if st else None,
                None,
                st.share if st else None,
            )
        start = now - self.window
        while d.spans and d.spans[0][1] < start:
            d.spans.popleft()
        busy = sum(min(e, now) - max(s, start) for s, e, _ in d.spans if e > start)
        busy += sum(now - max(s, start) for s, _ in d.running.values())
        samples = sum(n for _, e, n in d.spans if e > start)
        n_done = sum(1 for _, e, _ in d.spans if e > start)
        st = d.stats
        if st is not None and st.busy is not None and not d.spans and not d.running:
            busy = st.busy * self.window  # a torch device that reports its own busy fraction
        return DeviceLoad(
            name,
            d.kind,
            min(busy / self.window, 1.0),
            n_done / self.window,
            # what finished in the window; a device's own last step only when nothing did
            # (one step's rate swings from step to step, and reads high between reports)
            (
                samples / self.window
                if n_done or st is None or st.samples_per_s is None
                else st.samples_per_s
            ),
            len(d.running),
            d.done,
            d.failed,
            st.memory if st else None,
            st.memory_limit if st else None,
            st.step_time if st else None,
            st.share if st else None,
        )

    # -- event handlers (under the lock) -------------------------------------------

    def _device(self, name: str | None) -> _Device:
        return self._devices.setdefault(name or "local", _Device())

    def _on_task_started(self, e: TaskStarted) -> None:
        self._device(e.worker).running[e.info.task] = (e.time, e.info.run)
        for name, d in self._devices.items():  # a re-run elsewhere: the old one is not running
            if name != e.worker:
                d.running.pop(e.info.task, None)

    def _on_task_finished(self, e: TaskFinished) -> None:
        d = self._device(e.worker)
        d.running.pop(e.info.task, None)
        d.spans.append((e.start, e.end, e.n_samples or 0))
        d.done += 1
        self._add_span(e.info, e.worker, e.start, e.end, True)

    def _on_task_failed(self, e: TaskFailed) -> None:
        for d in self._devices.values():
            d.running.pop(e.info.task, None)
        if e.worker:
            self._device(e.worker).failed += 1
        now = time.time()
        self._add_span(e.info, e.worker or "local", e.start or now, e.end or now, False)

    def _on_run_finished(self, e: RunFinished) -> None:
        # Tasks of a cancelled or failed run end without an event of their own: they
        # no longer run, so the load bars must not stay at 100%.
        for d in self._devices.values():
            for task in [t for t, (_, run) in d.running.items() if run == e.run]:
                del d.running[task]
        # its nodes train no more, whatever its last join said (a failed or cancelled
        # phase left them as before it); their plots are kept
        for key, view in list(self._nodes.items()):
            if key[0] == e.run and view.training:
                self._nodes[key] = replace(view, training=False)

    def _on_device_stats(self, e: DeviceStats) -> None:
        d = self._device(e.device)
        d.kind, d.stats = e.kind, e

    def _on_stage_stats(self, e: StageStats) -> None:
        self._stages[e.stage] = e

    def _on_node_joined(self, e: NodeJoined) -> None:
        key = (e.run, e.node)
        view = self._node_view(e.run, e.node, e.node_name, e.state, phase=e.phase, joins=e.joins)
        if "plots" not in e.state and key in self._nodes:  # counts only: keep the last arrays
            view = replace(view, plots=self._nodes[key].plots)
        self._nodes[key] = view

    def _add_span(self, info, worker, start, end, ok) -> None:
        self._seq += 1
        self._spans.append(
            TaskSpan(
                self._seq,
                worker,
                start,
                end,
                info.run,
                info.node,
                info.node_name,
                info.phase,
                info.chunk,
                ok,
            )
        )

    def _on_phase_finished(self, e: PhaseFinished) -> None:
        if e.state is None:
            return
        # The node as the phase left it (e.g. its final spectrum); a node resets its
        # counters when a phase ends, so the counts are the last join's.
        key = (e.run, e.node)
        last = self._nodes.get(key)
        self._nodes[key] = self._node_view(
            e.run,
            e.node,
            e.node_name,
            e.state,
            samples=last.samples if last else None,
            joins=last.joins if last else None,
        )

    @staticmethod
    def _node_view(run, node, name, state, phase=None, joins=None, samples=None) -> NodeView:
        def pick(value, key):
            return state.get(key, 0) if value is None else value

        return NodeView(
            run,
            node,
            name,
            pick(phase, "phase"),
            state.get("phases"),
            state.get("training", True),
            pick(samples, "samples"),
            pick(joins, "joins"),
            dict(state.get("plots", {})),
            dict(state.get("buckets", {})),
        )

    #: Each event class the tracker takes (beside its progress') -> its handler (called with the tracker and the event).
    _HANDLERS: ClassVar[dict[type[Event], Callable[[Any, Any], None]]] = dict(
        [
            handles(TaskStarted, _on_task_started),
            handles(TaskFinished, _on_task_finished),
            handles(TaskFailed, _on_task_failed),
            handles(RunFinished, _on_run_finished),
            handles(DeviceStats, _on_device_stats),
            handles(StageStats, _on_stage_stats),
            handles(NodeJoined, _on_node_joined),
            handles(PhaseFinished, _on_phase_finished),
        ]
    )
