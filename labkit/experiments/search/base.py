"""What drives a sweep's configurations: the :class:`Search` protocol, random search, and ``search=``.

A search is consulted by the sweep's engine (through :mod:`..searcher`,
under the engine's lock) at four moments of a trial's life:

* :meth:`Search.ask` -- a trial starts and needs its configuration (only a
  search whose :attr:`~Search.asks` is true: the others' configurations are
  drawn when trials are added, from the sweep's seed);
* :meth:`Search.reported` -- a value of the sweep's metric was reported (a
  search that also decides on reports, as ``lk.PBT``, is a
  :class:`~.decision.Decider`: it hears them as one, :mod:`.chain`);
* :meth:`Search.ended` -- a trial ended (its final :class:`~..record.TrialRecord`);
* :meth:`Search.resume` -- a resumed sweep's stored trials, before anything is asked.

:class:`RandomSearch` is labkit's own (``search="random"``, the default):
configurations drawn as trials are added, hooks that do nothing.  An Optuna
sampler is wrapped in an :class:`~.optuna_search.OptunaSearch`
(:func:`search_of`), imported only when one is given.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ...errors import InputError
from ..trials.record import TrialRecord
from .space import Space

__all__ = [
    "Search",
    "RandomSearch",
    "Named",
    "Studied",
    "search_of",
    "is_sampler",
    "describe_search",
    "study_of",
]


@runtime_checkable
class Search(Protocol):
    """How a sweep's configurations are chosen; see the module's docstring.

    ``asks``: whether a trial's configuration is asked when it starts (True)
    rather than drawn when it is added (False).
    """

    asks: bool

    def ask(self, trial_id: int) -> dict:
        """The configuration of trial ``trial_id``, which starts now (asked once a trial)."""
        ...

    def reported(self, trial_id: int, step: Any, value: float) -> Any:
        """The trial reported ``value`` of the metric at ``step`` (what it returns is not used).

        What a trial does next is decided by a :class:`~.decision.Decider`: a
        search that decides (population-based training, :mod:`.pbt`) is one too.
        """
        ...

    def ended(self, record: TrialRecord) -> None:
        """The trial ended; ``record`` holds its final status, value and history."""
        ...

    def resume(self, records: list[TrialRecord]) -> None:
        """A resumed sweep's stored trials, told before anything new is asked."""
        ...


@runtime_checkable
class Named(Protocol):
    """A search that gives its name (stored with the sweep): ``PBT``, a sampler's class."""

    name: str


@runtime_checkable
class Studied(Protocol):
    """A search that drives a study one may read (an Optuna sampler's: ``result.study``)."""

    study: Any


class RandomSearch:
    """``search="random"``: configurations drawn from the seed when trials are added."""

    asks = False

    def ask(self, trial_id: int) -> dict:
        """Never called (``asks`` is False): the sweep draws configurations itself."""
        raise NotImplementedError("random search draws configurations when trials are added")

    def reported(self, trial_id: int, step: Any, value: float) -> None:
        """Nothing to learn."""
        return None

    def ended(self, record: TrialRecord) -> None:
        """Nothing to learn."""

    def resume(self, records: list[TrialRecord]) -> None:
        """Nothing to learn."""

    def __repr__(self) -> str:
        return "random"


def is_sampler(value: Any) -> bool:
    """Whether ``value`` is an Optuna sampler; optuna is imported only for an object of its own.

    A class of a module named ``optuna...`` anywhere in the value's class
    hierarchy (a sampler of one's own derives from ``optuna.samplers.BaseSampler``)
    is what makes it worth importing optuna to check.
    """
    if isinstance(value, type) or not any(
        getattr(k, "__module__", "").split(".")[0] == "optuna" for k in type(value).__mro__
    ):
        return False
    import optuna

    return isinstance(value, optuna.samplers.BaseSampler)


def search_of(
    search: Any, space: Space, mode: str | tuple, metric: str | tuple | None = None
) -> Search:
    """The :class:`Search` for ``lk.sweep``'s ``search=`` on ``space`` (``mode``: min or max).

    ``"random"`` is :class:`RandomSearch`; an :class:`~.pbt.PBT` a copy of its own
    for this sweep (:meth:`~.pbt.PBT.bound`); an Optuna sampler an
    :class:`~.optuna_search.OptunaSearch` of a fresh in-memory study (it needs
    a space of distributions: a grid or a list is an InputError naming
    ``search``); anything else is an InputError naming ``search``.  Several
    objectives come as tuples of ``mode`` and ``metric`` (PBT refuses them first).
    """
    if isinstance(search, str) and search == "random":
        return RandomSearch()
    from .pbt import PBT

    if isinstance(search, PBT):
        # one metric here: a PBT of several objectives was refused (pbt.refuse_several)
        own = search.bound(space, str(mode))
        own.metric = str(metric or "")
        return own
    if not is_sampler(search) and isinstance(search, Search):
        return search  # a search of one's own
    if not is_sampler(search):
        raise InputError(
            f"search must be 'random', an Optuna sampler such as "
            f"optuna.samplers.TPESampler(seed=0) or lk.PBT(...); got {search!r:.60} ({type(search).__name__})",
            argument="search",
        )
    if space.kind != "random":
        raise InputError(
            f"an Optuna sampler searches a space of distributions ({{'lr': "
            f"lk.loguniform(1e-4, 1e-1), ...}}), not a {space.kind}: give such a space, "
            "or search='random' to run every point",
            argument="search",
        )
    from .optuna_search import OptunaSearch

    return OptunaSearch(search, space, mode, metric)


def describe_search(search: Any) -> str:
    """The search in words, stored with the sweep: ``random`` or the sampler's class name."""
    if isinstance(search, RandomSearch) or search is None:
        return "random"
    return str(search.name) if isinstance(search, Named) else type(search).__name__


def study_of(search: Any) -> Any:
    """The study ``search`` drives (an Optuna sampler's), None for a search without one."""
    return search.study if isinstance(search, Studied) else None
