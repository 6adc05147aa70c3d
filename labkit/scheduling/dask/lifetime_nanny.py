"""The nanny of an embedded cluster whose workers restart at their lifetime's end: it
restarts a worker that Dask's own race at that end closes, rather than closing with it.

A worker whose lifetime ends retires itself: the scheduler removes it, then the worker
closes, and its nanny (``lifetime_restart``) starts it again.  A heartbeat that crosses
the removal is answered "missing", and Dask's worker then closes for that reason *asking
its nanny to close as well* (``Worker.close(nanny=True)``, "Scheduler was unaware of this
worker; shutting down"): the nanny took the request, let its worker end, and closed, so a
cluster meant to keep its size lost a nanny (beside a second test run, at load 20-25, a
few retirements in sixty crossed a heartbeat).  This nanny declines that one request: its
worker still closes, the scheduler already forgot it, and the nanny, still running,
starts it again as at any lifetime's end.  Every other request to close is taken.
"""

from __future__ import annotations

import logging

from distributed import Nanny

__all__ = ["HEARTBEAT_MISSING", "LifetimeNanny"]

logger = logging.getLogger("labkit.scheduling")

#: The reason a Dask worker gives its nanny when a heartbeat was answered "missing".
HEARTBEAT_MISSING = "worker-heartbeat-missing"


class LifetimeNanny(Nanny):
    """A ``distributed.Nanny`` that restarts, rather than follows, a worker that closes
    because the scheduler no longer knew it (see the module's doc)."""

    def close_gracefully(self, reason: str = "nanny-close-gracefully") -> None:
        """Close when the worker ends, unless the worker closes for a heartbeat answered
        "missing": then restart it."""
        if reason == HEARTBEAT_MISSING:
            logger.info("labkit: the worker of nanny %s was forgotten; restarting it", self.name)
            return
        super().close_gracefully(reason=reason)
