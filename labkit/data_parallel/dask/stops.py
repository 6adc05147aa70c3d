"""Why a replica group's scheduler stopped it, kept: the reason a stopped trial's fit raises.

A sweep stops a group trial by cancelling the trial's scheduler with
``TrialStopped`` and then shutting it down.  The group's batch raises a
cancel's reason once (the first wait that looks at it), and the call may then
end through another wait that sees only the shutdown (a ``SchedulerError``):
:class:`RememberingBatch` keeps the reason, so that the call raises it
whichever wait ended it (see :func:`~labkit.data_parallel.calls.fit_loop.as_its_stop_said`).
"""

from __future__ import annotations

import contextlib
from typing import Any

from ...errors import CancelledError, LabkitError, SchedulerError

__all__ = ["RememberingBatch"]


class RememberingBatch:
    """The group's batch of its scheduler, remembering the reason its canceller gave.

    A plain cancel or shutdown (``CancelledError``, ``SchedulerError``) gives
    none; any other labkit error it raises is the reason.  Everything else is
    the batch's own.
    """

    def __init__(self, batch: Any):
        self.batch = batch
        #: the first reason the batch's cancel carried (a stopped trial's TrialStopped)
        self.reason: LabkitError | None = None

    def check(self) -> None:
        """The batch's check, its reason remembered."""
        try:
            self.batch.check()
        except (SchedulerError, CancelledError):
            raise
        except LabkitError as exc:
            self.reason = self.reason or exc
            raise

    def stop_reason(self) -> LabkitError | None:
        """The reason kept, once the batch's pending error (if any) was looked at."""
        with contextlib.suppress(LabkitError):
            self.check()
        return self.reason

    def track(self, handles) -> None:
        self.batch.track(handles)

    def untrack(self, handles) -> None:
        self.batch.untrack(handles)

    def close(self) -> None:
        self.batch.close()
