"""The sweep on the client: every trial's state, the rule's decisions, the store, the events.

One :class:`SweepEngine` a sweep.  Whatever runs trials (:mod:`.launch`) and
whatever carries their reports (:mod:`.sinks`) calls the same few methods,
from any thread: :meth:`~SweepEngine.take` (the next trial to run),
:meth:`~SweepEngine.started`, :meth:`~SweepEngine.reported` (returns whether
the trial must stop), :meth:`~SweepEngine.checkpointed` and
:meth:`~SweepEngine.finished`.  Each updates the trial's state under one
lock, queues the store's writes (never waiting on the disk) and emits the
events views draw (:class:`~labkit.events.TrialStarted`,
:class:`~labkit.events.TrialReported`, :class:`~labkit.events.TrialFinished`).

A run of a trial's function is an *execution*; a trial whose worker died
runs again (a new execution, from its latest checkpoint), and messages of an
execution that is no longer the trial's are ignored.  The loop that drives
it all is :mod:`.loop`.
"""

from __future__ import annotations

import collections
import logging
import math
import queue
import threading
import time
from dataclasses import dataclass, field

from ..events import TrialFinished, TrialReported, TrialStarted, TrialsAdded
from .result import trial_row
from .rules import History

__all__ = ["SweepEngine", "TrialState", "TERMINAL"]

logger = logging.getLogger("labkit.experiments")

#: Statuses a trial does not leave (a resumed sweep runs none of them again).
TERMINAL = ("completed", "stopped", "failed")
#: Statuses a trial does not leave within one run ("cancelled" runs again when resumed).
ENDED = (*TERMINAL, "cancelled")


@dataclass
class TrialState:
    """What the client knows of one trial."""

    id: int
    config: dict
    status: str = "pending"  # pending, running, completed, stopped, failed, cancelled
    attempts: int = 0  # executions started
    failures: int = 0  # workers lost under it
    execution: str | None = None
    fresh: bool = False  # no report yet from the current execution
    launched: bool = False  # handed to a launcher and not finished
    worker: str | None = None
    history: list = field(default_factory=list)  # [(step, {metric: value}, time), ...]
    metrics: dict | None = None  # final metrics
    value: float | None = None  # the metric's latest (final) value
    best: float | None = None  # the metric's best value so far
    error: str | None = None
    traceback: str | None = None
    reason: str | None = None
    stop: tuple | None = None  # (kind, reason) once the sweep stopped it
    blob: bytes | None = None  # latest checkpoint, kept while the trial may restart
    seq: int = 0  # checkpoints taken
    started: float | None = None
    ended: float | None = None

    @property
    def step(self):
        return self.history[-1][0] if self.history else None

    def row(self, with_history: bool = False) -> dict:
        """The trial as plain data (a board's table row; ``history`` for its curve)."""
        return trial_row(self, with_history)


