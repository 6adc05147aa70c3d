"""Early stopping: rules that decide on the client, from the report stream, whether a trial goes on.

Every report that carries the sweep's metric reaches the sweep's rule as it
arrives: ``rule.decide(trial, step, value, history)`` returns ``None`` (go
on) or a reason (stop the trial; its next ``trial.report`` raises
:class:`~labkit.experiments.trials.trial.TrialStopped`).  Nothing waits for slower
trials: a decision uses what has been reported so far.  ``history`` holds
every trial's curve of the metric (:class:`History`); ``history.score(v)``
turns a value into a score where higher is better, whatever the ``mode``.

Your own rule is a class with that one method (subclass :class:`Rule` for the
documentation, or not)::

    class Threshold(lk.experiments.Rule):
        '''Stop a trial whose accuracy is below 0.5 after step 3.'''
        def decide(self, trial, step, value, history):
            if step >= 3 and history.score(value) < history.score(0.5):
                return f"below 0.5 at step {step}"

A rule may also follow each trial's life, as Ray Tune's schedulers do: the
sweep calls ``on_trial_add(trial)`` when a trial is added,
``on_trial_restart(trial, from_step)`` when a trial runs again from a
checkpoint (it reports from ``from_step`` again), and ``on_trial_end(trial,
status)`` when it ends.  :class:`Rule` gives each hook a default that does
nothing, and a rule without them works too.  What a rule keeps across
reports (ASHA's rungs) it returns from ``state()`` (plain data) and takes
back in ``load_state(state)``; the sweep keeps that in its store whenever
``revision`` changed, so a resumed sweep goes on without replaying the
history.  A rule without ``state`` is rebuilt, on resume, by replaying the
stored reports through ``decide``.

Steps are the numbers trials report (``trial.report(step, ...)``), in any
unit (epochs, batches), increasing within a trial.

Examples
--------
>>> rule, history = ASHA(min_steps=1, reduction=2), History("max")
>>> for trial, value in [(0, 0.9), (1, 0.5), (2, 0.7)]:
...     history.add(trial, 1, value)
...     print(trial, rule.decide(trial, 1, value, history))
0 None
1 ASHA: at step 1 not in the top 1/2 (2nd of 2)
2 None
"""

from __future__ import annotations

import bisect
import copy
import math
import statistics
from typing import Any, Protocol, runtime_checkable

from ...constraints import Interval, check_parameters
from ...errors import InputError
from ..objectives.moasha import DominanceRungs, fmt_number, ordinal

__all__ = [
    "Rule",
    "ASHA",
    "Median",
    "History",
    "check_rule",
    "own_rule",
    "describe_rule",
    "Decides",
    "KeepsState",
    "LoadsState",
    "Revised",
    "Described",
    "FollowsAdds",
    "FollowsRestarts",
    "FollowsEnds",
]


class History:
    """Every trial's curve of the metric so far, and scores where higher is better.

    Kept by the sweep on the client and handed to the rule with each report.
    """

    def __init__(self, mode: str | tuple):
        self.mode = mode  # several objectives: a mode each (values are tuples)
        self._steps: dict[int, list] = {}
        self._scores: dict[int, list] = {}
        self._sums: dict[int, list] = {}  # running sums of scores, for running means

    def score(self, value) -> Any:
        """``value`` as a score, higher is better (-value in mode min; NaN: -inf; tuples: each)."""
        if isinstance(self.mode, tuple):  # several objectives: a score each
            return tuple(History(m).score(v) for m, v in zip(self.mode, value, strict=True))
        value = float(value)
        if math.isnan(value):
            return -math.inf
        return value if self.mode == "max" else -value

    def add(self, trial: int, step, value) -> None:
        """Record ``value`` of ``trial`` at ``step``."""
        steps = self._steps.setdefault(trial, [])
        scores = self._scores.setdefault(trial, [])
        sums = self._sums.setdefault(trial, [])
        score = self.score(value)
        steps.append(step)
        scores.append(score)
        finite = isinstance(score, float) and math.isfinite(score)
        sums.append((sums[-1] if sums else 0.0) + (score if finite else 0.0))

    def truncate(self, trial: int, from_step) -> None:
        """Forget ``trial``'s values from ``from_step`` on (it restarted from a checkpoint)."""
        steps = self._steps.get(trial, [])
        keep = bisect.bisect_left(steps, from_step)
        for table in (self._steps, self._scores, self._sums):
            if trial in table:
                del table[trial][keep:]

    def trials(self) -> list[int]:
        """Trials with at least one value."""
        return [t for t, steps in self._steps.items() if steps]

    def curve(self, trial: int) -> list[tuple]:
        """``[(step, score), ...]`` of ``trial``."""
        return list(zip(self._steps.get(trial, []), self._scores.get(trial, []), strict=True))

    def last_step(self, trial: int):
        """The last step ``trial`` reported (``None`` without one)."""
        steps = self._steps.get(trial)
        return steps[-1] if steps else None

    def best(self, trial: int, upto=None) -> float:
        """``trial``'s best score up to step ``upto`` (all of them by default); -inf without one."""
        scores = self._scores.get(trial, [])
        n = len(scores) if upto is None else bisect.bisect_right(self._steps[trial], upto)
        return max(scores[:n], default=-math.inf)

    def running_mean(self, trial: int, upto) -> float | None:
        """Mean score of ``trial`` over its steps up to ``upto``; None if it has none."""
        steps = self._steps.get(trial, [])
        n = bisect.bisect_right(steps, upto)
        return self._sums[trial][n - 1] / n if n else None


