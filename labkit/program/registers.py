"""Registers: named values shared by a program's elements, and references to them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .copying import SelfChecking, check_picklable, copied
from .status import ProgramError

__all__ = ["Registers", "Ref", "resolve"]


class Registers(SelfChecking):
    """Named values shared by a program's elements; ``reg("x")`` makes a reference."""

    def __init__(self, values: Mapping[str, Any] | None = None):
        self.values: dict[str, Any] = dict(values or {})
        self.written: set[str] = set()

    def __call__(self, name: str) -> Ref:
        """A reference to register ``name``, resolved when it is used."""
        return Ref(self, name)

    def __getitem__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise ProgramError(
                f"register {name!r} is not set (set: {sorted(self.values) or 'none'})"
            ) from None

    def __setitem__(self, name: str, value: Any) -> None:
        self.values[name] = value
        self.written.add(name)

    def __contains__(self, name: object) -> bool:
        return name in self.values

    def __repr__(self) -> str:
        return f"Registers({self.values!r})"

    def __getstate__(self) -> dict[str, Any]:
        check_picklable(
            {f"register {name!r}": value for name, value in self.values.items()},
            lambda: ("Registers", {}, None),
        )
        return self.__dict__

    def __deepcopy__(self, memo: dict[int, Any]) -> Registers:
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        labels = {f"register {name!r}": name for name in self.values}
        values = copied(
            {label: self.values[name] for label, name in labels.items()},
            memo,
            lambda: ("Registers", {}, None),
        )
        new.values = {labels[label]: value for label, value in values.items()}
        new.written = set(self.written)
        return new


class Ref:
    """A reference to one register, resolved when the element using it runs."""

    def __init__(self, registers: Registers, name: str):
        self.registers, self.name = registers, name

    def get(self) -> Any:
        """The register's current value."""
        return self.registers[self.name]

    def set(self, value: Any) -> None:
        """Write the register."""
        self.registers[self.name] = value

    def __repr__(self) -> str:
        return f"reg({self.name!r})"


def resolve(value: Any) -> Any:
    """``value``, or the register value when it is a reference."""
    return value.get() if isinstance(value, Ref) else value
