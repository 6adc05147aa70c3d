"""Several objectives at once: dominance, Pareto fronts, hypervolume (issue 48).

``dominance`` holds the pure functions on an ``(n, k)`` array of objective
values and their modes.  It imports numpy only; ``labkit.experiments.search``
and the sweep's results import it, never the reverse.
"""

from .dominance import (
    as_minimised,
    crowding_distance,
    dominates,
    hypervolume,
    nondominated_ranks,
    pareto_front,
)

__all__ = [
    "as_minimised",
    "dominates",
    "pareto_front",
    "nondominated_ranks",
    "crowding_distance",
    "hypervolume",
]
