"""Argument rules declared once, beside what takes them, and checked in one place.

After scikit-learn's ``_parameter_constraints``: a public constructor or
function declares, next to its signature, what each argument may be, as a
list of rules (any one of which is enough; ``None`` in the list allows
``None``), and calls :func:`check_arguments` first thing.  A value that
breaks its rules is an :class:`~labkit.errors.InputError` that names the
argument, says what it must be and what it got, always in the same words:

>>> RULES = {"n_workers": [Interval(int, 1), None], "mode": [Options(("auto", "threads"))]}
>>> check_arguments(RULES, n_workers=2, mode="auto")
>>> check_arguments(RULES, n_workers=0)
Traceback (most recent call last):
...
labkit.errors.InputError: n_workers must be a positive int or None; got 0 (int) [argument n_workers]
>>> check_arguments(RULES, mode="gpu")
Traceback (most recent call last):
...
labkit.errors.InputError: mode must be one of 'auto', 'threads'; got 'gpu' (str) [argument mode]

Rules: :class:`Interval` (numbers in a range; ``bool`` is never a number
here), :class:`Options` (one of given values; :func:`one_of` makes one),
:class:`InstanceOf` (of a type, by class or by ``"module.Class"`` name,
imported only when checked), :class:`Callable` (a callable),
:class:`HasMethods` (duck typing) and :class:`Satisfies` (a predicate with
its description).  The rules every package needs are declared here once:
:data:`POSITIVE_INT`, :data:`NON_NEGATIVE_INT`, :data:`FINITE_NUMBER`,
:data:`POSITIVE_NUMBER`, :data:`PROBABILITY`, :data:`FRACTION` and
:data:`SECONDS`; a package adds its own words only where the argument
needs them.

>>> check_argument("batch_size", 0, [POSITIVE_INT], "fit")
Traceback (most recent call last):
...
labkit.errors.InputError: fit: batch_size must be a positive int; got 0 (int) [argument batch_size]

This module is on the ground floor: it imports nothing else of labkit but
its errors.
"""

from __future__ import annotations

import importlib
import math
import numbers
from collections.abc import Callable as CallableType
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import InputError

__all__ = [
    "Rule",
    "Interval",
    "Options",
    "InstanceOf",
    "Callable",
    "HasMethods",
    "Satisfies",
    "POSITIVE_INT",
    "NON_NEGATIVE_INT",
    "FINITE_NUMBER",
    "POSITIVE_NUMBER",
    "PROBABILITY",
    "FRACTION",
    "SECONDS",
    "one_of",
    "check_arguments",
    "check_parameters",
    "check_argument",
    "describe",
]


