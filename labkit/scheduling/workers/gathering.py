"""Messages a task sends from where it runs, gathered: sent together at most every so often.

A trial on a worker process (its reports on Dask's event stream) and a fit's
rank 0 (its step reports) both send many small messages; one message per
report would cost more than the report.  A :class:`Gathering` keeps them and
sends what it kept as one batch once ``every`` seconds have passed since the
last batch, and whenever it is flushed (a checkpoint, an epoch's end, the end).

>>> sent = []
>>> g = Gathering(lambda items, extra: sent.append((items, extra)), every=3600, first_at_once=True)
>>> g.add(1); g.add(2); g.add(3)
>>> g.flush(end=True); sent, g.sent
([([1], {}), ([2, 3], {'end': True})], 3)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

__all__ = ["Gathering"]


class Gathering:
    """Items kept and sent together by ``send(items, extra)``, at most once every ``every`` s.

    ``first_at_once``: the first item goes at once (a trial's first report is
    seen without delay); otherwise the first batch waits ``every`` seconds too.
    """

    def __init__(
        self,
        send: Callable[[list, dict], Any],
        every: float,
        first_at_once: bool = False,
    ):
        self._send, self.every = send, every
        self._pending: list = []
        self._last = -math.inf if first_at_once else time.monotonic()
        self.sent = 0  # items sent so far

    def add(self, item: Any) -> None:
        """Keep ``item``; send what is kept once ``every`` seconds have passed."""
        self._pending.append(item)
        if time.monotonic() - self._last >= self.every:
            self.flush()

    def flush(self, **extra: Any) -> None:
        """Send what is kept now, with ``extra`` fields (nothing to send, no extra: nothing)."""
        if not (self._pending or extra):
            return
        items, self._pending = self._pending, []
        self._last = time.monotonic()
        self.sent += len(items)
        self._send(items, extra)
