"""What a sweep is: its name, space, seed, metric, mode and settings; its trials' configurations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from .search import describe_search
from .search.rules import describe_rule
from .search.space import Space
from .trials.record import TrialRecord

__all__ = ["SweepSpec", "check_room"]


@dataclass
class SweepSpec:
    """What a sweep is: its name, space, seed, metric, mode and settings."""

    name: str
    space: Space
    seed: int
    metric: str
    mode: str
    trials: int
    rule: Any = None
    max_failures: int = 3
    workers_per_trial: int = 1
    max_concurrent: int | None = None
    search: Any = None  # a Search (None: random search)
    asked: bool = False  # whether some configurations were ever asked (kept, never redrawn)
    checkpoints: Any = None  # where trials write checkpoints (a CheckpointPlace)
    #: whether that place was given (``checkpoints=``, or stored by the sweep): kept with the
    #: sweep; the default folder beside the store is found from the store's path when read
    checkpoints_given: bool = False
    keep_best: int | None = None  # trials whose last checkpoint is kept (None: every one)
    #: every objective's name and mode, in order (one each for a single metric; ``metric`` and
    #: ``mode`` are the first's): several make a Pareto front (issue 48)
    objectives: tuple = ()
    modes: tuple = ()
    constraints: Any = None  # fn(final metrics) -> values, each <= 0 when satisfied

    def __post_init__(self) -> None:
        if not self.objectives:  # a single metric, as ever
            self.objectives, self.modes = (self.metric,), (self.mode,)

    @classmethod
    def of(
        cls,
        config: Any,
        prepared: Any,
        *,
        name: str,
        seed: int,
        trials: int,
        asked: bool,
        checkpoints: Any = None,
    ) -> SweepSpec:
        """The spec of a sweep made from its checked ``config`` (a :class:`~.arguments.SweepConfig`)
        and what :func:`~.arguments.prepare` made of it; the rest comes from the store."""
        names, modes = config.objectives
        return cls(
            name=name,
            space=prepared.space,
            seed=seed,
            metric=names[0],
            mode=modes[0],
            objectives=names,
            modes=modes,
            constraints=config.constraints,
            trials=trials,
            rule=prepared.rule,
            max_failures=config.max_failures,
            workers_per_trial=config.workers_per_trial,
            max_concurrent=config.max_concurrent,
            search=prepared.search,
            asked=asked,
            checkpoints=checkpoints,
            keep_best=config.keep_best,
        )

    @property
    def several(self) -> bool:
        """Whether the sweep has several objectives (a Pareto front, no single best)."""
        return len(self.objectives) > 1

    @property
    def reported(self) -> str | tuple:
        """What a trial's first report must hold: the metric, or every objective (a tuple)."""
        return self.objectives if self.several else self.metric

    @property
    def asks(self) -> bool:
        """Whether trials get their configurations from the search as they start."""
        return self.search is not None and bool(self.search.asks)

    def settings(self) -> dict:
        """The settings stored with the sweep."""
        return {
            "trials": self.trials,
            "early_stop": self.rule_words(),
            "max_failures": self.max_failures,
            "workers_per_trial": self.workers_per_trial,
            "max_concurrent": self.max_concurrent,
            "search": describe_search(self.search),
            "asked": self.asked or self.asks,
            # the URL alone: storage_options may hold secrets (give them again to load)
            "checkpoints": self.checkpoints.location.url if self.checkpoints_given else None,
            "keep_best": self.keep_best,
            "constraints": _named(self.constraints),
        }

    def rule_words(self) -> str | None:
        """The early-stopping rule in words (None without one)."""
        return None if self.rule is None else describe_rule(self.rule)

    def new_records(self, first: int, n: int) -> list[TrialRecord]:
        """Trials ``first .. first + n - 1``, pending, their configurations drawn (or ``{}``
        until they start, for a search that asks)."""
        check_room(self.space, first + n)
        asks = self.asks
        return [
            TrialRecord(id=i, config={} if asks else self.space.configuration(i, self.seed))
            for i in range(first, first + n)
        ]


def check_room(space: Space, total: int) -> None:
    """A list of configurations holds ``total`` trials; an InputError naming trials if not."""
    if space.kind == "list" and space.size is not None and total > space.size:
        raise InputError(
            f"{total} trials, but the list holds {space.size} configurations",
            argument="trials",
        )


def _named(fn: Any) -> str | None:
    """A function's name for the stored settings (the function itself is given on resume)."""
    return None if fn is None else str(getattr(fn, "__qualname__", type(fn).__name__))
