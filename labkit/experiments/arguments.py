"""``lk.sweep``'s arguments: declared once, bound from its signature, checked before anything runs.

:data:`SWEEP_CONSTRAINTS` says what each argument may be
(:mod:`labkit.constraints`); :func:`declared` wraps the function the way
scikit-learn's ``validate_params`` does: a call is bound to the function's
own signature (``inspect.signature``), defaults applied, every declared
argument checked, and the function runs with the bound arguments.  The body
takes them all at once as a :class:`SweepCall` (``SweepCall(locals())``), so
no argument is ever listed again: an extension of a sweep calls it anew with
the same call, changed where it must be (:meth:`SweepCall.changed`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from ..constraints import InstanceOf, Interval, Options, Satisfies, check_arguments
from ..errors import InputError, require_callable
from ..scheduling import FunctionCallable
from .search import Search, is_sampler, search_of
from .search.rules import check_rule, own_rule
from .search.space import Space

__all__ = ["SWEEP_CONSTRAINTS", "declared", "SweepCall", "count", "function_of", "check_pickles"]

F = TypeVar("F", bound=Callable[..., Any])


def count(low: int) -> Interval:
    """An int >= ``low`` (``bool`` is none)."""
    return Interval(int, low, name=f"an int >= {low}")


def _non_empty_str(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


#: What each argument of ``lk.sweep`` may be; the rules that depend on the space
#: or the store come after, in :meth:`SweepCall.checked`.
SWEEP_CONSTRAINTS: dict[str, list] = {
    "trials": [count(1), None],
    "metric": [Satisfies(_non_empty_str, "the name of a reported metric (a str)")],
    "mode": [Options(("min", "max"), "'min' or 'max' (is a lower or higher metric better?)")],
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
}


def declared(constraints: Mapping[str, list], what: str) -> Callable[[F], F]:
    """Bind each call of the function to its signature and check the ``constraints`` first."""

    def wrap(fn: F) -> F:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def checked(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            bound = signature.bind(*args, **kwargs)  # an unknown keyword: TypeError, as ever
            bound.apply_defaults()
            ruled = {k: v for k, v in bound.arguments.items() if k in constraints}
            check_arguments(constraints, what, **ruled)
            return fn(*bound.args, **bound.kwargs)

        return checked  # type: ignore[return-value]  # functools.wraps keeps the signature

    return wrap


class SweepCall:
    """The arguments of one call of ``lk.sweep``, by name (``call.trials``, ``call["trials"]``)."""

    def __init__(self, arguments: Mapping[str, Any]):
        # the function's locals at its start: its arguments (and __tracebackhide__, not one)
        own = {k: v for k, v in arguments.items() if not k.startswith("__")}
        self.arguments = MappingProxyType(own)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["arguments"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, name: str) -> Any:
        return self.arguments[name]

    def changed(self, **changes: Any) -> dict[str, Any]:
        """The arguments with ``changes``, for calling the sweep again."""
        return {**self.arguments, **changes}

    def checked(self) -> tuple[Space, Any]:
        """The space and a copy of the rule, after the checks that depend on the space.

        The search is resolved on the space too (:meth:`searching`).
        """
        space = Space.of(self.space)
        if self.trials is None and space.size is None and not self.resume:
            raise InputError(
                "trials= is needed for a random space (how many configurations to try)",
                argument="trials",
            )
        if space.kind == "list" and self.trials is not None and self.trials > space.size:
            raise InputError(
                f"trials={self.trials} but the list holds {space.size} configurations",
                argument="trials",
            )
        space.check_pickles()
        # a copy: the rule's records (ASHA's rungs) belong to this sweep, not to the object given
        rule = own_rule(check_rule(self.early_stop))
        if self.scheduler is not None and self.scheduler.closed:
            raise InputError("the scheduler is shut down", argument="scheduler")
        self.__dict__["_search"] = search_of(self.search, space, self.mode, self.metric)
        return space, rule

    def searching(self) -> Search:
        """The :class:`~.search.Search` of ``search=``, resolved by :meth:`checked`."""
        return self.__dict__["_search"]


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
