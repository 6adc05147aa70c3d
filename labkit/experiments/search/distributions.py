"""One parameter's values: the distributions a space is made of, drawn and described as plain data.

:func:`loguniform`, :func:`uniform`, :func:`randint` and :func:`choice` make
them; :mod:`.space` puts them together.  A distribution keeps what is wrong
with its arguments (:attr:`Distribution.problem`) until the space, which
knows the parameter's name, raises it.
"""

from __future__ import annotations

import json
import math
import numbers
from typing import Any

import numpy as np

__all__ = ["Distribution", "loguniform", "uniform", "randint", "choice", "describe_value"]


class Distribution:
    """One parameter's values: drawn with ``sample(rng)``, described as plain data.

    ``problem`` says what is wrong with the arguments it was made with (``None``
    when nothing is); the space raises it naming the parameter.
    """

    kind = "distribution"
    problem: str | None = None

    def sample(self, rng: np.random.Generator):
        """One value drawn with ``rng``."""
        raise NotImplementedError

    def describe(self) -> dict:
        """The distribution as JSON-able data (stored with the sweep; a board draws its axis)."""
        raise NotImplementedError

    def values(self) -> list:
        """Values that must pickle (choices); none for numeric ranges."""
        return []

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is one this distribution draws (of its kind, within its bounds)."""
        raise NotImplementedError

    def __eq__(self, other):
        return type(other) is type(self) and other.describe() == self.describe()

    def __hash__(self):
        return hash(json.dumps(self.describe(), sort_keys=True))

    def __repr__(self):
        d = self.describe()
        args = ", ".join(f"{v!r}" for k, v in d.items() if k != "type")
        return f"lk.{d['type']}({args})"


def _range_problem(lo, hi, what: str, integer: bool = False) -> str | None:
    """What is wrong with the range ``lo, hi`` of ``what`` (``None``: nothing)."""
    for name, v in (("lo", lo), ("hi", hi)):
        if integer and (isinstance(v, bool) or not isinstance(v, numbers.Integral)):
            return f"{what} needs integers, got {name}={v!r}"
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            return f"{what} needs finite numbers, got {name}={v!r}"
        if not integer and not _finite_float(v):
            return f"{what} needs finite numbers a float holds, got {name}={v!r:.40}"
    if lo == hi:
        return f"{what} needs lo < hi, got the empty range lo={lo!r}, hi={hi!r}"
    if lo > hi:
        return f"{what} needs lo < hi, got the reversed range lo={lo!r}, hi={hi!r}"
    if integer and not (_INT64[0] <= lo and hi <= _INT64[1]):
        return (
            f"{what} needs bounds a 64-bit int holds (-2**63 <= lo < hi <= 2**63), "
            f"got lo={lo!r:.40}, hi={hi!r:.40}"
        )
    if not integer and not math.isfinite(float(hi) - float(lo)):
        return (
            f"{what} needs a range narrower than the largest float (hi - lo finite), "
            f"got lo={lo!r:.40}, hi={hi!r:.40}"
        )
    return None


def _finite_float(v) -> bool:
    """Whether ``v`` is a finite float (an int too large for one is not)."""
    try:
        return math.isfinite(float(v))
    except OverflowError:
        return False


#: The bounds numpy's ``integers`` draws between (``hi`` exclusive).
_INT64 = (-(2**63), 2**63)


def _within(value: Any, lo: Any, hi: Any) -> bool:
    """Whether ``value`` is a real number from ``lo`` to ``hi`` (a float's rounding allowed)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    slack = 1e-12 * max(abs(float(lo)), abs(float(hi)), 1.0)
    return bool(float(lo) - slack <= float(value) <= float(hi) + slack)


class _Uniform(Distribution):
    kind = "uniform"

    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi
        self.problem = _range_problem(lo, hi, "uniform(lo, hi)")

    def sample(self, rng):
        return float(rng.uniform(self.lo, self.hi))

    def contains(self, value):
        return _within(value, self.lo, self.hi)

    def describe(self):
        return {"type": "uniform", "lo": describe_value(self.lo), "hi": describe_value(self.hi)}


class _LogUniform(Distribution):
    kind = "loguniform"

    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi
        self.problem = _range_problem(lo, hi, "loguniform(lo, hi)")
        if self.problem is None and lo <= 0:
            self.problem = f"loguniform(lo, hi) needs 0 < lo (a log scale), got lo={lo!r}"

    def sample(self, rng):
        return float(math.exp(rng.uniform(math.log(self.lo), math.log(self.hi))))

    def contains(self, value):
        return _within(value, self.lo, self.hi)

    def describe(self):
        return {"type": "loguniform", "lo": describe_value(self.lo), "hi": describe_value(self.hi)}


class _RandInt(Distribution):
    kind = "randint"

    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi
        self.problem = _range_problem(lo, hi, "randint(lo, hi)", integer=True)

    def sample(self, rng):
        return int(rng.integers(self.lo, self.hi))

    def contains(self, value):  # hi excluded, as numpy's integers
        integral = isinstance(value, numbers.Integral) and not isinstance(value, bool)
        return bool(integral and self.lo <= value < self.hi)

    def describe(self):
        return {"type": "randint", "lo": describe_value(self.lo), "hi": describe_value(self.hi)}


class _Choice(Distribution):
    kind = "choice"

    def __init__(self, options):
        try:
            self.options = list(options)
        except TypeError:
            self.options = []
            self.problem = (
                f"choice(options) needs a list of options, got "
                f"{type(options).__name__} {options!r:.60}"
            )
            return
        if not self.options:
            self.problem = "choice(options) needs at least one option, got an empty list"

    def sample(self, rng):
        return self.options[int(rng.integers(len(self.options)))]

    def values(self):
        return self.options

    def contains(self, value):  # the same value: True is no 1, 1.0 no 1
        return any(o is value or (type(o) is type(value) and o == value) for o in self.options)

    def describe(self):
        return {"type": "choice", "values": [describe_value(v) for v in self.options]}


def loguniform(lo: float, hi: float) -> Distribution:
    """A float between ``lo`` and ``hi``, uniform on a log scale (learning rates); ``0 < lo < hi``."""
    return _LogUniform(lo, hi)


def uniform(lo: float, hi: float) -> Distribution:
    """A float uniform between ``lo`` and ``hi`` (``lo < hi``)."""
    return _Uniform(lo, hi)


def randint(lo: int, hi: int) -> Distribution:
    """An int from ``lo`` up to but not including ``hi``, as numpy's ``integers``."""
    return _RandInt(lo, hi)


def choice(options) -> Distribution:
    """One of ``options`` (any values that pickle), each equally likely."""
    return _Choice(options)


def describe_value(value) -> Any:
    """``value`` as JSON data where it is plain (numbers, strings, lists), else its repr."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value) if math.isfinite(value) else repr(float(value))
    if isinstance(value, (list, tuple)):
        return [describe_value(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: describe_value(v) for k, v in value.items()}
    return {"repr": repr(value)}
