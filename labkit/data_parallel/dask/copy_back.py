"""The trained state copied back from the workers to the client's model after a call.

After each ``fit``, ``step`` or ``evaluate`` the trainer loads what the ranks
hold into the user's model and optimizer
(:mod:`labkit.data_parallel.calls.model_sync`).  That copy must cost little
beside the call: it is read from one rank only (all ranks hold the same
state), as tensors that Dask sends as frames (plain dicts of tensors, never
one pickle, see
:func:`~labkit.data_parallel.worker.lifecycle.state_view`), gathered straight
from that worker rather than through the scheduler (which would carry it
twice; where the client reaches the worker), and loaded into the model's own
tensors in place.  It never waits
without a bound: a lost worker, a cancel or a hang raises, naming the rank.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time

from ...errors import SchedulerError
from ...scheduling.dask.connect import cancel_futures
from ..worker import lifecycle as life
from .tasks import GRACE, client_error

__all__ = ["fetch_state"]

#: Seconds between two looks at rank 0's worker while its state is being read.
LOOK_EVERY = 0.5


def fetch_state(group, direct: bool = True) -> dict:
    """``{"model": ..., "optimizer": ...}`` as rank 0 of ``group`` holds it, as CPU tensors.

    ``direct``: gathered straight from the worker (where the client reaches it:
    on this machine, or a client made with ``direct_to_workers=True``), else
    through the scheduler, as Dask gathers by default across hosts.
    """
    __tracebackhide__ = True
    what = "model copy"
    with group.tasks.call(what):
        future = group.tasks.submit(0, life.state_view, group.gid)
        group.tasks.track([future])
        try:
            _await(group, future, what)
            # a bound on the gather too: the worker may die between the two, and a task
            # bound to a dead worker is never run again (the gather would wait forever)
            timer = threading.Timer(group.timeout + GRACE, cancel_futures, [group.client, [future]])
            timer.start()
            try:
                return group.client.gather(future, direct=direct)
            finally:
                timer.cancel()
        finally:
            group.tasks.settle([future])


def _await(group, future, what: str) -> None:
    """Until rank 0's ``future`` is done; a lost worker, a cancel or a hang raises."""
    __tracebackhide__ = True
    deadline = time.monotonic() + group.timeout + GRACE
    name = group.names[0]
    while not future.done():
        with contextlib.suppress(
            TimeoutError, asyncio.TimeoutError, concurrent.futures.CancelledError
        ):
            future.exception(timeout=LOOK_EVERY)
        group.tasks.check_batch(what)
        if future.done():
            break  # the common case: no need to ask the scheduler which workers live
        group.tasks.check_lost(what, False, [0], [name], group.alive())
        if time.monotonic() > deadline:
            raise SchedulerError(f"the {what} did not finish: a worker hangs", device=name)
    if future.status == "cancelled":
        group.tasks.check_lost(what, False, [0], [name], group.alive())
        raise SchedulerError(f"the {what} was cancelled", device=name)
    if future.status != "finished":
        raise client_error(future, 0, name)
