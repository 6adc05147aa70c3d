"""An Optuna sampler driving a sweep: an in-memory study that mirrors it, asked and told on the client.

:class:`OptunaSearch` keeps one Optuna trial a running labkit trial: a trial
that starts asks the study (``study.ask`` with the space's distributions,
:mod:`.optuna_space`), each value of the sweep's metric it reports is told
as an intermediate value (``trial.report``: Optuna's steps are ints >= 0,
other steps are skipped), and its end is told as Optuna knows ends:
completed with its final value (``COMPLETE``), stopped early by the sweep's
rule or by hand (``PRUNED``), failed or cancelled (``FAIL``: a cancelled
trial runs again when the sweep is resumed, as a new Optuna trial with the
same configuration).  A resumed sweep tells its stored trials first
(``study.add_trial``), before anything new is asked.

The sampler is checked before anything runs and copied for a sweep that
is not its first (:mod:`.sampler_use`); a value it asks outside the space
fails that trial (an InputError naming the sampler, the parameter, the
value and the space; Optuna's trial is told FAIL).  Optuna's INFO lines (a
study created, each trial finished) would print a line a trial in the
notebook: its logger is held at WARNING while this module calls Optuna
(:mod:`.optuna_log`).  Nothing else here raises into the sweep: a failed
report or tell is logged and the sweep goes on, and a sampler whose space
is exhausted (a grid's every point told) stopping the study is no failure.
"""

from __future__ import annotations

import logging
import math
import numbers
import traceback
from typing import Any

from ..objectives.samplers import (
    CONSTRAINTS_ATTR,
    OPTUNA_CONSTRAINTS_KEY,
    check_several,
    directions_of,
)
from ..trials.record import TrialRecord
from ..trials.status import Status
from .optuna_log import quiet
from .optuna_space import configuration_of, distributions_of
from .sampler_use import check_asked, check_sampler, own_sampler
from .space import Space

__all__ = ["OptunaSearch", "quiet"]

logger = logging.getLogger("labkit.experiments")


