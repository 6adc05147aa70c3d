"""The progress tracker: events in, frozen snapshots of runs, phases and fits out.

:class:`ProgressTracker` keeps a :class:`RunProgress` per run and a
:class:`PhaseProgress` per phase, keyed by ``(run, node, phase)`` (an
execute run has node and phase ``None``).  A fit is read from its run and
its epochs' phases (one phase an epoch): :func:`fit_progress` gives its
:class:`FitProgress`.  No UI imports here, and no words: renderers (console,
widgets, Bokeh) draw the snapshots, in the words of :mod:`.words`.

Examples
--------
>>> from labkit.events import PhaseStarted, TaskInfo, TaskSubmitted, TaskFinished
>>> t = ProgressTracker()
>>> t(PhaseStarted(run="r", node=0, node_name="PCA", phase=0, local=False, n_tasks=2))
>>> info = TaskInfo("r", 0, 0, "train", 0, "PCA", 0)
>>> t(TaskSubmitted(info)); t(TaskFinished(info, "w1", 1.0, 2.0, 10))
>>> snap = t.snapshot()[0]
>>> (snap.node_name, snap.done, snap.total, snap.fraction)
('PCA', 1, 2, 0.5)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from ...events import (
    Event,
    NodeJoined,
    PhaseFinished,
    PhaseStarted,
    RunFinished,
    RunStarted,
    TaskFailed,
    TaskFinished,
    TaskStarted,
    TaskSubmitted,
    handles,
)

__all__ = ["PhaseProgress", "RunProgress", "FitProgress", "ProgressTracker", "fit_progress"]


@dataclass(frozen=True)
class RunProgress:
    """One run (a flow's training, a fit, an ensemble, a batch of your own tasks) so far."""

    run: str
    kind: str
    started: float
    detail: dict = field(default_factory=dict)  # RunStarted.detail: name, epochs, params
    finished: float | None = None
    ok: bool = True
    cancelled: bool = False
    error: str | None = None

    @property
    def status(self) -> str:
        """``running``, ``finished``, ``failed`` or ``cancelled``: the words of every view."""
        if self.finished is None:
            return "running"
        return "cancelled" if self.cancelled else "finished" if self.ok else "failed"

    @property
    def name(self) -> str:
        """What the run is called on a board: its ``name`` if it has one, else its kind."""
        return str(self.detail.get("name") or self.kind)


@dataclass(frozen=True)
class PhaseProgress:
    """Progress of one phase (or one execute run) at one moment."""

    run: str
    node: int | None
    node_name: str
    phase: int | None
    local: bool = False
    submitted: int = 0
    running: int = 0
    done: int = 0
    failed: int = 0
    total: int | None = None  # known when the input has a length, or at the end
    samples: int = 0
    started: float = 0.0
    finished: float | None = None
    ok: bool = True
    cancelled: bool = False  # ended by a cancel (then not ok, but no failure)
    errors: tuple[str, ...] = ()
    kind: str = "train"  # the run's: train, execute, fit, ensemble, evaluate ...
    detail: str | None = None  # what the tasks are, in words ("2 estimators × 5 folds")
    steps: int = 0  # a trainer's batches so far (its tasks are replicas)
    loss: float | None = None  # a trainer's latest loss
    record: dict | None = None  # a finished epoch's record, as fit returns it

    @property
    def fraction(self) -> float | None:
        """Done over total, when the total is known."""
        return self.done / self.total if self.total else None

    def rate(self, now: float | None = None) -> float:
        """Tasks done per second so far."""
        elapsed = (self.finished or now or time.time()) - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    def eta(self, now: float | None = None) -> float | None:
        """Seconds left at the current rate, when the total is known."""
        rate = self.rate(now)
        if self.total is None or self.finished is not None or rate == 0:
            return None
        return max(self.total - self.done, 0) / rate


@dataclass(frozen=True)
class FitProgress:
    """A fit at one moment: epochs and batches done, its time, and the epochs' records."""

    epochs: int | None  # epochs the fit runs (None: not said)
    epoch: int  # the epoch under way (or the last), from 1
    done: int  # epochs finished
    batch: int  # batches done in the epoch under way
    batches: int | None  # batches an epoch, when known
    elapsed: float
    eta: float | None  # seconds left for the whole fit
    loss: float | None  # the latest loss reported
    samples_per_s: float | None
    records: tuple  # the records of finished epochs, as fit returns them
    status: str

    @property
    def fraction(self) -> float | None:
        """How much of the whole fit is done (None without a count of epochs)."""
        if not self.epochs:
            return None
        inner = self.batch / self.batches if self.batches else 0.0
        return min(1.0, (self.done + (0.0 if self.done >= self.epochs else inner)) / self.epochs)


def fit_progress(run: RunProgress, phases: list[PhaseProgress], now: float) -> FitProgress:
    """The progress of fit ``run`` from its epochs' phases (one phase an epoch)."""
    epochs = run.detail.get("epochs")
    mine = sorted((p for p in phases if p.run == run.run), key=lambda p: p.phase or 0)
    records = tuple(p.record for p in mine if p.record)
    current = mine[-1] if mine else None
    done = sum(1 for p in mine if p.finished is not None and p.ok)
    elapsed = (run.finished or now) - run.started
    batch = current.steps if current is not None else 0
    batches = run.detail.get("batches") or next(
        (p.steps for p in reversed(mine) if p.finished is not None and p.ok), None
    )
    loss = current.loss if current is not None else None
    rate_now = None
    if current is not None and current.record:
        rate_now = current.record["samples_per_s"]
    elif current is not None and current.samples:
        rate_now = current.samples / max((current.finished or now) - current.started, 1e-9)
    fp = FitProgress(
        epochs,
        (current.phase or 0) + 1 if current is not None else 1,
        done,
        batch,
        batches or _batches_of(current),
        elapsed,
        None,
        loss,
        rate_now,
        records,
        run.status,
    )
    fraction = fp.fraction
    eta = elapsed * (1 - fraction) / fraction if fraction and run.finished is None else None
    return FitProgress(**{**fp.__dict__, "eta": eta})


def _batches_of(p: PhaseProgress | None) -> int | None:
    """Batches of an epoch: its tasks' total over its devices, where the phase knows it."""
    if p is None or not p.total or not p.steps or not p.done:
        return None
    return round(p.total * p.steps / p.done)


@dataclass
class _Entry:
    progress: PhaseProgress
    running: set = field(default_factory=set)


class ProgressTracker:
    """Subscribe it to a scheduler or run; read :meth:`snapshot` from any thread."""

    max_errors = 20

    def __init__(self):
        self._lock = threading.Lock()
        self._phases: dict[tuple, _Entry] = {}
        self._kinds: dict[str, str] = {}  # run id -> the run's kind
        self._runs: dict[str, RunProgress] = {}
        self.version = 0  # bumped on every change, so renderers can skip redraws

    def __call__(self, event: Event) -> None:
        handler = self._HANDLERS.get(type(event))
        if handler is not None:
            with self._lock:
                handler(self, event)
                self.version += 1

    def snapshot(self) -> list[PhaseProgress]:
        """Every phase seen so far, oldest first."""
        with self._lock:
            return [replace(e.progress, running=len(e.running)) for e in self._phases.values()]

    def runs(self) -> list[RunProgress]:
        """Every run seen so far, oldest first."""
        with self._lock:
            return list(self._runs.values())

    # -- event handlers (called under the lock) -----------------------------------

    def _entry(self, info) -> _Entry:
        key = (info.run, info.node, info.phase)
        if key not in self._phases:  # an execute run, or tasks of a manual run
            name = info.node_name or info.kind
            self._phases[key] = _Entry(
                PhaseProgress(info.run, info.node, name, info.phase, started=time.time())
            )
        return self._phases[key]

    def _update(self, entry: _Entry, **changes) -> None:
        entry.progress = replace(entry.progress, **changes)

    def _on_run_started(self, e: RunStarted) -> None:
        self._kinds[e.run] = e.kind
        self._runs[e.run] = RunProgress(e.run, e.kind, e.time, dict(getattr(e, "detail", {})))
        if e.kind == "execute":
            self._phases[(e.run, None, None)] = _Entry(
                PhaseProgress(e.run, None, "execute", None, started=e.time)
            )

    def _on_phase_started(self, e: PhaseStarted) -> None:
        self._phases[(e.run, e.node, e.phase)] = _Entry(
            PhaseProgress(
                e.run,
                e.node,
                e.node_name,
                e.phase,
                local=e.local,
                total=e.n_tasks,
                started=e.time,
                kind=self._kinds.get(e.run, "train"),
                detail=getattr(e, "detail", None),
            )
        )

    def _on_node_joined(self, e: NodeJoined) -> None:
        entry = self._phases.get((e.run, e.node, e.phase))
        if entry is None or entry.progress.kind != "fit" or entry.progress.record is not None:
            return  # a finished epoch keeps its record's numbers
        losses = _ys(e.state.get("plots", {}).get("loss")) or [None]
        self._update(entry, steps=e.state.get("batches", e.joins), loss=losses[-1])

    def _on_phase_finished(self, e: PhaseFinished) -> None:
        entry = self._phases.get((e.run, e.node, e.phase))
        if entry is not None:
            total = e.n_tasks if e.ok and not entry.progress.local else entry.progress.total
            self._update(entry, finished=e.time, ok=e.ok, total=total)
            if entry.progress.kind == "fit" and e.state:  # the epoch's last batch and loss
                losses = _ys(e.state.get("plots", {}).get("loss")) or [entry.progress.loss]
                record = e.state.get("record")  # then the numbers fit returns, no others
                self._update(
                    entry,
                    steps=e.state.get("batches", entry.progress.steps),
                    loss=record["loss"] if record else losses[-1],
                    record=record,
                )
            entry.running.clear()

    def _on_task_submitted(self, e: TaskSubmitted) -> None:
        entry = self._entry(e.info)
        self._update(entry, submitted=entry.progress.submitted + 1)

    def _on_task_started(self, e: TaskStarted) -> None:
        entry = self._entry(e.info)
        if entry.progress.finished is None:
            entry.running.add(e.info.task)

    def _on_task_finished(self, e: TaskFinished) -> None:
        entry = self._entry(e.info)
        entry.running.discard(e.info.task)
        self._update(
            entry, done=entry.progress.done + 1, samples=entry.progress.samples + (e.n_samples or 0)
        )

    def _on_task_failed(self, e: TaskFailed) -> None:
        entry = self._entry(e.info)
        entry.running.discard(e.info.task)
        errors = (entry.progress.errors + (e.error,))[-self.max_errors :]
        self._update(entry, failed=entry.progress.failed + 1, errors=errors)

    def _on_run_finished(self, e: RunFinished) -> None:
        run = self._runs.get(e.run)
        if run is not None:
            self._runs[e.run] = replace(
                run,
                finished=e.time,
                ok=e.ok,
                cancelled=getattr(e, "cancelled", False),
                error=getattr(e, "error", None),
            )
        if getattr(e, "cancelled", False):
            for key, run_entry in self._phases.items():
                p = run_entry.progress
                if key[0] == e.run and (p.finished is None or not p.ok):
                    self._update(run_entry, cancelled=True, ok=False, finished=p.finished or e.time)
                    run_entry.running.clear()
        entry = self._phases.get((e.run, None, None))
        if entry is not None:
            self._update(
                entry,
                finished=e.time,
                ok=e.ok,
                total=entry.progress.done + entry.progress.failed if e.ok else None,
            )

    #: Each event class the progress takes -> its handler (called with it and the event).
    _HANDLERS: ClassVar[dict[type[Event], Callable[[Any, Any], None]]] = dict(
        [
            handles(RunStarted, _on_run_started),
            handles(PhaseStarted, _on_phase_started),
            handles(NodeJoined, _on_node_joined),
            handles(PhaseFinished, _on_phase_finished),
            handles(TaskSubmitted, _on_task_submitted),
            handles(TaskStarted, _on_task_started),
            handles(TaskFinished, _on_task_finished),
            handles(TaskFailed, _on_task_failed),
            handles(RunFinished, _on_run_finished),
        ]
    )


def _ys(values) -> list:
    """The y values of a plotted array: a list, or the ``"y"`` of ``{"x": .., "y": ..}``."""
    if isinstance(values, dict):
        return list(values.get("y", []))
    return list(values or [])