# What a rule of one's own may offer (documented above), declared: the sweep's
# :class:`~.judge.Judge` sees once, when the sweep starts, which of them a rule
# has, and calls those (a :class:`Rule` has every hook).


@runtime_checkable
class Decides(Protocol):
    """A rule: ``decide(trial, step, value, history)``, a reason to stop or None."""

    def decide(self, trial: int, step: Any, value: float, history: History) -> Any: ...


@runtime_checkable
class KeepsState(Protocol):
    """A rule whose records are stored with the sweep (plain data)."""

    def state(self) -> dict: ...


@runtime_checkable
class LoadsState(Protocol):
    """A rule that takes back the records its ``state()`` gave."""

    def load_state(self, state: dict) -> None: ...


@runtime_checkable
class Revised(Protocol):
    """A rule whose ``revision`` changes whenever its ``state()`` would."""

    revision: int


@runtime_checkable
class Described(Protocol):
    """A rule that says what it is in words."""

    def describe(self) -> str: ...


@runtime_checkable
class FollowsAdds(Protocol):
    """A rule told of each trial added."""

    def on_trial_add(self, trial: int) -> None: ...


@runtime_checkable
class FollowsRestarts(Protocol):
    """A rule told of each trial that runs again from a checkpoint."""

    def on_trial_restart(self, trial: int, from_step: Any) -> None: ...


@runtime_checkable
class FollowsEnds(Protocol):
    """A rule told of each trial's end."""

    def on_trial_end(self, trial: int, status: str) -> None: ...


class Rule:
    """Base of early-stopping rules: :meth:`decide`, and lifecycle hooks that do nothing."""

    #: Changes whenever :meth:`state` would (the sweep stores the state then).
    revision: int = 0

    def decide(self, trial: int, step, value: float, history: History) -> str | None:
        """``None`` to let ``trial`` go on after reporting ``value`` at ``step``; a reason to stop it."""
        raise NotImplementedError

    def on_trial_add(self, trial: int) -> None:
        """``trial`` joined the sweep (new, or known to a resumed sweep)."""

    def on_trial_restart(self, trial: int, from_step) -> None:
        """``trial`` runs again from a checkpoint: it reports from ``from_step`` again."""

    def on_trial_end(self, trial: int, status: str) -> None:
        """``trial`` ended with ``status`` (completed, stopped, failed, cancelled)."""

    def describe(self) -> str:
        """The rule in words (stored with the sweep, shown on a board)."""
        return repr(self)


def _above(low: float) -> Interval:
    """A finite number > ``low`` (a step count or a ratio: NaN and infinities mean nothing)."""
    return Interval(float, low, closed="neither", finite=True, name=f"a finite number > {low}")


