"""An Optuna sampler given to a sweep: checked before anything runs, and a fresh one a sweep.

* :func:`check_sampler`: a sampler that needs a package of its own
  (``CmaEsSampler`` needs ``cmaes``, :data:`NEEDS`) finds it, and a
  ``GridSampler``'s grid names every parameter of the space with values the
  space holds; else an InputError naming ``search`` before any trial runs
  (Optuna would import the package at the second trial, and run a grid value
  outside its distribution with a warning).
* :func:`own_sampler`: the sampler a sweep asks.  The object given is the
  first sweep's; a later sweep given the same object asks a copy of it as it
  was before its first sweep, so one seeded sampler asks the same
  configurations in every sweep (as ``lk.PBT`` and the rules are copied).
* :func:`check_asked`: what a sampler asked lies in the space; else an
  InputError naming the sampler, the parameter, the value and the space
  (the trial fails with it, the sweep goes on).
"""

from __future__ import annotations

import copy
import importlib
import logging
import warnings
import weakref
from typing import Any

from ...errors import InputError
from .distributions import Distribution
from .optuna_log import quiet
from .space import Space

__all__ = ["NEEDS", "check_sampler", "own_sampler", "check_asked"]

logger = logging.getLogger("labkit.experiments")

#: The packages a sampler imports when it first samples, by the name of its class.
NEEDS: dict[str, tuple[str, ...]] = {
    "CmaEsSampler": ("cmaes",),
    "GPSampler": ("torch", "scipy"),
    "QMCSampler": ("scipy",),
    "BoTorchSampler": ("botorch", "torch"),
}

# sampler given -> a copy of it as it was before its first sweep (a later sweep asks a copy)
_BEFORE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def check_sampler(sampler: Any, space: Space, distributions: dict) -> None:
    """The sampler's packages importable, a grid's values in the space; see the module."""
    for kind in type(sampler).__mro__:
        for package in NEEDS.get(kind.__name__, ()):
            try:
                importlib.import_module(package)
            except ImportError as exc:
                raise InputError(
                    f"the sampler {type(sampler).__name__} needs the package {package!r}, "
                    f"which cannot be imported here ({exc}): pip install {package}, or "
                    "give another sampler",
                    argument="search",
                ) from None
    import optuna

    if isinstance(sampler, optuna.samplers.GridSampler):
        _check_grid(sampler, space, distributions)


def _check_grid(sampler: Any, space: Space, distributions: dict) -> None:
    """Every parameter of the space on the grid, with values the space holds."""
    grid = _grid_of(sampler)
    name = type(sampler).__name__
    missing = [p for p in distributions if p not in grid]
    if missing:
        raise InputError(
            f"the {name}'s grid has no values for {', '.join(map(repr, missing))} of the "
            f"space (its grid holds {', '.join(map(repr, grid)) or 'nothing'})",
            argument="search",
        )
    for parameter in distributions:
        entry = space.entries[parameter]
        for value in grid[parameter]:
            if not entry.contains(value):
                raise InputError(
                    f"the {name}'s grid holds {parameter}={value!r:.60}, outside the "
                    f"space's {parameter!r}: {entry!r:.80}",
                    argument="search",
                )


def _grid_of(sampler: Any) -> dict:
    """The grid of a GridSampler ``{parameter: values}``, as it tells a trial (public API).

    A copy of it is asked once on a study of its own: the grid is what it
    writes in the trial's system attributes.
    """
    import optuna

    with quiet(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = optuna.create_study(sampler=copy.deepcopy(sampler))
        study.ask()
        return dict(study.trials[0].system_attrs.get("search_space") or {})


def own_sampler(sampler: Any) -> Any:
    """The sampler a sweep asks: ``sampler`` at its first sweep, a copy as it was after."""
    try:
        before = _BEFORE.get(sampler)
        if before is None:
            _BEFORE[sampler] = copy.deepcopy(sampler)
            return sampler
        return copy.deepcopy(before)
    except Exception:  # noqa: BLE001 - one that cannot be copied or weakly held: as it is
        logger.debug("labkit: the sampler %r is not copied per sweep", sampler, exc_info=True)
        return sampler


def check_asked(name: str, space: Space, params: dict) -> None:
    """An InputError naming the sampler, parameter, value and space for a value outside it."""
    for parameter, value in params.items():
        entry = space.entries.get(parameter)
        if isinstance(entry, Distribution) and not entry.contains(value):
            raise InputError(
                f"the sampler {name} asked {parameter}={value!r:.60}, outside the space's "
                f"{parameter!r}: {entry!r:.80}",
                argument=parameter,
            )
