"""One open task's book-keeping, and what it asks of the batch that owns it.

:class:`OpenTask` is what every part of a scheduler hands around for a task
between its start and its outcome (the batch, the window, the routes, the
outcomes); :class:`TaskOwner` is the little it needs of its batch.  It sits
below them all, so none of them imports another for it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable

from ...events import TaskInfo
from .callables import TaskCallable

__all__ = ["OpenTask", "TaskOwner"]


@runtime_checkable
class TaskOwner(Protocol):
    """What an open task asks of its batch (:class:`~labkit.scheduling.Batch` is one)."""

    def is_open(self, entry: OpenTask) -> bool:
        """Whether ``entry`` still waits for its outcome."""
        ...

    def record(
        self,
        entry: OpenTask,
        outcome: Any = None,
        error: BaseException | None = None,
        announce: Any = None,
    ) -> tuple[bool, BaseException | None]:
        """Record ``entry``'s outcome exactly once: ``(recorded, its error or None)``."""
        ...

    def shipped_callable(self, entry: OpenTask) -> Any:
        """``entry``'s callable as shipped to the workers (shipped again if lost)."""
        ...


@dataclasses.dataclass(eq=False)
class OpenTask:
    """Book-keeping of one open task."""

    info: TaskInfo
    batch: TaskOwner
    callable: TaskCallable
    shipped: Any = None  # the callable as the backend shipped it
    nbytes: int = 0
    handle: Any = None  # the backend's handle, for cancelling
    data: Any = None  # kept by backends that may have to send the chunk again
    reference: Any = None  # the input handed by reference, held until the task is done
    route: Any = None  # the transport that carries it (see .transport)
    attempts: int = 1

    def is_open(self) -> bool:
        """Whether this task still waits for its outcome (not recorded, not cancelled)."""
        return self.batch.is_open(self)
