"""The sweep's deciders consulted as one chain at each report, and their decisions carried out.

One :class:`DecisionChain` a sweep, called by the engine under its lock.  It
holds the sweep's deciders (:class:`~.decision.Decider`) in order: the search's, when
the search decides too (``lk.PBT``), then the early-stopping rule's
(:class:`~.judge.Judge`).  At each value of the metric each is asked
:meth:`~.decision.Decider.on_report`; a :class:`~.decision.Stop` stops the
trial (the rule's ``rule``, the search's ``search``), a
:class:`~.decision.Pause` or :class:`~.decision.Exploit` is kept by the
:class:`~.exploits.Turns` that carry them out.  Turns exist only when a
decider declares it pauses or exploits; they are the population such a
decider is started with.  A decider is never probed for what it can do.

A search's decider that raises an ``Exception`` is logged (the trial goes
on); one that raises what is not an ``Exception`` ends the sweep, as any
search's hook does (:meth:`~.searcher.Searcher.guarded`).  A rule that raises
is logged by its :class:`~.judge.Judge`.
"""

from __future__ import annotations

from typing import Any

from ..trials.record import TrialRecord
from ..trials.state import TrialState
from .decision import Continue, Decider, Decision, Stop
from .exploits import ExploitRecord, Turns
from .judge import Judge

__all__ = ["DecisionChain"]


class DecisionChain:
    """The deciders of one sweep (the search's, the rule's) and the turns they decide."""

    def __init__(self, spec: Any, engine: Any):
        self.engine = engine
        #: the early-stopping rule (its rule None: it decides nothing, and is not in the chain)
        self.judge = Judge(spec.rule, spec.mode, spec.metric, spec.objectives, spec.modes)
        search = spec.search
        #: the search's decider (``lk.PBT``), or None
        self.search: Decider | None = search if isinstance(search, Decider) else None
        self.deciders: list[tuple[str, Decider]] = []  # (the kind of stop it asks, decider)
        if self.search is not None:
            self.deciders.append(("search", self.search))
        if spec.rule is not None:
            self.deciders.append(("rule", self.judge))
        #: the pauses and exploits decided, carried out for the engine (None: none can be)
        self.turns: Turns | None = None
        if any(d.pauses or d.exploits for _, d in self.deciders):
            self.turns = Turns(engine)
        for _, decider in self.deciders:
            decider.start(self.turns, spec.seed)

    @property
    def keeps(self) -> bool:
        """Whether the rule keeps a state to store (the store asks for it once a commit)."""
        return self.judge.keeps

    def take_state(self) -> dict | None:
        """The rule's state if it changed since last taken, or None."""
        return self.judge.take_state()

    @property
    def exploits(self) -> list[ExploitRecord]:
        """The exploits made (this run's and, resumed, the runs' before), oldest first."""
        return [] if self.turns is None else list(self.turns.exploits)

    def resume(self, records: list[TrialRecord], rule_state: dict | None) -> None:
        """A resumed sweep's stored trials and rule state, and the exploits made before."""
        self.judge.resume(records, rule_state)
        if self.turns is not None:
            self.turns.exploits[:0] = self.engine.store.exploits(self.engine.name)

    def added(self, trial: int) -> None:
        """``trial`` joined the sweep."""
        for _, decider in self.deciders:
            decider.on_trial_add(trial)

    def restarted(self, trial: int, from_step: Any) -> None:
        """``trial`` reports from ``from_step`` again (it restarted from a checkpoint)."""
        for _, decider in self.deciders:
            decider.on_trial_restart(trial, from_step)

    def ended(self, trial: int, status: str) -> None:
        """``trial`` ended with ``status``."""
        for _, decider in self.deciders:
            decider.on_trial_end(trial, status)

    def reported(self, s: TrialState, step: Any, value: Any) -> None:
        """A value of the metric of ``s``: every decider asked in turn, its decision carried out."""
        for kind, decider in self.deciders:
            if kind == "search":
                decision = self._search_decides(s, step, value)
            else:
                vector = self.judge.value_at(s.history, step, value)  # several: a tuple
                decision = decider.on_report(s.id, step, vector, s.stop is not None)
            if not isinstance(decision, Continue):
                self._carry_out(s, kind, step, decision)

    def _search_decides(self, s: TrialState, step: Any, value: Any) -> Decision | None:
        """The search's decision for ``s`` (None: nothing to learn, from a member that fails)."""
        if s.stop is not None and s.stop[0] == "fail":
            return None  # a member that fails: its values are void
        why = None if self.turns is None else self.turns.regressed(s.id, step)
        if why is not None:  # a PBT member that started over: it fails (its turns never end)
            if s.stop is None or s.stop[0] == "search":
                self.engine.request_stop(s, "fail", why)
            return None
        assert self.search is not None
        stopping = s.stop is not None  # asked once an execution: a stopping trial goes on
        return self.engine.searcher.guarded(
            "reported", self.search.on_report, s.id, step, value, stopping
        )

    def _carry_out(self, s: TrialState, kind: str, step: Any, decision: Decision | None) -> None:
        """Stop ``s`` now, or keep a pause or an exploit for the turns (they say when it stops)."""
        if decision is None:
            return
        if isinstance(decision, Stop):
            self.engine.request_stop(s, kind, decision.reason)
            return
        why = None if self.turns is None else self.turns.decided(s, step, decision)
        if why:
            self.engine.request_stop(s, kind, why)

    def checkpointed(self, s: TrialState, step: Any, ref: Any) -> None:
        """``s`` took a checkpoint at ``step``: a pause due at this step stops it now."""
        if self.turns is None:
            return
        why = self.turns.checkpointed(s.id, step, ref)
        if why and s.stop is None:
            self.engine.request_stop(s, "search", why)

    def requeue(self, s: TrialState, outcome: dict) -> bool:
        """Whether ``s``, whose execution ended, runs again (a pause or an exploit stopped it)."""
        return self.turns is not None and self.turns.requeue(s, outcome)
