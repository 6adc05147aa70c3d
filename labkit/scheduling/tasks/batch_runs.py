"""Your own batches as runs: a name, a total when known, and an end when they are done.

A flow, a fit or an ensemble announces its runs itself.  Tasks a user adds
(``s.add_task``, ``s.batch(...)``) belonged to no run: a board showed them as
an anonymous ``task 6/?`` that stayed "running" after the batch ended.  Each
*cycle* of such a batch (from its first task after results were handed over,
until ``get_results`` hands them over, an error is raised or the batch is
closed) is now a run of kind ``"tasks"``: ``RunStarted`` names it (the
batch's ``name``, ``add_task`` for a thread's default batch) and its
``total`` when the owner said it, and ``RunFinished`` ends it, finished,
failed or cancelled.

Examples
--------
>>> import labkit as lk
>>> seen = []
>>> with lk.LocalScheduler() as s:
...     _ = s.subscribe(lambda e: seen.append(type(e).__name__))
...     with s.batch(name="squares", total=2) as b:
...         _ = b.add_task(2, lambda v: v * v); _ = b.add_task(3, lambda v: v * v)
...         b.get_results()
[4, 9]
>>> seen[0], seen[-1]
('RunStarted', 'RunFinished')
"""

from __future__ import annotations

import uuid
from typing import Any

from ...errors import CancelledError
from ...events import RunFinished, RunStarted

__all__ = ["BatchRun"]


class BatchRun:
    """The run events of one user batch's cycles, sent through its scheduler."""

    def __init__(self, scheduler, name: str, total: int | None = None):
        self.scheduler, self.name, self.total = scheduler, name, total
        self.current: str | None = None  # the run id of the cycle under way

    def opening(self) -> str | None:
        """A task opens: a new cycle (a new run) starts if none is under way; its id if so."""
        if self.current is not None:
            return None
        self.current = f"tasks-{uuid.uuid4().hex[:8]}"
        detail: dict[str, Any] = {"name": self.name}
        if self.total is not None:
            detail["total"] = self.total
        self.scheduler.emit(RunStarted(self.current, "tasks", 1, detail=detail))
        return self.current

    def ended(self, error: BaseException | None = None) -> None:
        """The cycle ended: its results were handed over, or ``error`` was raised."""
        run, self.current = self.current, None
        if run is None:
            return
        cancelled = isinstance(error, CancelledError)
        self.scheduler.emit(
            RunFinished(
                run,
                ok=error is None,
                error=None if error is None else str(error),
                cancelled=cancelled,
            )
        )
