"""The sweep's early-stopping rule at work: its history, its hooks, its state kept in the store.

One :class:`Judge` a sweep, called by the engine under its lock.  It keeps
every trial's curve (:class:`~.rules.History`), asks the rule for a decision
on each value of the metric (a rule that raises is logged and lets the trial
go on), calls the rule's lifecycle hooks where it has them, and hands the
rule's ``state()`` to the store when asked (:meth:`Judge.take_state`: the
store asks once a commit, so the state, whose size grows with the sweep, is
not built again at every decision).  A resumed sweep gives the stored state
back (:meth:`Judge.resume`); only a rule that keeps no state, or a store
written before rules kept theirs, is rebuilt by replaying the stored reports.
"""

from __future__ import annotations

import logging
from typing import Any

from ..trials.record import TrialRecord
from .rules import History, describe_rule

__all__ = ["Judge"]

logger = logging.getLogger("labkit.experiments")


class Judge:
    """The rule of one sweep (``None``: no early stopping) and the history it decides on."""

    def __init__(self, rule: Any, mode: str, metric: str):
        self.rule, self.metric = rule, metric
        self.history = History(mode)
        self._revision = getattr(rule, "revision", None)

    @property
    def keeps(self) -> bool:
        """Whether the rule keeps a state to store (``state()``)."""
        return callable(getattr(self.rule, "state", None))

    def resume(self, records: list[TrialRecord], state: dict | None) -> None:
        """Know the trials of a resumed sweep: their curves, and the rule's records.

        ``state`` is what :meth:`saved` stored; a rule that keeps none, another
        rule, or a store that holds none (written before rules kept theirs)
        rebuilds its records by replaying the stored reports instead.
        """
        if self.rule is None:  # nothing decides on the curves: none to know
            return
        for record in records:
            self._hook("on_trial_add", record.id)
            for step, metrics, _ in record.history:
                if self.metric in metrics:
                    self.history.add(record.id, step, metrics[self.metric])
        load = getattr(self.rule, "load_state", None)
        if callable(load) and state is not None and state.get("rule") == self._words():
            load(state["state"])
        elif self.rule is not None:  # a rule that keeps no state: its records rebuilt
            self._replay(records)
        self._revision = None  # the state taken back (or rebuilt) is stored once more

    def _replay(self, records: list[TrialRecord]) -> None:
        """Rebuild the rule's records from the stored reports (in trial, then step order)."""
        replay = History(self.history.mode)
        for record in records:
            for step, metrics, _ in record.history:
                if self.metric in metrics:
                    replay.add(record.id, step, metrics[self.metric])
                    self._decide(record.id, step, metrics[self.metric], replay)

    def added(self, trial: int) -> None:
        """A new trial joined the sweep."""
        self._hook("on_trial_add", trial)

    def judge(self, trial: int, step, value: float, stopping: bool) -> str | None:
        """A value of the metric; the reason to stop ``trial``, or None (``stopping``: no decision)."""
        if self.rule is None:
            return None
        self.history.add(trial, step, value)
        if stopping:
            return None
        reason = self._decide(trial, step, value, self.history)
        if not reason:
            return None
        return reason if isinstance(reason, str) else f"{type(self.rule).__name__} at step {step}"

    def restarted(self, trial: int, from_step) -> None:
        """``trial`` reports from ``from_step`` again (it restarted from a checkpoint)."""
        self.history.truncate(trial, from_step)
        self._hook("on_trial_restart", trial, from_step)

    def ended(self, trial: int, status: str) -> None:
        """``trial`` ended."""
        self._hook("on_trial_end", trial, str(status))

    def take_state(self) -> dict | None:
        """The rule's state to store if it changed since last taken (its ``revision``), or None."""
        if not self.keeps:
            return None
        revision = getattr(self.rule, "revision", None)
        if revision == self._revision and revision is not None:
            return None
        self._revision = revision
        return {"rule": self._words(), "state": self.rule.state()}

    def _words(self) -> str:
        """The rule in words: a state is taken back only by the rule that kept it."""
        return describe_rule(self.rule)

    def _decide(self, trial: int, step, value: float, history: History):
        try:
            return self.rule.decide(trial, step, value, history)
        except Exception:
            logger.exception(
                "labkit: the early-stopping rule %r failed; the trial goes on", self.rule
            )
            return None

    def _hook(self, name: str, *args: Any) -> None:
        hook = getattr(self.rule, name, None)
        if not callable(hook):
            return
        try:
            hook(*args)
        except Exception:
            logger.exception("labkit: the early-stopping rule's %s failed", name)
