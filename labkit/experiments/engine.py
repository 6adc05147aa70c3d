"""The sweep on the client: every trial's state, the rule's decisions, the store, the events.

One :class:`SweepEngine` a sweep.  Whatever runs trials (:mod:`.launch`) and
whatever carries their reports (:mod:`.sinks`) calls the same few methods,
from any thread: :meth:`~SweepEngine.take` (the next trial to run),
:meth:`~SweepEngine.started`, :meth:`~SweepEngine.reported` (returns whether
the trial must stop), :meth:`~SweepEngine.checkpointed` and
:meth:`~SweepEngine.finished`.  Each updates the trial's record under one
lock, queues the store's writes (never waiting on the disk) and emits the
events views draw (:class:`~labkit.events.TrialStarted`,
:class:`~labkit.events.TrialReported`, :class:`~labkit.events.TrialFinished`).
The loop (:mod:`.loop`) winds a sweep down through :meth:`~SweepEngine.cancel`
and :meth:`~SweepEngine.cancel_launched`.

A run of a trial's function is an *execution*; a trial whose worker died
runs again (a new execution, from its latest checkpoint), and messages of an
execution that is no longer the trial's are ignored.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from typing import Any

from ..events import TrialFinished, TrialMoved, TrialReported, TrialsAdded, TrialStarted
from .launch.worker_namer import WorkerNamer
from .objectives.declared import checked_final, final_fields
from .search.chain import DecisionChain
from .search.searcher import Searcher
from .spec import SweepSpec
from .trials.checkpoint_place import as_ref
from .trials.record import TrialRecord, better
from .trials.state import TrialState
from .trials.status import ENDED, TERMINAL, Status
from .trials.verdict import verdict

__all__ = ["SweepEngine", "TrialState", "TERMINAL", "ENDED"]

logger = logging.getLogger("labkit.experiments")


class SweepEngine:
    """The state of one sweep, changed from any thread; see the module's docstring."""

    def __init__(self, spec: SweepSpec, store: Any):
        self.sweep, self.store = spec, store
        self.name, self.metric, self.mode = spec.name, spec.metric, spec.mode
        self.max_failures = spec.max_failures
        self.lock = threading.RLock()
        self.states: dict[int, TrialState] = {}
        self.pending: collections.deque = collections.deque()
        self.searcher = Searcher(spec.search, store, spec.name, self)  # ask and tell
        #: what decides at each report: the search's decider (PBT), then the rule's
        self.decisions = DecisionChain(spec, self)
        if self.decisions.keeps:  # the store asks for the rule's state once a commit
            store.keep_rule_state(spec.name, self._rule_state)
        #: the names of the workers trials ran on, learned off the trials' path and kept
        #: with the sweep (a stored board names them as the live one did)
        self.namer = WorkerNamer(self._client, store.workers(spec.name))
        store.keep_worker_names(spec.name, self.namer.take)
        self.workers_seen: set[str] = set()  # the trials' workers told the namer
        self.scope: Any = None  # the run's scope, once running
        self.launcher: Any = None
        self.cancelling = False
        #: what the loop waits on: wake-ups, and the launcher's messages
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()

    def _client(self) -> Any:
        """The Dask client the sweep's trials run through (None: none, or not running yet)."""
        return getattr(getattr(self.launcher, "scheduler", None), "client", None)

    def _rule_state(self) -> dict | None:
        """The rule's state if it changed since the store last took it (the store's thread)."""
        with self.lock:
            return self.decisions.take_state()

    # -- set-up ----------------------------------------------------------------------------

    def resume(self, records: list[TrialRecord], rule_state: dict | None) -> None:
        """Know the stored trials of a resumed sweep; queue those that did not end for good."""
        with self.lock:
            self.decisions.resume(records, rule_state)
            for record in records:
                if record.status not in TERMINAL:
                    if record.status != Status.PENDING:  # interrupted: it runs again
                        self.store.trial_pending(self.name, record.id)
                    record = record.replace(status=Status.PENDING)
                self._know(record)
            self.searcher.resume(records)

    def add(self, records: list[TrialRecord]) -> None:
        """Know new pending trials (stored with the next commit) and queue them."""
        with self.lock:
            self.store.add_trials(self.name, [(r.id, r.config) for r in records])
            for record in records:
                self.decisions.added(record.id)
                self._know(record)

    def _know(self, record: TrialRecord) -> None:
        self.states[record.id] = TrialState.of(record)
        if record.status not in TERMINAL:
            self.pending.append(record.id)

    def add_trials(self, n: int) -> list[int]:
        """``n`` more trials, run after those pending; their ids."""
        with self.lock:
            records = self.sweep.new_records(len(self.states), n)
            self.add(records)
            self.sweep.trials = len(self.states)
            self.store.update_sweep(self.name, self.sweep.settings())
        self.emit(TrialsAdded(self.run_id, tuple(r.row(history=False) for r in records)))
        self.wake()
        return [r.id for r in records]

    # -- what launchers and sinks call -------------------------------------------------------

    def take(self) -> TrialState | None:
        """The next trial to run (marked launched), or None (none pending, or cancelling)."""
        with self.lock:
            while self.pending and not self.check_cancel():
                state = self.states[self.pending.popleft()]
                if state.status not in TERMINAL and not state.launched:
                    if not self.searcher.take(state, self.end):  # asked now (failed: ended)
                        continue
                    state.launched = True
                    return state
            return None

    def started(self, trial: int, execution: str, worker: str) -> None:
        """An execution of ``trial`` began on ``worker``."""
        with self.lock:
            s = self.states[trial]
            if s.status in ENDED:
                return
            if s.execution is not None and s.status == Status.RUNNING:  # a lost worker's rerun
                self._lost_under(s, worker)
            s.execution, s.fresh = execution, True
            s.update(
                status=Status.RUNNING,
                attempts=s.attempts + 1,
                worker=worker,
                started=s.started or time.time(),
            )
            self.store.trial_started(self.name, trial, s.attempts, worker, s.started, s.moves)
            if worker not in self.workers_seen:  # a worker's name is learned once
                self.workers_seen.add(worker)
                self.namer.seen(worker)
            if not self._listened():  # the hot path: no event (and no copy) for nobody
                return
            step = s.step if s.attempts > 1 else None  # where a rerun goes on from
            event = TrialStarted(self.run_id, trial, dict(s.config), worker, s.attempts - 1, step)
        self.emit(event)

    def _lost_under(self, s: TrialState, worker: str) -> None:
        """A worker was lost under ``s`` (it runs again); too many times: it must stop."""
        s.failures += 1
        logger.warning(
            "labkit: trial %d runs again on %s (a worker was lost under it, %d time(s))",
            s.id,
            worker,
            s.failures,
        )
        if s.failures > self.max_failures:
            why = f"its worker was lost {s.failures} times (max_failures={self.max_failures})"
            self.request_stop(s, "lost", why)

    def reported(self, trial: int, execution: str, reports: list) -> bool:
        """Reports ``[(step, metrics, time), ...]`` of one execution; whether it must stop."""
        with self.lock:
            s = self.states[trial]
            if s.execution != execution or s.status != Status.RUNNING:
                return True  # an execution the sweep gave up (its trial ended or ran again)
            if s.fresh and s.history and reports[0][0] <= s.history[-1][0]:
                self._forget_from(s, reports[0][0])  # a restart reports these steps again
            s.fresh = False
            s.history.extend(reports)
            self._judge(s, reports)
            self.store.trial_reports(
                self.name, trial, s.attempts, reports, (s.record.value, s.record.best, s.step)
            )
            if self.check_cancel() and s.stop is None:
                self.request_stop(s, "cancel", "the sweep was cancelled")
            stop = s.stop is not None
            if not self._listened():  # the hot path: no event for nobody
                return stop
            event = TrialReported(
                self.run_id,
                trial,
                tuple(r[0] for r in reports),
                tuple(r[1] for r in reports),
                s.record.value,
                s.record.best,
            )
        self.emit(event)
        return stop

    def _judge(self, s: TrialState, reports: list) -> None:
        """The metric's latest and best value from ``reports``, and the rule's decisions."""
        value, best = s.record.value, s.record.best
        for step, metrics, _ in reports:
            if self.metric not in metrics:
                continue
            value = metrics[self.metric]
            if better(value, best, self.mode):
                best = value
            self.searcher.reported(s, step, value)  # told (a sampler learns)
            self.decisions.reported(s, step, value)  # decided: stop, pause, exploit
        s.update(value=value, best=best, step=s.history[-1][0] if s.history else None)

    def checkpointed(self, trial: int, execution: str, step, ref: Any) -> None:
        """The trial wrote its latest checkpoint (taken at ``step``); ``ref`` says where.

        Only the reference comes here (a CheckpointRef, or its fields): the
        bytes went from the trial's process to the sweep's location."""
        ref = as_ref(ref)
        with self.lock:
            s = self.states[trial]
            if s.execution != execution or s.status != Status.RUNNING:
                return
            s.seq += 1
            s.ref = ref
            self.decisions.checkpointed(s, step, ref)  # PBT: a pause due at this step
            self.store.save_checkpoint(self.name, trial, s.seq, step, ref)
            if self.launcher is not None:
                self.launcher.checkpointed(s, s.seq, ref)

    def restore_blob(self, trial: int) -> Any:
        """The reference of the trial's latest checkpoint (held here, else in the store), or None."""
        with self.lock:
            s = self.states[trial]
            if s.ref is not None:
                return s.ref
        held = self.store.checkpoint(self.name, trial)
        if held is None:
            return None
        with self.lock:
            s.ref, s.seq = held[0], max(s.seq, held[2])
        return held[0]

    def attempt(self, trial: int) -> int:
        """The attempt the trial's current execution is (0 the first; ``trial.attempt``)."""
        with self.lock:
            return max(0, self.states[trial].attempts - 1)

    def stop_requested(self, trial: int, execution: str) -> bool:
        """Whether this execution of ``trial`` must stop."""
        with self.lock:
            s = self.states[trial]
            if self.check_cancel() and s.stop is None and s.status == Status.RUNNING:
                self.request_stop(s, "cancel", "the sweep was cancelled")
            return s.stop is not None or s.execution != execution

    def finished(self, trial: int, execution: str | None, outcome: dict) -> None:
        """An execution of ``trial`` ended with ``outcome`` (see :func:`.execution.execute`)."""
        with self.lock:
            s = self.states[trial]
            if s.status in ENDED or (
                execution is not None and s.execution is not None and execution != s.execution
            ):
                return
            if self.decisions.requeue(s, outcome) or (  # a pause or an exploit: it runs again
                outcome["status"] in ("lost", "moved")
                and self._restart(s, outcome.get("error"), outcome["status"] == "moved")
            ):
                self.wake()
                return
            status, fields = verdict(s.id, s.history, s.stop, outcome, self.metric)
            status, fields = checked_final(s.id, status, fields, self.sweep, outcome)
            event = self.end(s, status, **fields)
            # runners that pull trials need no loop to start the next; the loop is woken
            # when there is nothing left to pull (to end), or for launchers it feeds
            wake = not self.pending or self.launcher is None or not self.launcher.pulls
        self.emit(event)
        if wake:
            self.wake()

    # -- decisions -------------------------------------------------------------------------

    def request_stop(self, s: TrialState, kind: str, reason: str) -> None:
        """Ask ``s`` to stop (``kind``: rule, search, fail, hand, lost or cancel); under the lock."""
        s.stop = (kind, reason)
        if self.launcher is not None:
            self.launcher.stop(s)

    def stop_trial(self, trial: int, reason: str = "stopped by hand") -> bool:
        """Stop ``trial`` (its next report raises TrialStopped); False if it had ended."""
        with self.lock:
            s = self.states.get(trial)
            if s is None or s.status in ENDED:
                return False
            if s.status == Status.PENDING and not s.launched:
                event = self.end(s, Status.STOPPED, reason=reason)
            else:
                self.request_stop(s, "hand", reason)
                return True
        self.emit(event)
        self.wake()
        return True

    def _restart(self, s: TrialState, why: str | None, moved: bool = False) -> bool:
        """Queue ``s`` again after its worker was lost, if it may; whether it was (``moved``:
        its worker left gracefully, a retirement: a move, not a failure)."""
        if moved:
            s.update(moves=s.moves + 1)
            self.searcher.later.append(TrialMoved(self.run_id, s.id, s.worker, why, s.moves))
            if self.cancelling or s.stop is not None:
                return False
            logger.info(
                "labkit: trial %d moves (%s); it goes on from its last checkpoint", s.id, why
            )
            return self._requeue(s)
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
        return self._requeue(s)

    def _requeue(self, s: TrialState) -> bool:
        """Queue ``s`` first again (it goes on from its last checkpoint); True."""
        s.launched, s.execution = False, None
        s.update(status=Status.PENDING)
        self.pending.appendleft(s.id)
        return True

    def end(self, s: TrialState, status: Status, **fields: Any) -> TrialFinished:
        """Record the end of ``s`` (call under the lock); its event, for the caller to emit.

        ``fields``: ``metrics``, ``error``, ``traceback``, ``reason``, ``constraints``.
        """
        metrics = fields.get("metrics")
        value, best = s.record.value, s.record.best
        if metrics and self.metric in metrics:
            value = metrics[self.metric]
            if better(value, best, self.mode):
                best = value
        s.launched, s.ref = False, None
        s.update(
            status=status,
            metrics=metrics,
            error=fields.get("error"),
            traceback=fields.get("traceback"),
            reason=fields.get("reason"),
            value=value,
            best=best,
            ended=time.time(),
            **final_fields(self.sweep.objectives, fields),
        )
        if self.launcher is not None:
            self.launcher.ended(s)
        self.decisions.ended(s.id, status)
        final = s.frozen()  # the record as it ended, its reports a tuple
        self.searcher.ended(final)
        self.store.trial_ended(self.name, final)
        return TrialFinished(self.run_id, final)

    def _forget_from(self, s: TrialState, step) -> None:
        """Drop ``s``'s reports from ``step`` on: its restart reports them again."""
        history = [r for r in s.history if r[0] < step]
        self.decisions.restarted(s.id, step)
        self.store.drop_reports(self.name, s.id, step)
        value = best = None
        for _, metrics, _ in history:
            if self.metric in metrics:
                value = metrics[self.metric]
                best = value if better(value, best, self.mode) else best
        s.history = history
        s.update(value=value, best=best, step=history[-1][0] if history else None)

    # -- the loop's verbs --------------------------------------------------------------------

    def cancel(self) -> None:
        """Wind down: run nothing more, ask every launched trial to stop."""
        with self.lock:
            self.cancelling = True
            self.pending.clear()  # they stay pending in the store: a resume runs them
            for state in self.states.values():
                if state.launched and state.stop is None:
                    self.request_stop(state, "cancel", "the sweep was cancelled")

    def cancel_launched(self) -> None:
        """Record every trial still launched as cancelled (a resume runs it again)."""
        with self.lock:
            events = [
                self.end(s, Status.CANCELLED, reason="the sweep was cancelled")
                for s in self.states.values()
                if s.launched
            ]
        for event in events:
            self.emit(event)

    @property
    def run_id(self) -> str:
        """The id of the sweep's run ("" before it runs)."""
        return self.scope.id if self.scope is not None else ""

    def _listened(self) -> bool:
        """Whether anybody listens to the sweep's events."""
        return self.scope is not None and any(
            source.has_subscribers for source in self.scope.sources
        )

    def emit(self, event: Any) -> None:
        """Send ``event`` to the run's listeners (call outside the lock)."""
        if self.scope is not None:
            while self.searcher.later:  # trials whose search failed to ask, ended in take()
                self.scope.emit(self.searcher.later.pop(0))
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
        """Every trial as a plain row (see :meth:`TrialRecord.row`), in id order."""
        with self.lock:
            return [self._frozen(i, history).row(history) for i in sorted(self.states)]

    def records(self) -> list[TrialRecord]:
        """Every trial's record (its reports so far a tuple), in id order."""
        with self.lock:
            return [self.states[i].frozen() for i in sorted(self.states)]

    def _frozen(self, trial: int, history: bool) -> TrialRecord:
        """``trial``'s record, with its reports if ``history`` (else none: no copy made)."""
        s = self.states[trial]
        return s.frozen() if history else s.record
