"""The tracker of a step-wise program: its changes in, a frozen :class:`ProgramSnapshot` out.

The runner panel (:mod:`labkit.views.notebook.runner`) draws these snapshots; the
program only tells the tracker that something changed (any event, or
:meth:`ProgramTracker.changed`), and the snapshot reads the program's public
state: steps, status, the element being run (as code), the registers and
the error.  No UI library is imported here.

Examples
--------
>>> class Program:
...     steps, status, running, done, error, element = 0, None, False, False, None, "Seq()"
...     class registers:
...         values = {"x": 1}
>>> tracker = ProgramTracker(Program())
>>> tracker.changed()
>>> snap = tracker.snapshot()
>>> snap.version, snap.status, snap.where, snap.registers
(1, 'not started', 'Seq()', (('x', '1'),))
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["ProgramTracker", "ProgramSnapshot", "status_word", "REPR_CHARS"]

#: Characters of a register's repr shown.
REPR_CHARS = 80


@dataclass(frozen=True)
class ProgramSnapshot:
    """What the panel shows, taken at one moment."""

    version: int
    steps: int
    status: str
    running: bool
    where: str
    registers: tuple
    error: str | None


class ProgramTracker:
    """Counts the program's changes and takes :class:`ProgramSnapshot` snapshots."""

    def __init__(self, program):
        self.program, self.version = program, 0
        self._lock = threading.Lock()

    def __call__(self, _event=None) -> None:
        with self._lock:
            self.version += 1

    changed = __call__

    def snapshot(self) -> ProgramSnapshot:
        p, version = self.program, self.version
        where = str(p.current()) if p.status is not None else str(p.element)
        values = dict(p.registers.values)  # a copy: the kernel thread may write meanwhile
        regs = tuple((k, repr(v)[:REPR_CHARS]) for k, v in values.items())
        error = p.error
        return ProgramSnapshot(
            version,
            p.steps,
            status_word(p),
            p.running,
            where,
            regs,
            None if error is None else f"{type(error).__name__}: {error}",
        )


def status_word(program) -> str:
    """The program's state in the words every labkit view uses."""
    if program.error is not None:
        return "failed"
    if program.done:
        return "finished"
    if program.running:
        return "running"
    return "not started" if program.status is None else "paused"
