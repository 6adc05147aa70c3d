"""The one call a trainer runs at a time: a second call is refused, naming the first."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from ...errors import TrainingError

__all__ = ["OneCall"]


class OneCall:
    """The one call a trainer runs at a time (a fit, evaluate, a step...); a second is refused.

    Two calls at once would send two runs' steps into one replica group: on Dask
    workers their collectives cross (a gloo timeout, a broken group), on threads
    their autograd graphs do.  So the second call is refused at once, naming the
    run that holds the trainer.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder: list | None = None  # [what, since], the same list is the token

    def enter(self, what: str) -> list:
        """Hold the trainer for ``what``; a token for :meth:`leave`; raises if it is held."""
        with self._lock:
            holder = self._holder
            if holder is not None:
                raise TrainingError(
                    f"this trainer is busy with {holder[0]} (for "
                    f"{time.monotonic() - holder[1]:.1f} s), so it cannot {what} now: a "
                    "trainer runs one call at a time; wait for that one (run.result()) or "
                    "cancel it (run.cancel()) first, or use a second trainer",
                    busy=holder[0],
                )
            token = self._holder = [what, time.monotonic()]
            return token

    def rename(self, token: list, what: str) -> None:
        """Name what holds the trainer better once known (a fit's run id)."""
        token[0] = what

    def leave(self, token: list) -> None:
        """Let go of the trainer, if ``token`` still holds it (idempotent)."""
        with self._lock:
            if self._holder is token:
                self._holder = None

    @contextlib.contextmanager
    def held(self, what: str) -> Iterator[None]:
        """Hold the trainer for the block's call."""
        token = self.enter(what)
        try:
            yield
        finally:
            self.leave(token)
