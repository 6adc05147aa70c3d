"""Population-based training (``search=lk.PBT(...)``): members exploit the best, explore near them.

After Ray Tune's ``PopulationBasedTraining``, on labkit's checkpoints.  The
population is the sweep's trials, their first configurations drawn as random
search draws them (from the sweep's seed).  Every ``interval`` steps of a
member (a reported step that is a positive multiple of ``interval``), PBT
decides, through :meth:`PBT.reported`'s return value:

* **exploit**: the member is ranked at the latest interval boundary (up to
  its step) that at least half the population has reached, once a boundary:
  on the values the members had *at that step* (the same step for all: a fair
  race, whichever member runs first; at most one round of turns late).  In
  the bottom ``quantile`` of them, it continues from the latest checkpoint
  of a member drawn from the top ``quantile`` that has not ended
  (:class:`Exploit`), with the donor's configuration perturbed: each
  parameter of ``mutations`` is resampled from its entry with probability
  ``resample_probability``, else a number is multiplied by 0.8 or 1.2 (kept
  within its distribution's bounds; an int rounded) and a choice or a list
  moves to a neighbouring value; the other parameters are the donor's.  What
  comes out keeps the kind and bounds of the parameter's entry in the space
  (a ``randint`` stays an int from its ``lo`` to ``hi - 1``, a ``loguniform``
  within its bounds): a mutation of another kind than its parameter (a
  distribution for a ``choice``, an option the choice does not hold, words
  for a number) is an InputError naming both when the sweep starts.
* **pause**: other members wait for a slot (the population outnumbers the
  cluster's slots): the member goes to the end of the queue and resumes later
  from its own latest checkpoint (:class:`Pause`).
* otherwise it goes on (None).

An exploit stops the execution at once (the report raises ``TrialStopped``); a
pause once the member's checkpoint of that step is taken (``trial.checkpoint``
after ``trial.report``: its next report raises).  The sweep's engine then runs
the trial again (:mod:`..exploits`).  A member must checkpoint at every
interval boundary: one without a checkpoint at that step is not paused, nor
drawn as a donor; and it must go on from ``trial.restore()``: one that
reports a step at or before the checkpoint it was given fails (it would
start over at every turn, and its turns never end).

Draws (donors, perturbations) come from ``seed``, or from the sweep's own
seed when ``seed`` is None: the same sweep ``seed=`` makes the same
decisions in a serial sweep.
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...constraints import (
    NON_NEGATIVE_INT,
    POSITIVE_INT,
    PROBABILITY,
    Interval,
    Satisfies,
    check_parameters,
)
from ...errors import InputError
from ..trials.record import TrialRecord, better
from .decision import CONTINUE, Decider, Decision, Exploit, Pause, Population
from .distributions import Distribution

__all__ = ["PBT", "Exploit", "Pause", "perturb", "fit", "refuse_several"]

#: Tells PBT's draws from the sweep's own (``SeedSequence``'s spawn key) when it takes its seed.
_STREAM = 0x504254


def _mapping(value: Any) -> bool:
    return isinstance(value, Mapping) and bool(value)


class PBT(Decider):
    """Population-based training for ``lk.sweep(..., search=lk.PBT(...))``; see the module.

    A :class:`~.base.Search` whose first configurations are drawn as random
    search's, and a :class:`~.decision.Decider` that pauses and exploits.

    ``interval``: steps between decisions; ``quantile``: the share of the
    ranked members in the bottom (which exploit) and the top (the donors);
    ``mutations``: ``{parameter: distribution or non-empty list}``, the
    parameters perturbed; ``resample_probability``: the chance a mutated
    parameter is drawn anew from its entry; ``seed``: the draws of donors and
    perturbations (None: the sweep's seed).
    """

    asks = False
    pauses = True
    exploits = True
    name = "PBT"  # stored with the sweep (its settings' ``search``)
    metric = ""  # the sweep's metric (set by search_of): read back from stored histories
    parameter_constraints: dict = {
        "interval": [POSITIVE_INT],
        "quantile": [Interval(float, 0, 0.5, closed="right")],
        "mutations": [
            Satisfies(_mapping, "a non-empty dict {parameter: lk.uniform(...) or a list}")
        ],
        "resample_probability": [PROBABILITY],
        "seed": [NON_NEGATIVE_INT, None],
    }

    def __init__(
        self,
        interval: int = 5,
        quantile: float = 0.25,
        mutations: Mapping | None = None,
        resample_probability: float = 0.25,
        seed: int | None = None,
    ):
        given = dict(
            interval=interval,
            quantile=quantile,
            mutations=mutations,
            resample_probability=resample_probability,
            seed=seed,
        )
        check_parameters(self, given, "PBT")
        for name, entry in mutations.items():  # type: ignore[union-attr]
            _check_entry(name, entry)
        self.interval, self.quantile = interval, float(quantile)
        self.mutations = dict(mutations)  # type: ignore[arg-type]
        self.resample_probability, self.seed = float(resample_probability), seed
        self.mode = "max"
        self.population: Any = None  # what the sweep tells of its members (:meth:`attach`)
        self.scores: dict[Any, dict[int, float]] = {}  # step -> {member: value at that step}
        self.judged: set[tuple] = set()  # (member, step) where it was ranked
        self.rng = np.random.default_rng(seed)
        self.space: dict = {}  # the space's entries (bound): what a perturbation keeps

    def bound(self, space: Any, mode: str) -> PBT:
        """A fresh PBT for one sweep over ``space`` (a space of distributions), ``mode``.

        The object given to ``lk.sweep`` is a recipe: each sweep gets a copy of
        its own (its state, its generator).
        """
        if space.kind != "random":
            raise InputError(
                f"PBT perturbs a space of distributions ({{'lr': lk.uniform(0, 1), ...}}), "
                f"not a {space.kind}",
                argument="search",
            )
        unknown = sorted(set(self.mutations) - set(space.entries))
        if unknown:
            raise InputError(
                f"PBT mutations name {', '.join(map(repr, unknown))}, not parameters of the "
                f"space (it has {', '.join(map(repr, space.entries))})",
                argument="mutations",
            )
        for name, entry in self.mutations.items():
            _check_kind(name, entry, space.entries[name])
        own = copy.copy(self)
        own.mode, own.scores, own.judged, own.population = mode, {}, set(), None
        own.rng = np.random.default_rng(self.seed)
        own.space = dict(space.entries)
        return own

    def start(self, population: Population | None, seed: int) -> None:
        """The sweep's members and ``seed`` (PBT's draws come from it when PBT was given none).

        The members: ``config(i)``, ``checkpoint_step(i)``, ``active(i)`` (not
        ended: a donor must be), ``waiting()`` (whether a member waits for a
        slot) and ``size()`` (how many).
        """
        self.population = population
        if self.seed is None:
            stream = np.random.SeedSequence(int(seed), spawn_key=(_STREAM,))
            self.rng = np.random.default_rng(stream)

    def on_report(self, trial: int, step: Any, value: float, stopping: bool) -> Decision:
        """The decision for ``trial`` at ``step`` (:meth:`reported`); it goes on when ``stopping``."""
        decision = self.reported(trial, step, value)
        return CONTINUE if decision is None or stopping else decision

    # -- the Search protocol (reports are heard as a Decider: :meth:`on_report`) ----------------

    def ask(self, trial_id: int) -> dict:
        """Never called (``asks`` is False): first configurations are drawn as random search's."""
        raise NotImplementedError("PBT's first configurations are drawn when trials are added")

    def reported(self, trial_id: int, step: Any, value: float) -> Exploit | Pause | None:
        """The decision for ``trial_id`` at ``step`` (None between interval boundaries)."""
        if not self._boundary(step) or value is None or math.isnan(value):
            return None
        self.scores.setdefault(step, {})[trial_id] = float(value)
        if self.population is None:
            return None
        at = self._ranked_at(trial_id, step)
        if at is not None:
            self.judged.add((trial_id, at))
            donor = self._donor(trial_id, self.scores[at], at)
            if donor is not None:
                self._inherit(trial_id, donor, at)
                return Exploit(donor, self.explore(self.population.config(donor)), at)
        return Pause() if self.population.waiting() else None

    def ended(self, record: TrialRecord) -> None:
        """Nothing to learn: a member that ended stays ranked at the steps it reached."""

    def resume(self, records: list[TrialRecord]) -> None:
        """Rank the stored members again at each interval boundary their histories hold."""
        for record in records:
            for step, metrics, _ in record.history:
                if self._boundary(step) and self.metric in metrics:
                    self.scores.setdefault(step, {})[record.id] = float(metrics[self.metric])

    # -- the decisions -----------------------------------------------------------------------

    def _boundary(self, step: Any) -> bool:
        return bool(
            isinstance(step, (int, np.integer))
            and not isinstance(step, bool)
            and step > 0
            and step % self.interval == 0
        )

    def _ranked_at(self, trial_id: int, step: Any) -> Any:
        """The boundary ``trial_id`` is ranked at now: the latest one up to ``step`` that
        at least half the population (and two members) reached, if not ranked there yet."""
        enough = max(2, math.ceil(self.population.size() / 2))
        for at in sorted((b for b in self.scores if b <= step), reverse=True):
            if (trial_id, at) in self.judged:
                return None  # ranked there already: what came before is older still
            if trial_id in self.scores[at] and len(self.scores[at]) >= enough:
                return at
        return None

    def _donor(self, trial_id: int, ranked: dict[int, float], at: Any) -> int | None:
        """A member of the top quantile to exploit, when ``trial_id`` is in the bottom one."""
        n = min(max(1, math.ceil(len(ranked) * self.quantile)), len(ranked) // 2)
        sign = -1.0 if self.mode == "max" else 1.0
        order = sorted(ranked, key=lambda t: (sign * ranked[t], t))  # best first, ties by id
        if trial_id not in order[-n:]:
            return None
        donors = [
            t
            for t in order[:n]
            if (self.population.checkpoint_step(t) or -1) >= at
            and self.population.active(t)
            and better(ranked[t], ranked[trial_id], self.mode)
        ]
        return donors[int(self.rng.integers(len(donors)))] if donors else None

    def _inherit(self, trial_id: int, donor: int, at: Any) -> None:
        """``trial_id`` goes on from ``donor``'s checkpoint: it holds the donor's values from
        ``at`` to that checkpoint's step (ranked there already), and none after (not reached)."""
        until = self.population.checkpoint_step(donor)
        for boundary, ranked in self.scores.items():
            if boundary > until:
                ranked.pop(trial_id, None)
            elif boundary >= at and donor in ranked:
                ranked[trial_id] = ranked[donor]
                self.judged.add((trial_id, boundary))

    def explore(self, config: dict) -> dict:
        """``config`` with each mutated parameter perturbed (see the module)."""
        out = dict(config)
        for name, entry in self.mutations.items():
            if name in out:
                out[name] = perturb(
                    out[name], entry, self.resample_probability, self.rng, self.space.get(name)
                )
        return out

    def __repr__(self) -> str:
        return (
            f"PBT(interval={self.interval}, quantile={self.quantile}, "
            f"mutations={sorted(self.mutations)}, "
            f"resample_probability={self.resample_probability})"
        )


def _check_entry(name: Any, entry: Any) -> None:
    """A mutation's entry: a labkit distribution (valid) or a non-empty list."""
    if isinstance(entry, Distribution):
        problem = getattr(entry, "problem", None)
        if problem is None:
            return
        raise InputError(f"PBT mutations[{name!r}]: {problem}", argument="mutations")
    if isinstance(entry, (list, tuple)) and len(entry) > 0:
        return
    raise InputError(
        f"PBT mutations[{name!r}] must be lk.uniform/lk.loguniform/lk.randint/lk.choice or a "
        f"non-empty list; got {entry!r:.60} ({type(entry).__name__})",
        argument="mutations",
    )


def perturb(value: Any, entry: Any, p: float, rng: np.random.Generator, within: Any = None) -> Any:
    """``value`` resampled from ``entry`` with probability ``p``, else moved a little.

    A number: ×0.8 or ×1.2, within the distribution's bounds (an int rounded);
    a choice or a list: the value before or after it (clipped at the ends).
    ``within``: the parameter's entry in the space, whose kind and bounds the
    result keeps (:func:`fit`).
    """
    return fit(_moved(value, entry, p, rng), within)


def _moved(value: Any, entry: Any, p: float, rng: np.random.Generator) -> Any:
    """``value`` resampled from ``entry`` or moved a little (see :func:`perturb`)."""
    options = list(entry) if isinstance(entry, (list, tuple)) else getattr(entry, "options", None)
    resample = bool(rng.random() < p)
    if options is not None:
        if resample:
            return options[int(rng.integers(len(options)))]
        where = _index(options, value)
        step = 1 if rng.random() < 0.5 else -1
        return options[min(max(where + step, 0), len(options) - 1)]
    if resample:
        return entry.sample(rng)
    factor = 1.2 if rng.random() < 0.5 else 0.8
    return fit(min(max(value * factor, entry.lo), entry.hi), entry)


def fit(value: Any, entry: Any) -> Any:
    """``value`` of the kind and within the bounds of the space's ``entry`` (None: as it is).

    A ``randint(lo, hi)``: an int, rounded, from ``lo`` to ``hi - 1``; a
    ``uniform`` or ``loguniform``: a float within ``[lo, hi]``; a choice or a
    constant: the value itself (a choice's mutations hold its options only).
    """
    kind = getattr(entry, "kind", None)
    if kind == "randint":  # randint(lo, hi) draws lo .. hi - 1
        return int(min(max(round(value), entry.lo), entry.hi - 1))
    if kind in ("uniform", "loguniform"):
        return float(min(max(value, entry.lo), entry.hi))
    return value


_NUMBERS = ("uniform", "loguniform", "randint")


def _check_kind(name: str, mutation: Any, entry: Any) -> None:
    """A mutation of the parameter's kind: among a choice's options, numbers for a number."""
    if not isinstance(entry, Distribution):
        return  # a constant of the space: mutated as the mutation says
    listed = isinstance(mutation, (list, tuple))
    options = list(mutation) if listed else getattr(mutation, "options", None)
    kind = "a list" if listed else mutation.kind
    if entry.kind in _NUMBERS:
        wrong = [o for o in options or () if isinstance(o, bool) or not isinstance(o, numbers.Real)]
    else:  # a choice: perturbed among its own options only
        wrong = [mutation] if options is None else [o for o in options if not entry.contains(o)]
    if wrong:
        held = "" if wrong[0] is mutation else f", which holds {wrong[0]!r:.40},"
        raise InputError(
            f"PBT mutations[{name!r}] is {mutation!r:.60} ({kind}){held} but the space's "
            f"{name!r} is {entry!r:.60} ({entry.kind}): a choice is mutated among its "
            "options (a list or lk.choice of them), a number by lk.uniform, lk.loguniform, "
            "lk.randint or a list of numbers",
            argument="mutations",
        )


def _index(options: list, value: Any) -> int:
    """Where ``value`` is among ``options`` (the nearest number when not there)."""
    for i, option in enumerate(options):
        if option == value:
            return i
    numbers = [o for o in options if isinstance(o, (int, float))]
    if numbers and isinstance(value, (int, float)):
        return min(range(len(options)), key=lambda i: _distance(options[i], value))
    return 0


def _distance(option: Any, value: float) -> float:
    return abs(option - value) if isinstance(option, (int, float)) else math.inf


def refuse_several(search: Any, objectives: tuple) -> None:
    """An InputError naming metric when ``search`` is lk.PBT and ``objectives`` are several.

    PBT's exploits copy the better member of a quantile of one metric; with
    several objectives there is no such order (a front is no ranking).
    """
    if isinstance(search, PBT) and len(objectives) > 1:
        raise InputError(
            f"lk.PBT exploits by one metric, but metric={tuple(objectives)!r} names "
            f"{len(objectives)} objectives: give PBT one metric, or search a front with "
            "optuna.samplers.NSGAIISampler() (early_stop=lk.ASHA(...) stops by dominance)",
            argument="metric",
        )