class Rule:
    """One thing an argument may be."""

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` keeps this rule."""
        raise NotImplementedError

    def describe(self) -> str:
        """What a value keeping this rule is, to follow "must be"."""
        raise NotImplementedError

    def __repr__(self):
        return f"<{type(self).__name__}: {self.describe()}>"


class Interval(Rule):
    """A number of ``kind`` (``int`` or ``float``) from ``low`` to ``high``.

    ``closed`` says which ends belong to it: ``"both"`` (the default),
    ``"left"``, ``"right"`` or ``"neither"``; ``None`` for an end leaves that
    side open.  An ``int`` is a ``float`` here, ``bool`` neither; NaN never is.
    ``finite`` refuses infinities too (a setting that must be a real amount).
    """

    def __init__(
        self,
        kind: type,
        low: float | None = None,
        high: float | None = None,
        closed: str = "both",
        name: str | None = None,
        finite: bool = False,
    ):
        if kind not in (int, float):
            raise TypeError("Interval takes int or float")
        self.kind, self.low, self.high, self.closed = kind, low, high, closed
        self.finite = finite
        self.name = name  # how the message says it, when not in the words made here

    def accepts(self, value: Any) -> bool:
        if isinstance(value, bool):
            return False
        wanted = numbers.Integral if self.kind is int else numbers.Real
        if not isinstance(value, wanted):
            return False
        # ints are finite (and may not fit a float)
        if not isinstance(value, numbers.Integral) and (
            math.isnan(value) or (self.finite and math.isinf(value))
        ):
            return False
        return self._within(value)

    def _within(self, value: Any) -> bool:
        """Whether a number (not NaN) lies between the ends."""
        low_ok = self.low is None or (
            value >= self.low if self.closed in ("both", "left") else value > self.low
        )
        high_ok = self.high is None or (
            value <= self.high if self.closed in ("both", "right") else value < self.high
        )
        return bool(low_ok and high_ok)

    def describe(self) -> str:
        if self.name:
            return self.name
        name = "an int" if self.kind is int else ("a finite number" if self.finite else "a number")
        if (
            self.high is None
            and self.low in (0, 1)
            and (self.kind is int) == (self.low == 1)
            and self.closed in (("both", "left") if self.low == 1 else ("neither", "right"))
        ):
            kind = "int" if self.kind is int else ("finite number" if self.finite else "number")
            return f"a positive {kind}"
        parts = []
        if self.low is not None:
            parts.append(f">= {self.low}" if self.closed in ("both", "left") else f"> {self.low}")
        if self.high is not None:
            parts.append(
                f"<= {self.high}" if self.closed in ("both", "right") else f"< {self.high}"
            )
        return f"{name} {' and '.join(parts)}" if parts else name


class Options(Rule):
    """One of ``values`` (compared with ``==``); ``name`` says it in words of its own."""

    def __init__(self, values: Iterable, name: str | None = None):
        self.values, self.name = tuple(values), name

    def accepts(self, value: Any) -> bool:
        try:
            return any(value == option and type(value) is type(option) for option in self.values)
        except Exception:  # a value whose == raises (an array) is no option
            return False

    def describe(self) -> str:
        return self.name or f"one of {', '.join(map(repr, self.values))}"


class InstanceOf(Rule):
    """An instance of ``kind``: a class, or ``"module.Class"`` imported when first checked.

    ``name`` is how the message calls it (the class's dotted name by default).
    """

    def __init__(self, kind: type | str, name: str | None = None):
        self.kind, self.name = kind, name

    def _class(self) -> type:
        kind = self.kind
        if isinstance(kind, str):
            module, _, attr = kind.rpartition(".")
            kind = self.kind = getattr(importlib.import_module(module), attr)
        return kind

    def accepts(self, value: Any) -> bool:
        return isinstance(value, self._class())

    def describe(self) -> str:
        if self.name:
            return self.name
        kind = (
            self.kind
            if isinstance(self.kind, str)
            else f"{self.kind.__module__}.{self.kind.__qualname__}"
        )
        return f"a {kind.replace('builtins.', '')}"


class Callable(Rule):
    """Something callable."""

    def accepts(self, value: Any) -> bool:
        return callable(value)

    def describe(self) -> str:
        return "a callable"


class HasMethods(Rule):
    """An object with the methods ``names`` (say a result container's ``add_result``).

    A class is refused: its methods are there, unbound, and the mistake of passing
    ``lk.OrderedResultContainer`` for ``lk.OrderedResultContainer()`` would surface
    only when the first method is called.
    """

    def __init__(self, names: Iterable[str], name: str | None = None):
        self.names, self.name = tuple(names), name

    def accepts(self, value: Any) -> bool:
        if isinstance(value, type):
            return False
        return all(callable(getattr(value, method, None)) for method in self.names)

    def describe(self) -> str:
        return self.name or f"an object with {', '.join(self.names)}"


class Satisfies(Rule):
    """A value for which ``test(value)`` is true; ``description`` says what that means."""

    def __init__(self, test: CallableType[[Any], bool], description: str):
        self.test, self.description = test, description

    def accepts(self, value: Any) -> bool:
        try:
            return bool(self.test(value))
        except Exception:  # a test that cannot judge the value refuses it
            return False

    def describe(self) -> str:
        return self.description


#: The most common rule: a count or a size (``bool`` is not one).
POSITIVE_INT = Interval(int, 1)
#: An index, a seed, a number of retries: 0 allowed.
NON_NEGATIVE_INT = Interval(int, 0)
#: A real amount (a rate, a learning rate, a tolerance): NaN and infinities refused.
FINITE_NUMBER = Interval(float, finite=True)
#: A real amount above zero.
POSITIVE_NUMBER = Interval(float, 0, closed="neither", finite=True)
#: A chance or a share of a whole, 0 and 1 included.
PROBABILITY = Interval(float, 0, 1)
#: A part of a whole, neither nothing nor all of it (a test share, a variance kept).
FRACTION = Interval(float, 0, 1, closed="neither")
#: How long to wait: seconds, 0 or more (``inf``: no limit); ``None`` beside it for "no limit".
SECONDS = Interval(float, 0, name="a number of seconds >= 0")


def one_of(*values: Any, name: str | None = None) -> Options:
    """The rule "one of ``values``": ``one_of("auto", "threads")``."""
    return Options(values, name)


def describe(rules: list) -> str:
    """``rules`` in words, as "must be" continues: ``"a positive int or None"``."""
    words = [rule.describe() for rule in rules if rule is not None]
    if None in rules:
        words.append("None")
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def check_argument(name: str, value: Any, rules: list, what: str = "", **where) -> Any:
    """``value`` if it keeps one of ``rules``, else an ``InputError`` naming ``name``.

    ``what`` names the caller for the message ("FunctionCallable: ..."),
    and ``where`` adds to the error's location.
    """
    if value is None and None in rules:
        return value
    if any(rule is not None and rule.accepts(value) for rule in rules):
        return value
    prefix = f"{what}: " if what else ""
    shown = f"{value!r}"
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    raise InputError(
        f"{prefix}{name} must be {describe(rules)}; got {shown} ({type(value).__name__})",
        argument=name,
        **where,
    )


def check_parameters(owner: Any, values: Mapping[str, Any], what: str = "") -> None:
    """Check what ``owner.parameter_constraints`` declares, taking each value from ``values``.

    For a constructor, ``check_parameters(self, dict(a=a, b=b))`` first thing, with
    the rules a class attribute beside the signature.
    """
    rules = owner.parameter_constraints
    check_arguments(rules, what, **{name: values[name] for name in rules})


def check_arguments(constraints: Mapping[str, list], what: str = "", /, **arguments) -> None:
    """Check each of ``arguments`` against its rules in ``constraints`` (see the module).

    An argument without rules is a programming error (``KeyError``): every
    argument checked is declared.
    """
    for name, value in arguments.items():
        check_argument(name, value, constraints[name], what)
