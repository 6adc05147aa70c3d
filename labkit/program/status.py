"""Step statuses and the errors of programs."""

from __future__ import annotations

from ..errors import LabkitError

__all__ = ["ProgramError", "Break", "INCOMPLETE", "DONE", "BREAK"]


class ProgramError(LabkitError, RuntimeError):
    """A program was misused or failed while running (missing register, no branch, ...)."""


class Break(Exception):
    """Raised by a called function to end the innermost Loop/Repeat (like returning BREAK)."""


class _Status:
    """A step status; pickles and copies as the same module-level object."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name

    def __reduce__(self):
        return self.name


INCOMPLETE = _Status("INCOMPLETE")
DONE = _Status("DONE")
BREAK = _Status("BREAK")