class SweepEngine:
    """The state of one sweep, changed from any thread; see the module's docstring."""

    def __init__(self, sweep, store, rule=None, max_failures: int = 3):
        self.sweep, self.store, self.rule = sweep, store, rule
        self.name, self.metric, self.mode = sweep.name, sweep.metric, sweep.mode
        self.max_failures = max_failures
        self.lock = threading.RLock()
        self.states: dict[int, TrialState] = {}
        self.pending: collections.deque = collections.deque()
        self.history = History(self.mode)
        self.scope = None  # the run's scope, once running
        self.launcher = None
        self.cancelling = False
        #: what the loop waits on: wake-ups, and the launcher's messages
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()

    # -- set-up ----------------------------------------------------------------------------

    def add(self, state: TrialState, run: bool = True) -> None:
        """Know ``state`` (from the store or new); queue it when ``run``."""
        with self.lock:
            self.states[state.id] = state
            for step, metrics, _ in state.history:
                if self.metric in metrics:
                    self.history.add(state.id, step, metrics[self.metric])
                    if self.rule is not None:  # rebuild the rule's records (ASHA's rungs)
                        _safe_decide(self.rule, state.id, step, metrics[self.metric], self.history)
            if run:
                self.pending.append(state.id)

    def add_trials(self, n: int) -> list[int]:
        """``n`` more trials, run after those pending; their ids."""
        from .sweep import new_states  # the sweep knows how configurations are drawn

        with self.lock:
            states = new_states(self.sweep, len(self.states), n)
            self.store.add_trials(self.name, [(s.id, s.config) for s in states])
            for s in states:
                self.add(s)
            self.sweep.trials = len(self.states)
            self.store.update_sweep(self.name, self.sweep.settings())
        self._emit(TrialsAdded(self._run, tuple(s.row() for s in states)))
        self.wake()
        return [s.id for s in states]

    # -- what launchers and sinks call -------------------------------------------------------

    def take(self) -> TrialState | None:
        """The next trial to run (marked launched), or None (none pending, or cancelling)."""
        with self.lock:
            while self.pending and not self.check_cancel():
                state = self.states[self.pending.popleft()]
                if state.status not in TERMINAL and not state.launched:
                    state.launched = True
                    return state
            return None

    def started(self, trial: int, execution: str, worker: str) -> None:
        """An execution of ``trial`` began on ``worker``."""
        with self.lock:
            s = self.states[trial]
            if s.status in ENDED:
                return
            if s.execution is not None and s.status == "running":  # rerun after a lost worker
                s.failures += 1
                logger.warning(
                    "labkit: trial %d runs again on %s (a worker was lost under it, %d time(s))",
                    trial,
                    worker,
                    s.failures,
                )
                if s.failures > self.max_failures:
                    self._request_stop(
                        s,
                        "lost",
                        f"its worker was lost {s.failures} times "
                        f"(max_failures={self.max_failures})",
                    )
            s.execution, s.fresh, s.worker = execution, True, worker
            s.status, s.attempts = "running", s.attempts + 1
            s.started = s.started or time.time()
            self.store.trial_started(self.name, trial, s.attempts, worker, s.started)
            event = TrialStarted(
                self._run,
                trial,
                dict(s.config),
                worker,
                s.attempts - 1,
                s.step if s.attempts > 1 else None,
            )
        self._emit(event)

    def reported(self, trial: int, execution: str, reports: list) -> bool:
        """Reports ``[(step, metrics, time), ...]`` of one execution; whether it must stop."""
        with self.lock:
            s = self.states[trial]
            if s.execution != execution or s.status != "running":
                return True  # an execution the sweep gave up (its trial ended or ran again)
            if s.fresh and s.history and reports[0][0] <= s.history[-1][0]:
                self._forget_from(s, reports[0][0])  # a restart reports these steps again
            s.fresh = False
            s.history.extend(reports)
            for step, metrics, _ in reports:
                if self.metric in metrics:
                    self._judge(s, step, metrics[self.metric])
            self.store.trial_reports(
                self.name, trial, s.attempts, reports, (s.value, s.best, s.step)
            )
            if self.check_cancel() and s.stop is None:
                self._request_stop(s, "cancel", "the sweep was cancelled")
            stop = s.stop is not None
            if not self._listened():  # the hot path: no event for nobody
                return stop
            event = TrialReported(
                self._run,
                trial,
                tuple(r[0] for r in reports),
                tuple(r[1] for r in reports),
                s.value,
                s.best,
            )
        self._emit(event)
        return stop

    def checkpointed(self, trial: int, execution: str, step, blob: bytes) -> None:
        """``blob`` is the trial's latest checkpoint (taken at ``step``)."""
        with self.lock:
            s = self.states[trial]
            if s.execution != execution or s.status != "running":
                return
            s.seq += 1
            s.blob = blob
            self.store.save_checkpoint(self.name, trial, s.seq, step, blob)
            if self.launcher is not None:
                self.launcher.checkpointed(s, s.seq, blob)

    def restore_blob(self, trial: int) -> bytes | None:
        """The trial's latest checkpoint (held here, else in the store), or None."""
        with self.lock:
            s = self.states[trial]
            if s.blob is not None:
                return s.blob
        held = self.store.checkpoint(self.name, trial)
        if held is None:
            return None
        with self.lock:
            s.blob, s.seq = held[0], max(s.seq, held[2])
        return held[0]

    def attempt(self, trial: int) -> int:
        """The attempt the trial's current execution is (0 the first; ``trial.attempt``)."""
        with self.lock:
            return max(0, self.states[trial].attempts - 1)

    def stop_requested(self, trial: int, execution: str) -> bool:
        """Whether this execution of ``trial`` must stop."""
        with self.lock:
            s = self.states[trial]
            if self.check_cancel() and s.stop is None and s.status == "running":
                self._request_stop(s, "cancel", "the sweep was cancelled")
            return s.stop is not None or s.execution != execution

    def finished(self, trial: int, execution: str | None, outcome: dict) -> None:
        """An execution of ``trial`` ended with ``outcome`` (see :func:`.tasks.execute`)."""
        with self.lock:
            s = self.states[trial]
            if s.status in ENDED or (
                execution is not None and s.execution is not None and execution != s.execution
            ):
                return
            if outcome["status"] == "lost" and self._restart(s, outcome.get("error")):
                self.wake()
                return
            status, fields = self._verdict(s, outcome)
            event = self._end(s, status, **fields)
            # runners that pull trials need no loop to start the next; the loop is woken
            # when there is nothing left to pull (to end), or for launchers it feeds
            wake = not self.pending or self.launcher is None or not self.launcher.pulls
        self._emit(event)
        if wake:
            self.wake()

    # -- decisions -------------------------------------------------------------------------

    def _judge(self, s: TrialState, step, value: float) -> None:
        """A value of the metric: the trial's latest and best, and the rule's decision."""
        s.value = value
        if not math.isnan(value) and (
            s.best is None or self.history.score(value) > self.history.score(s.best)
        ):
            s.best = value
        if self.rule is None:
            return
        self.history.add(s.id, step, value)
        if s.stop is None:
            reason = _safe_decide(self.rule, s.id, step, value, self.history)
            if reason:
                self._request_stop(
                    s,
                    "rule",
                    reason
                    if isinstance(reason, str)
                    else f"{type(self.rule).__name__} at step {step}",
                )

    def _request_stop(self, s: TrialState, kind: str, reason: str) -> None:
        s.stop = (kind, reason)
        if self.launcher is not None:
            self.launcher.stop(s)

    def stop_trial(self, trial: int, reason: str = "stopped by hand") -> bool:
        """Stop ``trial`` (its next report raises TrialStopped); False if it had ended."""
        with self.lock:
            s = self.states.get(trial)
            if s is None or s.status in ENDED:
                return False
            if s.status == "pending" and not s.launched:
                event = self._end(s, "stopped", reason=reason)
            else:
                self._request_stop(s, "hand", reason)
                return True
        self._emit(event)
        self.wake()
        return True

    def _restart(self, s: TrialState, why: str | None) -> bool:
        """Queue ``s`` again after its worker was lost, if it may; whether it was."""
        s.failures += 1
        if s.failures > self.max_failures or self.cancelling:
            return False
        logger.warning(
            "labkit: trial %d lost its worker (%s); it restarts from its last "
            "checkpoint (%d of max_failures=%d)",
            s.id,
            why,
            s.failures,
            self.max_failures,
        )
        s.launched, s.execution, s.status = False, None, "pending"
        self.pending.appendleft(s.id)
        return True

    def _verdict(self, s: TrialState, outcome: dict) -> tuple[str, dict]:
        """The final status of ``s`` and the fields that go with it."""
        kind = outcome["status"]
        last = dict(s.history[-1][1]) if s.history else {}
        if kind == "lost" or (s.stop and s.stop[0] == "lost"):
            why = s.stop[1] if s.stop else outcome.get("error") or "its worker was lost"
            return "failed", {
                "error": f"WorkerLostError: trial {s.id} failed: {why}",
                "metrics": last or None,
            }
        if kind == "failed":
            return "failed", {
                "error": outcome.get("error"),
                "traceback": outcome.get("traceback"),
                "metrics": last or None,
            }
        if kind == "stopped":
            status = "cancelled" if s.stop is None or s.stop[0] == "cancel" else "stopped"
            return status, {"metrics": last or None, "reason": s.stop[1] if s.stop else "stopped"}
        metrics = outcome.get("metrics") or last
        if "value" in outcome:
            metrics = {**metrics, self.metric: outcome["value"]}
        if self.metric not in metrics:
            seen = sorted({k for _, m, _ in s.history for k in m} | set(metrics))
            return "failed", {
                "metrics": metrics or None,
                "error": (
                    f"InputError: trial {s.id} finished without reporting the metric "
                    f"{self.metric!r} (it reported {', '.join(map(repr, seen)) or 'nothing'}); "
                    f"report it with trial.report(step, {self.metric}=...) or return "
                    f"{{{self.metric!r}: ...}}"
                ),
            }
        return "completed", {"metrics": metrics}

    def _end(
        self, s: TrialState, status: str, metrics=None, error=None, traceback=None, reason=None
    ) -> TrialFinished:
        """Record the end of ``s``; its event (emitted by the caller, outside the lock)."""
        s.status, s.metrics, s.error, s.traceback, s.reason = (
            status,
            metrics,
            error,
            traceback,
            reason,
        )
        if metrics and self.metric in metrics:
            s.value = metrics[self.metric]
            if not math.isnan(s.value) and (
                s.best is None or self.history.score(s.value) > self.history.score(s.best)
            ):
                s.best = s.value
        s.launched, s.blob, s.ended = False, None, time.time()
        if self.launcher is not None:
            self.launcher.ended(s)
        self.store.trial_finished(
            self.name,
            s.id,
            status,
            metrics,
            s.value,
            s.best,
            s.step,
            error,
            traceback,
            reason,
            s.ended,
        )
        return TrialFinished(
            self._run,
            s.id,
            status,
            metrics,
            s.value,
            s.best,
            s.step,
            s.attempts,
            error,
            traceback,
            reason,
        )

    def _forget_from(self, s: TrialState, step) -> None:
        """Drop ``s``'s reports from ``step`` on: its restart reports them again."""
        s.history = [r for r in s.history if r[0] < step]
        self.history.truncate(s.id, step)
        self.store.drop_reports(self.name, s.id, step)
        values = [m[self.metric] for _, m, _ in s.history if self.metric in m]
        s.value = values[-1] if values else None
        finite = [v for v in values if not math.isnan(v)]
        s.best = (max if self.mode == "max" else min)(finite) if finite else None

    # -- the loop's helpers ------------------------------------------------------------------

    @property
    def _run(self) -> str:
        return self.scope.id if self.scope is not None else ""

    def _listened(self) -> bool:
        """Whether anybody listens to the sweep's events."""
        return self.scope is not None and any(
            source.has_subscribers for source in self.scope.sources
        )

    def _emit(self, event) -> None:
        if self.scope is not None:
            self.scope.emit(event)

    def wake(self) -> None:
        """Wake the loop (a trial ended, trials were added)."""
        self.inbox.put(("wake",))

    def check_cancel(self) -> bool:
        """Whether the sweep is being cancelled (its run's cancel seen here too)."""
        if not self.cancelling and self.scope is not None and self.scope.control.cancelled:
            self.cancelling = True
        return self.cancelling

    def active(self) -> bool:
        """Whether a trial is pending or running."""
        with self.lock:
            return bool(self.pending) or any(s.launched for s in self.states.values())

    def snapshot(self, history: bool = False) -> list[dict]:
        """Every trial as plain data (see :meth:`TrialState.row`), in id order."""
        with self.lock:
            return [self.states[i].row(history) for i in sorted(self.states)]


def _safe_decide(rule, trial, step, value, history):
    """The rule's decision; a rule that raises is logged and lets the trial go on."""
    try:
        return rule.decide(trial, step, value, history)
    except Exception:
        logger.exception("labkit: the early-stopping rule %r failed; the trial goes on", rule)
        return None
