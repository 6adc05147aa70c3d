"""``lk.sweep``'s arguments: declared once, bound from its signature, checked before anything runs.

:data:`SWEEP_CONSTRAINTS` says what each argument may be
(:mod:`labkit.constraints`), and :class:`SweepConfig`, a typed, frozen
dataclass, is the call: its fields are ``lk.sweep``'s signature.
:func:`takes` offers a function of one config with the signature its fields
make (as scikit-learn's ``validate_params`` binds a call to a signature):
each call is bound once, defaults applied, and the config made, which checks
every declared argument.  The rules that need the space come after, in
:func:`prepare`.  An extension of a sweep runs it anew with the same config,
changed where it must be (:meth:`SweepConfig.changed`); a sweep's
:class:`~.spec.SweepSpec` is derived from its config, and the launchers read
only the spec.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..constraints import InstanceOf, Interval, Options, Satisfies, check_arguments
from ..errors import InputError, require_callable
from ..scheduling import FunctionCallable
from .objectives.declared import is_modes, is_names, objectives_of
from .search import Search, is_sampler, search_of
from .search.pbt import refuse_several
from .search.rules import check_rule, own_rule
from .search.space import Space

__all__ = [
    "SWEEP_CONSTRAINTS",
    "DEFAULT_STORE",
    "SweepConfig",
    "Prepared",
    "prepare",
    "takes",
    "signature_of",
    "count",
    "function_of",
    "check_pickles",
]

C = TypeVar("C")
R = TypeVar("R")


def count(low: int) -> Interval:
    """An int >= ``low`` (``bool`` is none)."""
    return Interval(int, low, name=f"an int >= {low}")


def _non_empty_str(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _path_or_url(value: Any) -> bool:
    return isinstance(value, os.PathLike) or _non_empty_str(value)


def _options(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) for k in value)


#: What each argument of ``lk.sweep`` may be; the rules that depend on the space
#: or the store come after, in :func:`prepare`.
SWEEP_CONSTRAINTS: dict[str, list] = {
    "trials": [count(1), None],
    "metric": [
        Satisfies(
            is_names,
            "the name of a reported metric (a str), or a tuple of 2 to 4 names "
            "(several objectives: ('loss', 'latency_ms'))",
        )
    ],
    "mode": [
        Satisfies(
            is_modes,
            "'min' or 'max' (is a lower or higher metric better?), or a tuple of them, "
            "one per objective",
        )
    ],
    "seed": [count(0), None],
    "wait": [Options((True, False), "True or False")],
    "resume": [Options((True, False), "True or False")],
    "max_failures": [count(0)],
    "max_concurrent": [count(1), None],
    "workers_per_trial": [count(1)],
    "scheduler": [
        InstanceOf("labkit.scheduling.Scheduler", "an lk.DaskScheduler or an lk.LocalScheduler"),
        None,
    ],
    "name": [Satisfies(_non_empty_str, "a non-empty str"), None],
    # a sampler is recognised without importing optuna for anything else (search.is_sampler)
    "search": [
        Options(("random",), "'random'"),
        Satisfies(is_sampler, "an Optuna sampler (optuna.samplers.TPESampler(seed=0), ...)"),
        InstanceOf(Search, "lk.PBT(...)"),  # or another Search of one's own
    ],
    "checkpoints": [
        Satisfies(_path_or_url, "a folder or an fsspec URL ('s3://bucket/sweeps')"),
        None,
    ],
    "storage_options": [Satisfies(_options, "a dict of fsspec's options"), None],
    "keep_best": [count(1), None],
    "constraints": [
        Satisfies(callable, "a function of the final metrics returning constraint values"),
        None,
    ],
}


#: Where sweeps are kept unless told otherwise (``store=None`` keeps them in memory).
DEFAULT_STORE = "experiments.db"


@dataclass(frozen=True)
class SweepConfig:
    """One call of ``lk.sweep``: every argument, typed, bound from the signature and checked once.

    The fields are ``lk.sweep``'s signature (:func:`takes` derives it from them: ``fn`` and
    ``space`` positional, the rest keyword-only), so an argument is declared here alone.
    Making one checks :data:`SWEEP_CONSTRAINTS`; :meth:`changed` makes another, checked anew.
    """

    fn: Any
    space: Any
    trials: int | None = None
    metric: str | tuple[str, ...] | None = None
    mode: str | tuple[str, ...] | None = None
    scheduler: Any = None
    seed: int | None = None
    early_stop: Any = None
    store: Any = DEFAULT_STORE
    name: str | None = None
    resume: bool = False
    wait: bool = True
    max_failures: int = 3
    max_concurrent: int | None = None
    workers_per_trial: int = 1
    search: Any = "random"
    checkpoints: Any = None
    storage_options: dict | None = None
    keep_best: int | None = None
    constraints: Any = None

    def __post_init__(self) -> None:
        __tracebackhide__ = True
        ruled = {name: getattr(self, name) for name in SWEEP_CONSTRAINTS}
        check_arguments(SWEEP_CONSTRAINTS, "lk.sweep", **ruled)
        names, modes = objectives_of(self.metric, self.mode)  # they pair, no name twice
        if not isinstance(self.metric, str):  # one spelling: tuples (a list given is copied)
            object.__setattr__(self, "metric", names)
            object.__setattr__(self, "mode", modes)

    @property
    def objectives(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """``(names, modes)`` of the objectives: one of each for a single metric."""
        return objectives_of(self.metric, self.mode)

    def changed(self, **changes: Any) -> SweepConfig:
        """This call with ``changes`` (checked again), for running the sweep anew."""
        return dataclasses.replace(self, **changes)


#: How many of :class:`SweepConfig`'s first fields ``lk.sweep`` takes by position.
POSITIONAL = 2


def signature_of(config_type: type, positional: int) -> inspect.Signature:
    """The signature a dataclass's fields make: the first ``positional`` by position or name."""
    hints = typing.get_type_hints(config_type)  # the fields' types, not their strings
    parameters = [
        inspect.Parameter(
            f.name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD if i < positional
            else inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default,
            annotation=hints[f.name],
        )
        for i, f in enumerate(dataclasses.fields(config_type))
    ]  # fmt: skip
    return inspect.Signature(parameters)


