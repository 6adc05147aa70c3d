"""How a sweep's configurations are chosen: random search (drawn from the seed) or Optuna's samplers.

``lk.sweep(..., search=S)``: ``"random"`` (the default), any Optuna sampler
(``optuna.samplers.TPESampler(seed=0)``, ``GPSampler``, ``CmaEsSampler``...)
or population-based training (``lk.PBT(...)``, :mod:`.pbt`).
:mod:`.base` declares the :class:`Search` protocol the sweep's engine calls
(through :mod:`labkit.experiments.search.searcher`) and resolves ``search=``
(:func:`search_of`); :mod:`.optuna_space` maps labkit's spaces to Optuna's
distributions, :mod:`.sampler_use` checks a sampler before anything runs
(and copies it for each later sweep) and :mod:`.optuna_search` drives an
in-memory study (:mod:`.optuna_log` holds Optuna's INFO lines back).  Optuna
is imported only when a sampler is given (``pip install labkit[search]``).

What decides at each report is a :class:`~.decision.Decider` (continue, stop,
pause, exploit): PBT is one, and so is an early-stopping rule through its
:class:`~.judge.Judge`; the engine consults them as one :mod:`.chain`.  A
search keeps ``ask`` and ``tell``.
"""

from .base import RandomSearch, Search, describe_search, is_sampler, search_of, study_of
from .pbt import PBT, Exploit, Pause

__all__ = [
    "Search",
    "RandomSearch",
    "PBT",
    "Exploit",
    "Pause",
    "search_of",
    "is_sampler",
    "describe_search",
    "study_of",
]
