"""Registers: named values shared by a program's elements, and references to them."""

from __future__ import annotations

from .status import ProgramError

__all__ = ["Registers", "Ref"]


class Registers:
    """Named values shared by a program's elements; ``reg("x")`` makes a reference."""

    def __init__(self, values=None):
        self.values = dict(values or {})
        self.written = set()

    def __call__(self, name: str) -> "Ref":
        """A reference to register ``name``, resolved when it is used."""
        return Ref(self, name)

    def __getitem__(self, name):
        try:
            return self.values[name]
        except KeyError:
            raise ProgramError(f"register {name!r} is not set "
                               f"(set: {sorted(self.values) or 'none'})") from None

    def __setitem__(self, name, value):
        self.values[name] = value
        self.written.add(name)

    def __contains__(self, name):
        return name in self.values

    def __repr__(self):
        return f"Registers({self.values!r})"


class Ref:
    """A reference to one register, resolved when the element using it runs."""

    def __init__(self, registers: Registers, name: str):
        self.registers, self.name = registers, name

    def get(self):
        """The register's current value."""
        return self.registers[self.name]

    def set(self, value):
        """Write the register."""
        self.registers[self.name] = value

    def __repr__(self):
        return f"reg({self.name!r})"


def _resolve(value):
    """``value``, or the register value when it is a reference."""
    return value.get() if isinstance(value, Ref) else value

