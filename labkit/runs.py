"""Runs: work that takes time, bracketed by one scope, handed back as a small future.

Everything in labkit that takes time (training and executing flows, a
trainer's ``fit``, ensemble fits and evaluations, programs) runs inside
:func:`run_scope`: it mints the run's id, emits ``RunStarted`` and
``RunFinished`` to the run's event sources, and holds the
:class:`RunControl` through which the run is cancelled.  :func:`start` runs a
job in such a scope, here (``wait=True``, the job's result is returned) or in
a thread of its own (``wait=False``, a :class:`Run` is returned at once).

A run owns its tasks: the batches it opens on a scheduler attach to its
control, so :meth:`Run.cancel` cancels exactly its tasks, and a run whose
tasks did not all complete raises (``CancelledError``, ``SchedulerError``,
``TaskError``); it never returns as if complete.

Examples
--------
>>> run = start("demo", [], lambda scope: scope.id.startswith("demo-"), wait=False)
>>> run.result(timeout=5), run.status
(True, 'finished')
>>> import asyncio
>>> async def notebook_cell():
...     return await start("demo", [], lambda scope: 42, wait=False)
>>> asyncio.run(notebook_cell())
42
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .constraints import SECONDS, check_argument
from .errors import CancelledError, LabkitError, for_caller, require_callable
from .events import Observable, RunFinished, RunStarted, run_of

__all__ = ["Run", "RunControl", "RunScope", "run_scope", "start", "new_run_id"]

logger = logging.getLogger("labkit.events")


def new_run_id(kind: str) -> str:
    """A fresh run id such as ``train-1a2b3c4d``."""
    return f"{kind}-{uuid.uuid4().hex[:8]}"


def _distinct(sources: Iterable[Any]) -> list[Any]:
    """``sources`` without ``None`` and repeats, in order."""
    out: list[Any] = []
    for s in sources:
        if s is not None and not any(s is o for o in out):
            out.append(s)
    return out


class RunControl:
    """Cancels a run from any thread: a flag the engine checks, and the batches it cancels.

    Batches opened for the run attach themselves (``scheduler.batch(control=...)``);
    :meth:`cancel` cancels each of them, so their owner raises ``CancelledError``
    at once, wherever it waits.
    """

    def __init__(self):
        self._cancelled = threading.Event()
        self._lock = threading.Lock()
        self._batches: list = []

    def attach(self, batch) -> None:
        """Cancel ``batch`` with the run (at once if the run is cancelled already)."""
        with self._lock:
            if not self._cancelled.is_set():
                self._batches.append(batch)
                return
        batch.cancel(_cancelled_error())

    def detach(self, batch) -> None:
        """``batch`` closed: the run no longer cancels it."""
        with self._lock:
            self._batches = [b for b in self._batches if b is not batch]

    def cancel(self) -> None:
        """Cancel the run: its open batches now, its next step when it checks."""
        with self._lock:
            self._cancelled.set()
            batches, self._batches = self._batches, []
        for batch in batches:
            batch.cancel(_cancelled_error())

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._cancelled.is_set()

    def check(self) -> None:
        """Raise ``CancelledError`` if the run was cancelled."""
        if self._cancelled.is_set():
            raise _cancelled_error()


def _cancelled_error() -> CancelledError:
    return CancelledError("the run was cancelled")


@dataclass
class RunScope:
    """What a job sees of its run: the id, the control and the event sources."""

    id: str
    kind: str
    control: RunControl
    sources: list = field(default_factory=list)

    def emit(self, event) -> None:
        """Send ``event`` to every source that has subscribers (an unwatched run sends nothing)."""
        for source in self.sources:
            if source.has_subscribers:
                source.emit(event)

    def check(self) -> None:
        """Raise ``CancelledError`` if the run was cancelled."""
        self.control.check()


@contextlib.contextmanager
def run_scope(
    kind: str,
    sources=(),
    n_nodes: int = 1,
    control: RunControl | None = None,
    run_id: str | None = None,
    detail: dict | None = None,
):
    """Bracket a run: mint its id, emit ``RunStarted`` now and ``RunFinished`` at the end.

    A run reports success only when its job returned, that is when all of its
    work was done: a cancel that arrives after the last task is too late
    (as with ``concurrent.futures``) and the run finishes with its complete result.

    Parameters
    ----------
    kind : str
        ``"train"``, ``"execute"``, ``"fit"``, ``"evaluate"``, ``"program"``...
    sources : iterable
        Where the run's events go (schedulers, a trainer); ``None`` entries are skipped.
    n_nodes : int
        How many nodes (layers, models) the run has, for the views.
    control : RunControl, optional
        The run's control (a :class:`Run` passes its own).
    run_id : str, optional
        The id; minted from ``kind`` by default.
    detail : dict, optional
        What views say of the run (``RunStarted.detail``): its ``name``, a fit's
        ``epochs``, an estimator's ``params``...

    Examples
    --------
    >>> from labkit.events import Observable
    >>> seen, source = [], Observable()
    >>> _ = source.subscribe(lambda event: seen.append(type(event).__name__))
    >>> with run_scope("train", [source]) as scope:
    ...     scope.id.startswith("train-")
    True
    >>> seen
    ['RunStarted', 'RunFinished']
    """
    scope = RunScope(run_id or new_run_id(kind), kind, control or RunControl(), _distinct(sources))
    scope.emit(RunStarted(scope.id, kind, n_nodes, detail=dict(detail or {})))
    try:
        yield scope
    except BaseException as err:
        cancelled = isinstance(err, CancelledError) or scope.control.cancelled
        scope.emit(RunFinished(scope.id, ok=False, error=str(err), cancelled=cancelled))
        raise
    scope.emit(RunFinished(scope.id, ok=True))


def start(
    kind: str,
    sources,
    job: Callable[[RunScope], Any],
    *,
    wait: bool = True,
    n_nodes: int = 1,
    detail: dict | None = None,
):
    """Run ``job(scope)`` in a :func:`run_scope`; here, or in a thread as a :class:`Run`.

    With ``wait=True`` the job's result is returned (its error raised); with
    ``wait=False`` a :class:`Run` is returned at once.
    """
    __tracebackhide__ = True  # IPython leaves this frame out of tracebacks
    if wait:
        try:
            with run_scope(kind, sources, n_nodes, detail=detail) as scope:
                return job(scope)
        except LabkitError as err:
            raise for_caller(err) from err.__cause__
    return Run(kind, sources, job, n_nodes=n_nodes, detail=detail)


class Run(Observable):
    """Work going on in a thread of the client: a small future, awaitable in a notebook.

    ``result()`` waits and re-raises the run's error in the caller, ``cancel()``
    cancels the run's own tasks (the node in training goes back to how it was
    before its phase), ``await run`` waits without blocking the kernel, and
    :meth:`subscribe` replays the run's events so far before the live ones.

    Parameters
    ----------
    kind : str
        What runs (``"train"``, ``"execute"``, ``"fit"``...).
    sources : list
        Where the run's events are emitted (schedulers, a trainer).
    job : callable
        ``job(scope)`` does the work and returns the result.
    n_nodes : int
        For the views (``RunStarted.n_nodes``).
    """

    max_history = 200_000  # events kept for late subscribers

    def __init__(
        self,
        kind: str,
        sources,
        job: Callable[[RunScope], Any],
        n_nodes: int = 1,
        detail: dict | None = None,
    ):
        self.kind, self.id = kind, new_run_id(kind)
        self.detail = dict(detail or {})
        self.sources = _distinct(sources)
        self.control = RunControl()
        self._done = threading.Event()
        self._result: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Run], Any]] = []
        self._callbacks_lock = threading.Lock()
        # The run's events are kept from the start, so a view that subscribes after
        # the run began (a board shown by the cell) still sees all of it.
        self._history: list = []
        self._events_lock = threading.RLock()
        self._unsubscribers = [
            s.subscribe(self._on_event, state_every=lambda: self.state_every) for s in self.sources
        ]
        self._thread = threading.Thread(
            target=self._main, args=(job, n_nodes), daemon=True, name=f"labkit-{self.id}"
        )
        self._thread.start()

    @property
    def schedulers(self) -> list:
        """The run's event sources that are schedulers (for views)."""
        return [s for s in self.sources if hasattr(s, "add_task")]

    def _main(self, job, n_nodes) -> None:
        try:
            with run_scope(
                self.kind, self.sources, n_nodes, self.control, self.id, self.detail
            ) as scope:
                self._result = job(scope)
        except BaseException as err:  # handed to whoever asks for the result
            self._error = err
        finally:
            for unsubscribe in self._unsubscribers:
                unsubscribe()
            self._done.set()
            self._call_back()

    def _on_event(self, event) -> None:
        """Keep and forward this run's events (and run-less ones, e.g. device stats)."""
        run = run_of(event)
        if run is not None and run != self.id:
            return
        with self._events_lock:
            if run is not None and len(self._history) < self.max_history:
                self._history.append(event)
            self.emit(event)

    # -- the future --------------------------------------------------------------------

    def done(self) -> bool:
        """Whether the run has ended (finished, failed or cancelled)."""
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the end; returns whether it ended within ``timeout``."""
        return self._done.wait(_seconds(timeout, "run.wait"))

    def result(self, timeout: float | None = None):
        """Wait for the run and return its result, or raise its error here."""
        __tracebackhide__ = True
        if not self._done.wait(_seconds(timeout, "run.result")):
            raise TimeoutError(f"run {self.id} still going after {timeout} s")
        if self._error is not None:
            raise for_caller(self._error) from self._error.__cause__
        return self._result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """Wait for the run and return its error, or None."""
        if not self._done.wait(_seconds(timeout, "run.exception")):
            raise TimeoutError(f"run {self.id} still going after {timeout} s")
        return self._error

    def cancel(self) -> bool:
        """Cancel the run's tasks; it then raises ``CancelledError``.

        Returns False when the run had already ended.  A cancel that comes
        after the run's last task finished is too late: the run then finishes
        with its complete result (:meth:`cancelled` tells which it was).
        """
        if self.done():
            return False
        self.control.cancel()
        return True

    def cancelled(self) -> bool:
        """Whether the run ended by being cancelled."""
        return self.done() and isinstance(self._error, CancelledError)

    def add_done_callback(self, fn: Callable[[Run], Any]) -> None:
        """Call ``fn(run)`` when the run ends (at once if it has); errors are logged."""
        require_callable(fn, "fn", "run.add_done_callback")
        with self._callbacks_lock:
            if not self._done.is_set():
                self._callbacks.append(fn)
                return
        _call(fn, self)

    def _call_back(self) -> None:
        with self._callbacks_lock:
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            _call(fn, self)

    def __await__(self):
        """``await run`` in a notebook: the kernel stays free while the run goes on."""
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()

        def settle(_run: Run) -> None:
            loop.call_soon_threadsafe(_settle, waiter)

        self.add_done_callback(settle)
        yield from waiter.__await__()
        return self.result()

    # -- events --------------------------------------------------------------------------

    def subscribe(self, fn, state_every=None) -> Callable[[], None]:
        """Call ``fn(event)`` for each event of this run: first those so far, then live ones.

        Returns a function that unsubscribes.
        """
        with self._events_lock:  # no live event can slip in between the replay and the rest
            unsubscribe = super().subscribe(fn, state_every)  # checks fn first
            for event in self._history:  # failures logged as the live events' are
                self.events.deliver(fn, event)
            return unsubscribe

    @property
    def status(self) -> str:
        """``running``, ``cancelling``, ``finished``, ``failed`` or ``cancelled``."""
        if not self.done():
            return "cancelling" if self.control.cancelled else "running"
        if self._error is None:
            return "finished"
        return "cancelled" if isinstance(self._error, CancelledError) else "failed"

    def __repr__(self):
        return f"<labkit Run {self.kind} {self.id}: {self.status}>"


def _seconds(timeout: float | None, what: str) -> float | None:
    """``timeout`` for a wait: ``None`` (no limit) or seconds >= 0, else an InputError."""
    check_argument("timeout", timeout, [SECONDS, None], what)
    if timeout is None or timeout == math.inf:  # a lock cannot wait an infinite time
        return None
    return timeout


def _settle(waiter: asyncio.Future[None]) -> None:
    """Wake ``await run`` (once: the future may be done, cancelled with its task)."""
    if not waiter.done():
        waiter.set_result(None)


def _call(fn: Callable[[Run], Any], run: Run) -> None:
    """Call a done callback; its failure is logged, never raised into the run's thread."""
    try:
        fn(run)
    except Exception:
        logger.exception("labkit run callback %r failed", fn)
