"""A trial's status: one spelling, used by the engine, the store, the events, the result and views.

:class:`Status` is a ``str`` enum (Optuna's ``TrialState`` is the model): a
status compares, hashes and prints as its word (``Status.COMPLETED ==
"completed"``) and prints as its word, so rows, stored columns and tables
hold plain words.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Status", "TERMINAL", "ENDED", "RANKED", "ORDER"]


class Status(str, Enum):
    """Where a trial is: waiting, running, or how it ended."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    STOPPED = "stopped"  # by the early-stopping rule, or by hand
    FAILED = "failed"
    CANCELLED = "cancelled"  # the sweep was cancelled under it: a resume runs it again

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:  # rows and counts print as they always did: plain words
        return repr(self.value)

    def __format__(self, spec: str) -> str:
        return self.value.__format__(spec)

    @property
    def ended(self) -> bool:
        """Whether the trial does not run again within this run of the sweep."""
        return self in ENDED

    @property
    def terminal(self) -> bool:
        """Whether the trial never runs again, resumed or not."""
        return self in TERMINAL


#: Statuses a trial does not leave (a resumed sweep runs none of them again).
TERMINAL = frozenset({Status.COMPLETED, Status.STOPPED, Status.FAILED})
#: Statuses a trial does not leave within one run ("cancelled" runs again when resumed).
ENDED = frozenset({*TERMINAL, Status.CANCELLED})
#: Statuses whose final value competes for a sweep's best.
RANKED = frozenset({Status.COMPLETED, Status.STOPPED})
#: Statuses in the order a board counts them.
ORDER = (
    Status.RUNNING,
    Status.PENDING,
    Status.COMPLETED,
    Status.STOPPED,
    Status.FAILED,
    Status.CANCELLED,
)
