"""Running the replicas side by side: one call a device, on persistent threads.

The first call runs on the caller's thread (a one-device trainer starts no
thread at all); the others on a pool made once per trainer.  Grad mode and
autocast are settings of a thread, so each call runs under the caller's (as
torch's own ``parallel_apply`` does): under ``torch.no_grad()`` or
``torch.autocast(...)`` every replica computes alike.  Each call's exception
is kept with the replica and device it came from and re-raised in the caller
as a labkit error naming both.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from ...errors import LabkitError, TrainingError, located

__all__ = ["ReplicaThreads", "replica_error", "thread_modes"]

#: Device types whose autocast state a replica thread takes from its caller.
_AUTOCAST_DEVICES = ("cpu", "cuda")


def thread_modes() -> Callable[[], contextlib.AbstractContextManager]:
    """The calling thread's grad mode and autocast, as a context to enter in another thread.

    Examples
    --------
    >>> with torch.no_grad():
    ...     modes = thread_modes()
    >>> with modes():
    ...     torch.is_grad_enabled()
    False
    """
    grad = torch.is_grad_enabled()
    casts = [
        (d, torch.get_autocast_dtype(d)) for d in _AUTOCAST_DEVICES if torch.is_autocast_enabled(d)
    ]

    @contextlib.contextmanager
    def modes():
        with contextlib.ExitStack() as stack:
            stack.enter_context(torch.set_grad_enabled(grad))
            for device, dtype in casts:
                stack.enter_context(torch.autocast(device, dtype=dtype))
            yield

    return modes


def replica_error(exc: BaseException, replica: int, device: str) -> LabkitError:
    """``exc`` as a labkit error located at ``replica`` and ``device``."""
    return located(exc, f"replica {replica}", replica=replica, device=device)


class ReplicaThreads:
    """Persistent threads that run one call a replica and wait for them all."""

    def __init__(self, names: list[str]):
        self.names = names
        self._pool = (
            ThreadPoolExecutor(len(names) - 1, thread_name_prefix="labkit-replica")
            if len(names) > 1
            else None
        )
        self.closed = False

    def run(self, calls: list[tuple[int, Callable[[], Any]]]) -> list[Any]:
        """Run ``[(replica, fn), ...]`` in parallel; results in order, or raise the first error.

        Every call finishes before this returns or raises, so no replica is
        still computing when the caller moves on.
        """
        if self.closed:  # never run a step on some replicas only
            raise TrainingError("the replica threads were ended (the trainer or its scheduler)")
        modes = thread_modes()
        futures = (
            [(i, self._pool.submit(_under, modes, fn)) for i, fn in calls[1:]] if self._pool else []
        )
        outcomes: list[tuple[int, Any, BaseException | None]] = []
        first, fn = calls[0]
        try:
            outcomes.append((first, fn(), None))
        except Exception as exc:
            outcomes.append((first, None, exc))
        for i, future in futures:
            try:
                outcomes.append((i, future.result(), None))
            except Exception as exc:
                outcomes.append((i, None, exc))
        for i, _, error in outcomes:
            if error is not None:
                raise replica_error(error, i, self.names[i]) from error
        return [value for _, value, _ in outcomes]

    def close(self) -> None:
        """End the threads; idempotent."""
        self.closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def _under(modes, fn):
    """``fn()`` in a replica thread, under the caller's grad mode and autocast."""
    with modes():
        return fn()
