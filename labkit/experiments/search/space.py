"""Search spaces: what each parameter may be, and the configurations drawn from them.

A space is a dict from parameter names to distributions (or constants), a
grid of every combination (:func:`grid`), or a list of configurations.  Each
trial ``i`` gets ``configuration(i)``: for a random space, a draw from a
generator seeded by ``(seed, i)`` alone, so the same seed gives the same
configurations in any order and a sweep extended later draws trial ``i`` as
it would have from the start; for a grid, its point ``i`` (the grid repeats,
random parts drawn anew, for more trials than points); for a list, its item ``i``.

Bad input is refused when the space is checked (by ``lk.sweep``, before any
trial runs), naming the parameter: an empty or reversed range, ``lo <= 0`` for
:func:`loguniform`, an empty :func:`choice`, a value that does not pickle.  A
distribution keeps what is wrong with it until then, since only the space
knows the parameter's name.

Examples
--------
>>> space = Space.of({"lr": loguniform(1e-4, 1e-1), "width": choice([64, 128]), "layers": 2})
>>> a, b = space.configuration(0, seed=0), space.configuration(0, seed=0)
>>> a == b, sorted(a), a["layers"]
(True, ['layers', 'lr', 'width'], 2)
>>> Space.of(grid(lr=[0.1, 0.01], width=[64, 128])).size
4
>>> Space.of({"dropout": uniform(0.5, 0.1)})
Traceback (most recent call last):
...
labkit.errors.InputError: parameter 'dropout': uniform(lo, hi) needs lo < hi, got the reversed range lo=0.5, hi=0.1 [argument dropout]
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...errors import InputError
from .distributions import Distribution, choice, describe_value, loguniform, randint, uniform

__all__ = [
    "Distribution",
    "loguniform",
    "uniform",
    "randint",
    "choice",
    "grid",
    "Grid",
    "Space",
    "describe_value",
]


class Grid:
    """Every combination of the listed values (:func:`grid`); other entries sampled or kept."""

    def __init__(self, axes: dict):
        if not isinstance(axes, dict) or not axes:
            raise InputError(
                "grid() needs parameters: grid(lr=[0.1, 0.01], width=[64, 128]) "
                "or grid({'lr': [...]})",
                argument="space",
            )
        self.axes: dict = {}
        self.rest: dict = {}
        for name, values in axes.items():
            _check_name(name)
            if isinstance(values, Distribution) or not isinstance(values, (list, tuple, range)):
                self.rest[name] = values  # sampled (a distribution) or kept (a constant)
                continue
            if not len(values):
                raise InputError(
                    f"grid() needs at least one value for each parameter, got none for {name!r}",
                    argument=name,
                )
            self.axes[name] = list(values)
        self.points = [
            dict(zip(self.axes, combo, strict=True))
            for combo in itertools.product(*self.axes.values())
        ] or [{}]

    def describe(self) -> dict:
        out = {
            name: {"type": "grid", "values": [describe_value(v) for v in values]}
            for name, values in self.axes.items()
        }
        out.update({name: _describe_entry(v) for name, v in self.rest.items()})
        return out


def grid(axes: dict | None = None, **more) -> Grid:
    """Every combination of the listed values: ``grid(lr=[0.1, 0.01], width=[64, 128])``.

    Entries that are not lists are distributions (drawn for each point) or constants.
    """
    if axes is not None and not isinstance(axes, dict):
        raise InputError(
            f"grid() takes a dict or keywords, got {type(axes).__name__}", argument="space"
        )
    return Grid({**(axes or {}), **more})


def _check_name(name) -> None:
    if not isinstance(name, str) or not name:
        raise InputError(
            f"parameter names must be non-empty strings, got {name!r}", argument="space"
        )


def _check_entries(entries: dict) -> None:
    """An InputError naming the first parameter whose name or distribution is bad."""
    for name, value in entries.items():
        _check_name(name)
        if isinstance(value, Grid) or value is grid or value is Grid:
            raise InputError(
                f"parameter {name!r}: lk.grid(...) is a whole space; inside a "
                "space give a grid axis as a list",
                argument=name,
            )
        if any(value is maker for maker in _MAKERS) or (
            isinstance(value, type) and issubclass(value, Distribution)
        ):
            shown = getattr(value, "__name__", repr(value)).lstrip("_").lower()
            raise InputError(
                f"parameter {name!r} is lk.{shown} itself, not a distribution: call it, "
                f"e.g. {{{name!r}: lk.{shown}(...)}}",
                argument=name,
            )
        problem = getattr(value, "problem", None) if isinstance(value, Distribution) else None
        if problem:
            raise InputError(f"parameter {name!r}: {problem}", argument=name)


#: The distributions' makers: given uncalled as a parameter's value, a mistake.
_MAKERS = (loguniform, uniform, randint, choice)


def _describe_entry(value) -> dict:
    if isinstance(value, Distribution):
        return value.describe()
    return {"type": "constant", "value": describe_value(value)}


class Space:
    """A checked space: ``configuration(i, seed)`` for trial ``i``; ``size`` for grids and lists.

    Make one with :meth:`Space.of` from what ``lk.sweep`` was given.
    """

    def __init__(
        self,
        kind: str,
        entries: dict | None = None,
        grid_: Grid | None = None,
        configs: list | None = None,
    ):
        self.kind, self.grid = kind, grid_
        self.entries: dict = entries if entries is not None else {}
        self.configs: list = configs if configs is not None else []

    @property
    def points(self) -> Grid:
        """The grid of a grid space (an error for the other kinds)."""
        if self.grid is None:
            raise TypeError(f"a {self.kind} space has no grid")
        return self.grid

    @classmethod
    def of(cls, space) -> Space:
        """``space`` (a dict, a :class:`Grid` or a list of dicts) checked, as a Space."""
        if isinstance(space, Space):
            return space
        if isinstance(space, Grid):
            _check_entries(space.rest)
            return cls("grid", grid_=space)
        if isinstance(space, dict):
            if not space:
                raise InputError(
                    "the space is empty: give parameters such as {'lr': lk.loguniform(1e-4, 1e-1)}",
                    argument="space",
                )
            _check_entries(space)
            return cls("random", entries=dict(space))
        if isinstance(space, (list, tuple)):
            if not space:
                raise InputError("the list of configurations is empty", argument="space")
            for i, config in enumerate(space):
                if not isinstance(config, dict):
                    raise InputError(
                        f"a list of configurations needs dicts, got {type(config).__name__} at {i}",
                        argument="space",
                    )
                for name in config:
                    _check_name(name)
            return cls("list", configs=[dict(c) for c in space])
        raise InputError(
            f"space must be a dict of parameters, lk.grid(...) or a list of "
            f"configurations, got {type(space).__name__} {space!r:.60}",
            argument="space",
        )

    @classmethod
    def from_description(cls, description: dict) -> Space:
        """The space a stored description describes, where its values are plain data."""
        if "list" in description and len(description) == 1:
            return cls.of(description["list"])
        axes = {n: e["values"] for n, e in description.items() if e.get("type") == "grid"}
        rest = {n: _from_entry(n, e) for n, e in description.items() if e.get("type") != "grid"}
        return cls.of(grid({**axes, **rest})) if axes else cls.of(rest)

    @property
    def size(self) -> int | None:
        """Configurations of a grid or list; ``None`` for a random space (endless)."""
        if self.kind == "grid":
            return len(self.points.points)
        if self.kind == "list":
            return len(self.configs)
        return None

    @property
    def random(self) -> bool:
        """Whether configurations are drawn (so the seed matters)."""
        entries = (
            self.entries
            if self.kind == "random"
            else (self.points.rest if self.kind == "grid" else {})
        )
        return any(isinstance(v, Distribution) for v in entries.values())

    def configuration(self, i: int, seed: int) -> dict:
        """Trial ``i``'s configuration: the same for the same ``(seed, i)``, always."""
        if self.kind == "list":
            return dict(self.configs[i])
        rng = np.random.default_rng([int(seed), int(i)])
        if self.kind == "grid":
            point = self.points.points[i % len(self.points.points)]
            return {**_draw(self.points.rest, rng), **point}
        return _draw(self.entries, rng)

    def describe(self) -> dict:
        """The space as JSON data: ``{parameter: {"type": ..., ...}}`` (lists: ``{"list": [...]}``)."""
        if self.kind == "grid":
            return self.points.describe()
        if self.kind == "list":
            return {"list": [describe_value(c) for c in self.configs]}
        return {name: _describe_entry(v) for name, v in self.entries.items()}

    def key(self) -> str:
        """The description as one canonical string (two spaces are the same when equal)."""
        return json.dumps({"kind": self.kind, "space": self.describe()}, sort_keys=True)

    def check_pickles(self) -> None:
        """An InputError naming the parameter of a value that does not pickle."""
        import cloudpickle

        for name, value in self._plain_values():
            try:
                cloudpickle.dumps(value)
            except Exception as exc:  # noqa: BLE001 - pickling fails in many ways
                raise InputError(
                    f"the value {value!r:.60} of parameter {name!r} cannot be "
                    f"pickled ({type(exc).__name__}: {exc}), so it cannot reach "
                    "a worker",
                    argument=name,
                ) from None

    def _plain_values(self) -> Iterator[tuple[str, Any]]:
        """``(parameter, value)`` of every value a configuration may hold besides numbers."""
        if self.kind == "list":
            for config in self.configs:
                yield from config.items()
            return
        entries = self.entries if self.kind == "random" else self.points.rest
        for name, value in entries.items():
            if isinstance(value, Distribution):
                yield from ((name, v) for v in value.values())
            else:
                yield name, value
        if self.kind == "grid":
            for name, values in self.points.axes.items():
                yield from ((name, v) for v in values)


def _draw(entries: dict, rng) -> dict:
    """A value for every entry: distributions drawn in name order, constants kept."""
    out = {}
    for name in sorted(entries):  # name order: a dict written in another order draws the same
        value = entries[name]
        out[name] = value.sample(rng) if isinstance(value, Distribution) else value
    return {name: out[name] for name in entries}


def _from_entry(name: str, entry: dict):
    """A distribution or constant from its description (plain values only)."""
    makers = {"uniform": uniform, "loguniform": loguniform, "randint": randint}
    kind = entry.get("type")
    if kind in makers:
        return makers[kind](entry["lo"], entry["hi"])
    values = entry.get("values", [entry.get("value")])
    if any(isinstance(v, dict) and set(v) == {"repr"} for v in values):
        raise InputError(
            f"parameter {name!r} holds values that are not plain data "
            f"({values!r:.80}); give the space again",
            argument="space",
        )
    if kind == "choice":
        return choice(values)
    if kind == "constant":
        return entry["value"]
    raise InputError(f"parameter {name!r}: unknown description {entry!r:.80}", argument="space")
