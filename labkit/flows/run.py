"""``Run``: the handle of a training or execute run going on in the background.

``flow.train(..., wait=False)`` returns a Run at once; the work goes on in a
thread of the client, so the notebook stays usable.  ``result()`` waits and
re-raises the run's error in the caller; ``cancel()`` cancels the open tasks
and leaves the node being trained as it was before its phase.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from ..errors import CancelledError
from ..events import EventBus

__all__ = ["Run", "RunControl"]

logger = logging.getLogger("labkit.events")


class RunControl:
    """Lets a run be cancelled from another thread; the engine checks it between tasks."""

    def __init__(self):
        self._cancelled = threading.Event()
        self.scheduler = None  # the scheduler whose tasks are open now

    def cancel(self) -> None:
        self._cancelled.set()
        scheduler = self.scheduler
        if scheduler is not None:
            scheduler.cancel()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def check(self) -> None:
        """Raise CancelledError if the run was cancelled."""
        if self._cancelled.is_set():
            raise CancelledError("the run was cancelled")


def _run_of(event) -> str | None:
    """The run an event belongs to, if any."""
    run = getattr(event, "run", None)
    if run is None and hasattr(event, "info"):
        run = event.info.run
    return run


class Run:
    """A run in the background; a small future.

    Parameters
    ----------
    kind : str
        ``"train"`` or ``"execute"``.
    run_id : str
        The id its events carry.
    schedulers : list
        The schedulers the run uses (for ``subscribe`` and views).
    job : callable
        ``job(control)`` does the work and returns the result.
    """

    max_history = 200_000  # events kept for late subscribers

    def __init__(self, kind: str, run_id: str, schedulers: list, job: Callable[[RunControl], Any]):
        self.kind, self.id = kind, run_id
        self.schedulers = [s for i, s in enumerate(schedulers)
                           if s is not None and s not in schedulers[:i]]
        self._control = RunControl()
        self._done = threading.Event()
        self._result: Any = None
        self._error: BaseException | None = None
        # The run's events are kept from the start, so a view that subscribes after
        # the run began (a board shown by the cell) still sees all of it.
        self._history: list = []
        self._bus = EventBus()
        self._events_lock = threading.RLock()
        self._unsubscribers = [s.subscribe(self._on_event) for s in self.schedulers]
        self._thread = threading.Thread(target=self._main, args=(job,), daemon=True,
                                        name=f"labkit-{kind}-{run_id}")
        self._thread.start()

    def _main(self, job) -> None:
        try:
            self._result = job(self._control)
        except BaseException as err:  # handed to whoever asks for the result
            self._error = err
        finally:
            for unsubscribe in self._unsubscribers:
                unsubscribe()
            self._done.set()

    def _on_event(self, event) -> None:
        """Keep and forward this run's events (and run-less ones, e.g. device stats)."""
        run = _run_of(event)
        if run is not None and run != self.id:
            return
        with self._events_lock:
            if run is not None and len(self._history) < self.max_history:
                self._history.append(event)
            self._bus.emit(event)

    def done(self) -> bool:
        """Whether the run has ended (finished, failed or cancelled)."""
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the end; returns whether it ended within ``timeout``."""
        return self._done.wait(timeout)

    def result(self, timeout: float | None = None):
        """Wait for the run and return its result, or raise its error here."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"run {self.id} still going after {timeout} s")
        if self._error is not None:
            raise self._error
        return self._result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """Wait for the run and return its error, or None."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"run {self.id} still going after {timeout} s")
        return self._error

    def cancel(self) -> bool:
        """Cancel the open tasks; the node in training goes back to before its phase.

        Returns False when the run had already ended.
        """
        if self.done():
            return False
        self._control.cancel()
        return True

    def cancelled(self) -> bool:
        """Whether the run ended by being cancelled."""
        return self.done() and isinstance(self._error, CancelledError)

    def subscribe(self, fn) -> Callable[[], None]:
        """Call ``fn(event)`` for each event of this run: first those so far, then live ones.

        Returns a function that unsubscribes.
        """
        with self._events_lock:  # no live event can slip in between the replay and the rest
            for event in self._history:
                try:
                    fn(event)
                except Exception:
                    logger.exception("labkit run subscriber %r failed", fn)
            return self._bus.subscribe(fn)

    @property
    def status(self) -> str:
        if not self.done():
            return "cancelling" if self._control.cancelled else "running"
        if self._error is None:
            return "finished"
        return "cancelled" if isinstance(self._error, CancelledError) else "failed"

    def __repr__(self):
        return f"<labkit Run {self.kind} {self.id}: {self.status}>"