class OptunaSearch:
    """``search=sampler``: the sampler's in-memory study mirrors the sweep (module docstring).

    ``metric``: the sweep's metric, whose stored reports a resumed study is told; with
    several objectives, ``metric`` and ``mode`` are tuples: the study has their
    ``directions``, each end is told every objective's final value (Optuna takes no
    intermediate values then), and a trial's constraint values (``lk.sweep``'s
    ``constraints=``) are kept on its Optuna trial for a constraint-aware sampler
    (:mod:`labkit.experiments.objectives.samplers`).
    """

    asks = True

    def __init__(
        self, sampler: Any, space: Space, mode: str | tuple, metric: str | tuple | None = None
    ):
        import optuna

        self.name = type(sampler).__name__
        self.distributions, self.constants = distributions_of(space)
        check_sampler(sampler, space, self.distributions)  # before anything runs
        self.names = (metric,) if metric is None or isinstance(metric, str) else tuple(metric)
        directions = directions_of((mode,) if isinstance(mode, str) else mode)
        if len(directions) > 1:
            with quiet():
                check_several(sampler, self.distributions, directions)
        sampler = own_sampler(sampler)  # a later sweep of the same object: a fresh copy
        self.space, self.sampler, self.metric = space, sampler, self.names[0]
        with quiet():
            self._storage = optuna.storages.InMemoryStorage()
            self._study = optuna.create_study(
                storage=self._storage, sampler=sampler, directions=directions
            )
        self._study_id = self._storage.get_study_id_from_name(self._study.study_name)
        self._trials: dict[int, Any] = {}  # labkit trial id -> its running Optuna trial
        self._steps: dict[int, set] = {}  # steps told of each running trial
        self._known: dict[int, dict] = {}  # stored configurations of trials that run again

    @property
    def study(self) -> Any:
        """The Optuna study mirroring the sweep (read it; the sweep asks and tells it)."""
        return self._study

    def ask(self, trial_id: int) -> dict:
        """A new Optuna trial for ``trial_id``; its configuration (its stored one, resumed)."""
        with quiet():
            known = self._known.pop(trial_id, None)
            if known is not None:  # a resumed trial runs again with the configuration it had
                params = {n: known[n] for n in self.distributions if n in known}
                self._study.enqueue_trial(params)
            trial = self._study.ask(self.distributions)
            params = trial.params  # a copy each time it is read: read once
            try:
                check_asked(self.name, self.space, params)
            except Exception:  # a value outside the space: the trial fails, Optuna's too
                self._study.tell(trial, state=_state("FAIL"))
                raise
        self._trials[trial_id] = trial
        self._steps[trial_id] = set()
        return configuration_of(self.space, params, self.constants)

    def reported(self, trial_id: int, step: Any, value: Any) -> None:
        """Tell ``value`` at ``step`` as an intermediate value (an int step >= 0, once a step)."""
        trial, at = self._trials.get(trial_id), _int_step(step)
        value = _finite(value)
        if len(self.names) > 1:  # Optuna keeps no intermediate values of several objectives
            return None
        if trial is None or at is None or value is None or at in self._steps[trial_id]:
            return None  # a restart reports steps again: told once
        self._steps[trial_id].add(at)
        try:
            with quiet():
                trial.report(value, at)
        except Exception:  # noqa: BLE001 - a report Optuna refuses costs the sweep nothing
            logger.warning("labkit: Optuna refused a report of trial %d", trial_id, exc_info=True)
        return None

    def ended(self, record: TrialRecord) -> None:
        """Tell the end of ``record``'s trial: COMPLETE with its value, PRUNED or FAIL."""
        trial = self._trials.pop(record.id, None)
        self._steps.pop(record.id, None)
        if trial is None:  # never asked in this run (a pending trial stopped by hand)
            return
        state, values = _outcome(record, self.names)
        try:
            with quiet():
                if record.constraints is not None:
                    _tell_constraints(trial, record.constraints)
                if values is not None:  # COMPLETE: every value finite (see _outcome)
                    self._complete(trial, state, values)
                else:  # PRUNED keeps its last intermediate value: Optuna's own tell says how
                    self._study.tell(trial, values, state=state)
        except Exception as exc:  # noqa: BLE001
            if _stops_study(exc):  # a grid exhausted: labkit's trials= decides when to stop
                return
            logger.warning("labkit: Optuna refused the end of trial %d", record.id, exc_info=True)

    def _complete(self, trial: Any, complete: Any, values: list) -> None:
        """Tell ``trial`` COMPLETE (``complete``) with ``values`` as ``Study.tell`` does, uncopied.

        ``values``: finite floats, one an objective.  ``Study.tell`` returns a deep copy of
        the trial, which nobody here reads: about 9% of all a labkit NSGA-II trial's
        instructions (issue 48's cost).  Through public APIs only: the study's own
        in-memory storage and its sampler's ``after_trial``, in Optuna's order
        (``after_trial`` first; the state set even if it raises, as ``Study.stop`` does
        for an exhausted grid).  The default pruner filters no study, as a
        ``HyperbandPruner``'s would: labkit's study has the default.
        """
        storage = self._storage
        trial_id = storage.get_trial_id_from_study_id_trial_number(self._study_id, trial.number)
        frozen = storage.get_trial(trial_id)
        if frozen.state.is_finished():
            raise ValueError(f"Cannot tell a {frozen.state.name} trial.")
        try:
            self._study.sampler.after_trial(self._study, frozen, complete, values)
        finally:
            storage.set_trial_state_values(trial_id, complete, values)

    def resume(self, records: list[TrialRecord]) -> None:
        """Tell the stored trials that ended; keep the configurations of those that run again."""
        for record in records:
            if record.status.terminal:
                self._add(record)
            elif record.config and record.attempts:
                self._known[record.id] = dict(record.config)

    def _add(self, record: TrialRecord) -> None:
        """A stored trial that ended, added to the study as it ended."""
        import optuna

        params = {n: record.config[n] for n in self.distributions if n in record.config}
        if len(params) < len(self.distributions):  # never started: no configuration
            return
        state, values = _outcome(record, self.names)
        intermediate = _intermediate(record, self.metric) if len(self.names) == 1 else {}
        if state == optuna.trial.TrialState.PRUNED and intermediate:
            values = [intermediate[max(intermediate)]]  # as study.tell keeps a pruned one's
        told = {} if record.constraints is None else {CONSTRAINTS_ATTR: list(record.constraints)}
        kept = {} if record.constraints is None else {OPTUNA_CONSTRAINTS_KEY: record.constraints}
        try:
            with quiet():
                self._study.add_trial(
                    optuna.trial.create_trial(
                        state=state,
                        values=values,
                        params=params,
                        distributions=self.distributions,
                        intermediate_values=intermediate,
                        user_attrs=told,
                        system_attrs=kept,  # as the sampler's after_trial puts them
                    )
                )
        except Exception:  # noqa: BLE001 - a stored trial Optuna refuses is left out
            logger.warning("labkit: trial %d could not be told to Optuna", record.id, exc_info=True)

    def __repr__(self) -> str:
        return f"<OptunaSearch {self.name}, {len(self._study.trials)} Optuna trials>"