class ASHA(Rule):
    """Asynchronous successive halving: at each rung, only the top ``1/reduction`` go on.

    Rungs lie at steps ``min_steps * reduction**k`` (below ``max_steps``, when
    given).  The first report of a trial at or past a rung records its score
    there; the trial goes on if it is among the best ``ceil(n / reduction)``
    of the ``n`` trials recorded at that rung so far, itself included, and
    stops otherwise.  Trials never wait for others to reach a rung: an early
    trial is compared with those before it only (Li et al., "A System for
    Massively Parallel Hyperparameter Tuning", 2020).  With several objectives
    (``value`` a tuple, one value each; ``history.mode`` theirs) the order at a rung is
    by dominance: non-dominated front, then crowding distance within it (MOASHA,
    :mod:`labkit.experiments.objectives.moasha`).

    Parameters
    ----------
    min_steps : int or float
        The first rung; no trial stops before it.
    reduction : int or float
        How many trials share a promotion (> 1).
    max_steps : int or float, optional
        The length of a full trial; no rung at or beyond it.
    """

    parameter_constraints = {
        "min_steps": [_above(0)],
        "reduction": [_above(1)],
        "max_steps": [_above(0), None],
    }

    def __init__(self, min_steps=1, reduction=3, max_steps=None):
        given = dict(min_steps=min_steps, reduction=reduction, max_steps=max_steps)
        check_parameters(self, given, "lk.ASHA")
        self.min_steps, self.reduction, self.max_steps = min_steps, reduction, max_steps
        self._recorded: list[dict[int, float]] = []  # per rung: trial -> score
        # per rung, the same scores sorted: a trial's rank is a binary search, not a count over
        # every trial recorded (quadratic over a 10,000-trial sweep)
        self._ranked: list[list[float]] = []
        self._dominance = DominanceRungs()  # several objectives: the rungs' values by dominance
        self.revision = 0

    def rung(self, k: int) -> float:
        """The step of rung ``k``."""
        return self.min_steps * self.reduction**k

    def _reached(self, step) -> list[tuple[int, Any]]:
        """``(k, step of rung k)`` of the rungs at or before ``step`` (below max_steps)."""
        k, reached = 0, []
        while step >= self.rung(k) and (self.max_steps is None or self.rung(k) < self.max_steps):
            reached.append((k, self.rung(k)))
            k += 1
        return reached

    def decide(self, trial, step, value, history):
        if isinstance(value, tuple):  # several objectives, a value each: by dominance (MOASHA)
            before = self._dominance.revision
            why = self._dominance.decide(
                trial, self._reached(step), value, history.mode, self.reduction
            )
            self.revision += self._dominance.revision - before
            return why
        score = history.score(value)
        for k, _ in self._reached(step):
            if k == len(self._recorded):
                self._recorded.append({})
                self._ranked.append([])
            recorded, ranked = self._recorded[k], self._ranked[k]
            if trial not in recorded:
                recorded[trial] = score
                bisect.insort(ranked, score)
                self.revision += 1
                better = len(ranked) - bisect.bisect_right(ranked, score)
                keep = math.ceil(len(recorded) / self.reduction)
                if better >= keep:
                    return (
                        f"ASHA: at step {fmt_number(self.rung(k))} not in the top "
                        f"1/{fmt_number(self.reduction)} ({ordinal(better + 1)} of {len(recorded)})"
                    )
        return None

    def forget(self, trial: int, from_step=None) -> None:
        """Drop ``trial``'s records at rungs from ``from_step`` on (all of them by default)."""
        for k, recorded in enumerate(self._recorded):
            if (from_step is None or self.rung(k) >= from_step) and trial in recorded:
                ranked = self._ranked[k]
                del ranked[bisect.bisect_left(ranked, recorded.pop(trial))]
                self.revision += 1
        before = self._dominance.revision
        self._dominance.forget(trial, from_step, self.rung)
        self.revision += self._dominance.revision - before

    def on_trial_restart(self, trial: int, from_step) -> None:
        """A restart reports the rungs from ``from_step`` on again: they are recorded anew."""
        self.forget(trial, from_step)

    def state(self) -> dict:
        """The rung records, as plain data (kept in the sweep's store)."""
        rungs = [{str(t): s for t, s in r.items()} for r in self._recorded]
        return {"rungs": rungs, "dominance": self._dominance.state()}

    def load_state(self, state: dict) -> None:
        """Take back the records :meth:`state` gave."""
        self._recorded = [{int(t): float(s) for t, s in r.items()} for r in state["rungs"]]
        self._ranked = [sorted(r.values()) for r in self._recorded]
        self._dominance.load_state(state.get("dominance", []))
        self.revision += 1

    def describe(self):
        extra = "" if self.max_steps is None else f", max_steps={self.max_steps}"
        return f"ASHA(min_steps={self.min_steps}, reduction={self.reduction}{extra})"

    __repr__ = describe