def takes(
    config_type: type[C], positional: int = POSITIONAL
) -> Callable[[Callable[[C], R]], Callable[..., R]]:
    """``fn(config)`` offered as ``fn(*args, **kwargs)`` with the signature of ``config_type``'s fields.

    Each call is bound to that signature (an unknown keyword a ``TypeError``, as
    ever), its defaults applied, and the config made (and so checked) once.
    """
    signature = signature_of(config_type, positional)

    def wrap(fn: Callable[[C], R]) -> Callable[..., R]:
        @functools.wraps(fn)
        def called(*args: Any, **kwargs: Any) -> R:
            __tracebackhide__ = True
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            return fn(config_type(**bound.arguments))

        called.__signature__ = signature  # type: ignore[attr-defined]  # what help() shows
        return called

    return wrap


@dataclass(frozen=True)
class Prepared:
    """What a sweep's checks that need its space make of a :class:`SweepConfig`."""

    space: Space
    rule: Any  # a copy of early_stop's rule (None without one)
    search: Search


def prepare(config: SweepConfig) -> Prepared:
    """The space, a copy of the rule and the search, after the checks that depend on the space."""
    space = Space.of(config.space)
    if config.trials is None and space.size is None and not config.resume:
        raise InputError(
            "trials= is needed for a random space (how many configurations to try)",
            argument="trials",
        )
    size = space.size
    if (
        space.kind == "list"
        and config.trials is not None
        and size is not None
        and config.trials > size
    ):
        raise InputError(
            f"trials={config.trials} but the list holds {size} configurations",
            argument="trials",
        )
    space.check_pickles()
    names, modes = config.objectives
    # a copy: the rule's records (ASHA's rungs) belong to this sweep, not to the object given
    rule = own_rule(check_rule(config.early_stop, names))
    refuse_several(config.search, names)  # lk.PBT ranks by one metric
    if config.scheduler is not None and config.scheduler.closed:
        raise InputError("the scheduler is shut down", argument="scheduler")
    # metric and mode are set here: SWEEP_CONSTRAINTS refuse None when the config is made
    if len(names) == 1:  # one objective: as ever
        return Prepared(space, rule, search_of(config.search, space, modes[0], names[0]))
    return Prepared(space, rule, search_of(config.search, space, modes, names))


def function_of(fn: Any) -> tuple[Callable, bool]:
    """``(function, holds_gil)`` from a callable or an ``lk.FunctionCallable``."""
    if isinstance(fn, FunctionCallable):
        return fn.fn, bool(fn.holds_gil)
    require_callable(fn, "fn", "lk.sweep")
    return fn, bool(getattr(fn, "holds_gil", False))


def check_pickles(fn: Callable) -> None:
    """``fn`` pickles (it must reach worker processes); an InputError naming fn if not."""
    import cloudpickle

    try:
        cloudpickle.dumps(fn)
    except Exception as exc:  # noqa: BLE001 - pickling fails in many ways
        raise InputError(
            f"the trial function cannot be pickled ({type(exc).__name__}: {exc}), "
            "so it cannot reach the workers",
            argument="fn",
        ) from None