def _state(name: str) -> Any:
    """Optuna's ``TrialState`` called ``name``."""
    from optuna.trial import TrialState

    return TrialState[name]


def _stops_study(exc: BaseException) -> bool:
    """Whether ``exc`` is ``Study.stop`` refusing to run outside ``study.optimize``.

    A sampler whose space is exhausted (``GridSampler``, ``BruteForceSampler``)
    calls it in ``after_trial``; Optuna records the trial's end first.
    """
    from optuna.study import Study

    stop = Study.stop.__code__
    return isinstance(exc, RuntimeError) and any(
        frame.f_code is stop for frame, _ in traceback.walk_tb(exc.__traceback__)
    )


def _outcome(record: TrialRecord, names: tuple) -> tuple[Any, list | None]:
    """Optuna's state and values for how ``record`` ended (``names``: the objectives)."""
    from optuna.trial import TrialState

    if len(names) == 1:
        values = [_finite(record.value)]
    else:
        values = [_finite((record.objectives or {}).get(n)) for n in names]
    if record.status == Status.COMPLETED and None not in values:
        return TrialState.COMPLETE, values
    if record.status == Status.STOPPED:
        return TrialState.PRUNED, None
    return TrialState.FAIL, None


def _intermediate(record: TrialRecord, metric: str | None) -> dict[int, float]:
    """``{step: value}`` of the metric over ``record``'s reports, as Optuna keeps them."""
    out: dict[int, float] = {}
    for step, metrics, _ in record.history:
        at, value = _int_step(step), _finite(metrics.get(metric)) if metric else None
        if at is not None and value is not None:
            out.setdefault(at, value)
    return out


def _int_step(step: Any) -> int | None:
    """``step`` as Optuna's step (an int >= 0), or None when it is not one."""
    if isinstance(step, bool):
        return None
    if isinstance(step, numbers.Integral):
        return int(step) if int(step) >= 0 else None
    if isinstance(step, float) and step.is_integer() and step >= 0:
        return int(step)
    return None


def _finite(value: Any) -> float | None:
    """``value`` as a finite float, or None."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _tell_constraints(trial, values) -> None:
    """Tell ``trial``'s constraint values the ways Optuna's samplers read them.

    ``Trial.set_constraint`` (Optuna 5): every constraint-aware sampler reads them,
    built with a ``constraints_func`` or not; the user attribute is what
    :func:`~labkit.experiments.objectives.samplers.stored_constraints` reads for a
    sampler built with one.  The keys are labkit's own, apart from the
    list a ``constraints_func`` stores, so the two never overwrite each other.
    """
    trial.set_user_attr(CONSTRAINTS_ATTR, list(values))
    for i, value in enumerate(values):
        trial.set_constraint(f"labkit{i}", float(value))