class Median(Rule):
    """The median stopping rule: stop a trial whose best is below the median of the others.

    At a report at ``step >= min_steps``, the trial's best score so far is
    compared with the median, over the other trials that reached ``step``
    (at least ``min_trials`` of them), of their running mean score up to
    ``step``; below it, the trial stops (Golovin et al., "Google Vizier", 2017).
    """

    parameter_constraints = {
        "min_steps": [Interval(float, 0, finite=True, name="a finite number >= 0")],
        "min_trials": [Interval(int, 1)],
    }

    def __init__(self, min_steps=1, min_trials=3):
        check_parameters(self, dict(min_steps=min_steps, min_trials=min_trials), "lk.Median")
        self.min_steps, self.min_trials = min_steps, min_trials

    def decide(self, trial, step, value, history):
        if step < self.min_steps:
            return None
        means = [
            history.running_mean(t, step)
            for t in history.trials()
            if t != trial and (history.last_step(t) or -math.inf) >= step
        ]
        means = [m for m in means if m is not None]
        if len(means) < self.min_trials:
            return None
        median = statistics.median(means)
        if history.best(trial, step) < median:
            return (
                f"Median: best {fmt_number(_value(history, history.best(trial, step)))} worse "
                f"than the median {fmt_number(_value(history, median))} of {len(means)} trials' "
                f"running means at step {fmt_number(step)}"
            )
        return None

    def describe(self):
        return f"Median(min_steps={self.min_steps}, min_trials={self.min_trials})"

    __repr__ = describe


def check_rule(rule: Any, objectives: tuple = ()) -> Decides | None:
    """``rule`` if it can decide (has ``decide``), else an InputError naming early_stop.

    With several ``objectives``, lk.Median (one metric's running means) is an
    InputError naming metric: lk.ASHA ranks by dominance then.
    """
    if len(objectives) > 1 and isinstance(rule, Median):
        raise InputError(
            f"lk.Median stops by one metric, but metric={tuple(objectives)!r} names "
            f"{len(objectives)} objectives: use lk.ASHA(...), which ranks the trials at a "
            "rung by dominance, or early_stop=None",
            argument="metric",
        )
    if isinstance(rule, type):  # lk.ASHA for lk.ASHA(): its decide is unbound
        raise InputError(
            f"early_stop must be a rule, not the class {rule.__name__}: pass "
            f"{rule.__name__}() (or with settings, e.g. lk.ASHA(min_steps=1, reduction=3))",
            argument="early_stop",
        )
    if rule is None or (isinstance(rule, Decides) and callable(rule.decide)):
        return rule
    raise InputError(
        f"early_stop must be lk.ASHA(...), lk.Median(...), a rule with a "
        f"decide(trial, step, value, history) method, or None; got "
        f"{type(rule).__name__} {rule!r:.60}",
        argument="early_stop",
    )


def describe_rule(rule) -> str:
    """A rule in words: its ``describe()``, else its repr."""
    if isinstance(rule, Described) and callable(rule.describe):
        return str(rule.describe())
    return repr(rule)


def own_rule(rule):
    """A copy of ``rule`` for one sweep: a rule's records (ASHA's rungs) belong to its sweep.

    So one rule object given to several sweeps, or to a sweep and its extension,
    starts each with nothing recorded (a resumed sweep takes its records back
    from the store).
    """
    if rule is None:
        return None
    try:
        return copy.deepcopy(rule)
    except Exception as exc:  # noqa: BLE001 - a rule holding a lock, a file, a socket
        raise InputError(
            f"early_stop {type(rule).__name__} cannot be copied ({type(exc).__name__}: "
            f"{exc}); each sweep keeps its own copy of the rule, so its state stays its "
            "own: keep plain data in the rule (no locks, files or connections)",
            argument="early_stop",
        ) from None


def _value(history: History, score: float) -> float:
    """A score back as a value of the metric."""
    return score if history.mode == "max" else -score
