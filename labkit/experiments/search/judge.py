"""The sweep's early-stopping rule at work: its history, its hooks, its state kept in the store.

One :class:`Judge` a sweep: the rule (``lk.ASHA``, ``lk.Median``, one's own)
as a :class:`~.decision.Decider`, consulted in the sweep's decision chain
(:mod:`.chain`) under the engine's lock.  It keeps
every trial's curve (:class:`~.rules.History`), asks the rule for a decision
on each value of the metric (a rule that raises is logged and lets the trial
go on), calls the rule's lifecycle hooks where it has them (what a rule
offers is seen once, against the protocols :mod:`.rules` declares), and hands the
rule's ``state()`` to the store when asked (:meth:`Judge.take_state`: the
store asks once a commit, so the state, whose size grows with the sweep, is
not built again at every decision).  A resumed sweep gives the stored state
back (:meth:`Judge.resume`); only a rule that keeps no state, or a store
written before rules kept theirs, is rebuilt by replaying the stored reports.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..trials.record import TrialRecord
from .decision import CONTINUE, Decider, Decision, Stop
from .rules import (
    FollowsAdds,
    FollowsEnds,
    FollowsRestarts,
    History,
    KeepsState,
    LoadsState,
    Revised,
    describe_rule,
)

__all__ = ["Judge"]

logger = logging.getLogger("labkit.experiments")


class Judge(Decider):
    """The rule of one sweep (``None``: no early stopping) and the history it decides on."""

    def __init__(
        self, rule: Any, mode: str, metric: str, objectives: tuple = (), modes: tuple = ()
    ):
        self.rule, self.metric = rule, metric
        #: every objective (several: the rule decides on a tuple of values, one each)
        self.objectives: tuple = tuple(objectives) or (metric,)
        self.several = len(self.objectives) > 1
        self.history = History(tuple(modes) if self.several else mode)
        #: whether the rule keeps a state to store (``state()``)
        self.keeps = isinstance(rule, KeepsState) and callable(rule.state)
        self._loads = isinstance(rule, LoadsState) and callable(rule.load_state)
        self._revision = self._rule_revision()
        self._hooks = _hooks_of(rule)

    def _rule_revision(self) -> Any:
        """The rule's ``revision`` (None for a rule without one: its state is always taken)."""
        return self.rule.revision if isinstance(self.rule, Revised) else None

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
                value = self.value_of(metrics)
                if value is not None:
                    self.history.add(record.id, step, value)
        if self._loads and state is not None and state.get("rule") == self._words():
            self.rule.load_state(state["state"])
        else:  # a rule that keeps no state: its records rebuilt
            self._replay(records)
        self._revision = None  # the state taken back (or rebuilt) is stored once more

    def _replay(self, records: list[TrialRecord]) -> None:
        """Rebuild the rule's records from the stored reports (in trial, then step order)."""
        replay = History(self.history.mode)
        for record in records:
            for step, metrics, _ in record.history:
                value = self.value_of(metrics)
                if value is not None:
                    replay.add(record.id, step, value)
                    self._decide(record.id, step, value, replay)

    def value_of(self, metrics: dict) -> Any:
        """What the rule decides on in a report's ``metrics``: the metric's value, or with
        several objectives a tuple of theirs (None where one is missing)."""
        if not self.several:
            return metrics.get(self.metric)
        if any(name not in metrics for name in self.objectives):
            return None
        return tuple(metrics[name] for name in self.objectives)

    def value_at(self, reports: list, step: Any, value: Any) -> Any:
        """The rule's value of the report at ``step`` among a trial's ``reports`` (``value``,
        the metric's, with one objective; the latest reports are searched first)."""
        if not self.several:
            return value
        for at, metrics, _ in reversed(reports):
            if at == step:
                return self.value_of(metrics)
        return None

    def on_trial_add(self, trial: int) -> None:
        """A new trial joined the sweep."""
        self._hook("on_trial_add", trial)

    def on_report(self, trial: int, step: Any, value: float, stopping: bool) -> Decision:
        """A value of the metric: :class:`~.decision.Stop` with the rule's reason, or go on."""
        reason = self.judge(trial, step, value, stopping)
        return CONTINUE if reason is None else Stop(reason)

    def judge(self, trial: int, step, value: float, stopping: bool) -> str | None:
        """A value of the metric; the reason to stop ``trial``, or None (``stopping``: no decision)."""
        if self.rule is None or value is None:
            return None
        self.history.add(trial, step, value)
        if stopping:
            return None
        reason = self._decide(trial, step, value, self.history)
        if not reason:
            return None
        return reason if isinstance(reason, str) else f"{type(self.rule).__name__} at step {step}"

    def on_trial_restart(self, trial: int, from_step: Any) -> None:
        """``trial`` reports from ``from_step`` again (it restarted from a checkpoint)."""
        self.history.truncate(trial, from_step)
        self._hook("on_trial_restart", trial, from_step)

    def on_trial_end(self, trial: int, status: str) -> None:
        """``trial`` ended."""
        self._hook("on_trial_end", trial, str(status))

    def take_state(self) -> dict | None:
        """The rule's state to store if it changed since last taken (its ``revision``), or None."""
        if not self.keeps:
            return None
        revision = self._rule_revision()
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
        hook = self._hooks.get(name)
        if hook is None:
            return
        try:
            hook(*args)
        except Exception:
            logger.exception("labkit: the early-stopping rule's %s failed", name)


def _hooks_of(rule: Any) -> dict[str, Callable[..., Any]]:
    """The lifecycle hooks ``rule`` offers, by name (a :class:`~.rules.Rule` offers all three)."""
    hooks: dict[str, Any] = {}
    if isinstance(rule, FollowsAdds):
        hooks["on_trial_add"] = rule.on_trial_add
    if isinstance(rule, FollowsRestarts):
        hooks["on_trial_restart"] = rule.on_trial_restart
    if isinstance(rule, FollowsEnds):
        hooks["on_trial_end"] = rule.on_trial_end
    return {name: hook for name, hook in hooks.items() if callable(hook)}
