"""Step statuses and the errors of programs."""

from __future__ import annotations

from ..errors import LabkitError

__all__ = ["ProgramError", "Break", "Status", "INCOMPLETE", "DONE", "BREAK"]


class ProgramError(LabkitError, RuntimeError):
    """A program was misused or failed while running (missing register, no branch, ...)."""


class Break(Exception):
    """Raised by a called function to end the innermost Loop/Repeat (like returning BREAK)."""


class Status:
    """A step status (INCOMPLETE, DONE, BREAK); pickles and copies as the same object."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> str:
        return self.name


INCOMPLETE = Status("INCOMPLETE")
DONE = Status("DONE")
BREAK = Status("BREAK")
