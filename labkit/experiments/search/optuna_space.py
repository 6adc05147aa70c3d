"""A labkit space as Optuna's distributions, and Optuna's parameters as a labkit configuration.

``uniform(lo, hi)`` is a ``FloatDistribution(lo, hi)``, ``loguniform`` the
same with ``log=True``, ``randint(lo, hi)`` an ``IntDistribution(lo, hi - 1)``
(labkit's ``hi`` is excluded, as numpy's ``integers``; Optuna's is included)
and ``choice(options)`` a ``CategoricalDistribution``, whose options must be
plain values Optuna keeps (None, bool, int, float, str): anything else is an
InputError naming the parameter.  Constants are no distribution: they are
put back into every configuration as they are.
"""

from __future__ import annotations

import math
from typing import Any

from ...errors import InputError
from .distributions import Distribution
from .space import Space

__all__ = ["distributions_of", "configuration_of", "PLAIN"]

#: The types an Optuna categorical option may have.
PLAIN = (type(None), bool, int, float, str)


def distributions_of(space: Space) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(distributions, constants)`` of a random space: Optuna's distribution per parameter."""
    distributions, constants = {}, {}
    for name, entry in space.entries.items():
        if isinstance(entry, Distribution):
            distributions[name] = _distribution(name, entry)
        else:
            constants[name] = entry
    return distributions, constants


def _distribution(name: str, entry: Distribution) -> Any:
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    kind = entry.kind
    if kind in ("uniform", "loguniform"):
        lo, hi = entry.lo, entry.hi  # type: ignore[attr-defined]
        return FloatDistribution(float(lo), float(hi), log=kind == "loguniform")
    if kind == "randint":
        lo, hi = entry.lo, entry.hi  # type: ignore[attr-defined]
        return IntDistribution(int(lo), int(hi) - 1)
    if kind == "choice":
        options = entry.values()
        for option in options:
            if type(option) not in PLAIN or (isinstance(option, float) and math.isnan(option)):
                raise InputError(
                    f"parameter {name!r}: an Optuna sampler chooses among plain values "
                    f"(None, bool, int, float, str), not {option!r:.60} "
                    f"({type(option).__name__}); choose among names and map them to "
                    "objects in the trial function, or use search='random'",
                    argument=name,
                )
        return CategoricalDistribution(options)
    raise InputError(
        f"parameter {name!r}: an Optuna sampler knows uniform, loguniform, randint and "
        f"choice, not {type(entry).__name__}",
        argument=name,
    )


def configuration_of(space: Space, params: dict, constants: dict) -> dict:
    """A configuration in the space's order: Optuna's ``params``, the constants kept."""
    return {name: constants[name] if name in constants else params[name] for name in space.entries}
