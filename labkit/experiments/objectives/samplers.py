"""Optuna's samplers told several objectives and constraints (issue 48).

* :func:`directions_of`: the study's ``directions=`` for the sweep's modes.
* :func:`check_several`: a sampler that takes one objective only is refused
  before anything runs, with an InputError naming ``search``.  Optuna says so
  itself when such a sampler first samples a study of several directions
  (``BaseSampler._raise_error_if_multi_objective``: ``CmaEsSampler``, ...): a
  copy of the sampler is asked once on a scratch study of those directions,
  and that ValueError becomes the InputError.
* :func:`stored_constraints`: the ``constraints_func`` for a constraint-aware
  sampler (``NSGAIISampler``, ``NSGAIIISampler``, ``TPESampler``,
  ``GPSampler``): it reads the values of ``lk.sweep``'s ``constraints=`` that
  labkit keeps on each Optuna trial (:data:`CONSTRAINTS_ATTR`, a user
  attribute); the sampler then stores them where its selection reads them
  (the system attribute :data:`OPTUNA_CONSTRAINTS_KEY`), as in ``study.optimize``.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence
from typing import Any, Literal

from ...errors import InputError

__all__ = [
    "CONSTRAINTS_ATTR",
    "OPTUNA_CONSTRAINTS_KEY",
    "directions_of",
    "check_several",
    "stored_constraints",
]

#: The user attribute of an Optuna trial that holds labkit's constraint values.
CONSTRAINTS_ATTR = "labkit.constraints"
#: Where Optuna's constraint-aware samplers keep a trial's constraint values (a system
#: attribute: ``optuna.samplers._base._CONSTRAINTS_KEY``); a stored trial told on resume
#: carries them there, as its sampler's ``after_trial`` would have put them.
OPTUNA_CONSTRAINTS_KEY = "constraints"


Direction = Literal["minimize", "maximize"]


def directions_of(modes: Sequence[str]) -> list[Direction]:
    """Optuna's directions for labkit's modes (``"min"`` -> ``"minimize"``)."""
    return ["maximize" if m == "max" else "minimize" for m in modes]


def check_several(sampler: Any, distributions: dict, directions: list[Direction]) -> None:
    """A copy of ``sampler`` asks once on a scratch study of ``directions``; an InputError
    naming ``search`` if Optuna says the sampler takes one objective only."""
    import optuna

    try:
        scratch = copy.deepcopy(sampler)
    except Exception:  # noqa: BLE001 - one that cannot be copied is asked as it is, later
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = optuna.create_study(directions=directions, sampler=scratch)
        try:
            study.ask(distributions)
        except ValueError as exc:
            if "multi-objective" not in str(exc):
                raise
            raise InputError(
                f"the sampler {type(sampler).__name__} takes one objective only, and the "
                f"sweep has {len(directions)} (Optuna: {exc}): give a sampler of several "
                "objectives (NSGAIISampler, NSGAIIISampler, TPESampler, GPSampler, "
                "RandomSampler), or one metric",
                argument="search",
            ) from None


def stored_constraints(trial: Any) -> tuple:
    """A sampler's ``constraints_func``: the constraint values labkit keeps on ``trial``."""
    return tuple(trial.user_attrs.get(CONSTRAINTS_ATTR, ()))
