"""The Bokeh dashboard: a Bokeh server inside this process, one per scheduler.

:func:`dashboard` serves the app ``/labkit`` on 127.0.0.1
(:mod:`.bokeh_server`: a free port unless one is given, only its own
origins).  Every browser session gets its own document: the run picker
(:class:`~.run_panel.RunPanel`), the workers' load and the task stream
(:class:`~.components.Components`), and the sweeps (:mod:`.sweep_plots`: a
picker of every sweep the scheduler holds, those started before the
dashboard too, and the picked one's board).  They all draw one
:class:`~.tracker.Tracker` and one :class:`~.sweep_shelf.SweepShelf`
subscribed to the scheduler; a sweep's trials count as tasks of their
workers (:mod:`.trial_tasks`), and workers are named as the notebook's
board names them (:class:`~.device_names.DeviceNames`).  Each session sends
its changes at its own pace (:data:`~labkit.views.writer.MAX_RATE` a second
at most).  BokehJS comes from the server itself, so it works offline.

The server stops when the scheduler shuts down, or with :func:`stop_dashboard`;
no thread or port is left.
"""

from __future__ import annotations

import contextlib
import threading
import time

from bokeh.layouts import column

from ...constraints import Interval, Satisfies, check_argument
from ...errors import SchedulerError
from .. import writer
from ..fold_queue import FOLD_EVERY, FoldQueue
from ..live import LiveView
from ..trackers.cluster_sampler import ClusterSampler
from ..trackers.device_names import DeviceNames
from ..trackers.subjects import check_source, client_of
from ..trackers.sweep_shelf import SweepShelf
from ..trackers.tracker import Tracker
from .components import Components
from .run_panel import RunPanel
from .server import APP_PATH, BokehServer
from .sweep_pareto import check_reference
from .sweep_plots import attach as attach_sweeps
from .worker_count import WorkerCount

__all__ = ["dashboard", "running_url", "stop_dashboard", "APP_PATH", "ORIGIN_RULES", "PORT_RULES"]

_lock = threading.Lock()
_running: dict[int, _Dashboard] = {}  # id(scheduler) -> its server


def dashboard(
    scheduler, port: int = 0, allow_websocket_origin=None, title: str = "labkit", reference=None
) -> str:
    """Serve the live dashboard of ``scheduler``; returns its URL.

    Parameters
    ----------
    scheduler : Scheduler, Run or DataParallelTrainer
        Whose events to show; a :class:`~labkit.DaskScheduler`'s cluster (a
        run's or trainer's, if it has one) is also polled for worker memory
        and executing tasks.  The server stops when that scheduler shuts down
        (a trainer: when it is closed), or with :func:`stop_dashboard`.
    port : int
        Port on 127.0.0.1; 0 picks a free one.
    allow_websocket_origin : str or list of str, optional
        Further origins (``host[:port]``) whose pages may open the websocket,
        e.g. of an SSH tunnel or a reverse proxy.
    title : str
        The browser page's title.
    reference : sequence of float, optional
        The hypervolume reference point of a several-objective sweep's Pareto view, one
        value an objective (default: the worst seen plus a margin).

    Returns
    -------
    str
        The URL of the app; the same one when called again for this scheduler.
    """
    check_source(scheduler, "lk.dashboard")
    _check_port(port)
    origins = _origins(allow_websocket_origin)
    reference = check_reference(reference, "lk.dashboard")
    if getattr(scheduler, "closed", False):
        raise SchedulerError(
            "the scheduler is shut down; a dashboard would show nothing", argument="scheduler"
        )
    owners = _lifetime_owners(scheduler)
    _check_alive(scheduler, owners)
    with _lock:
        server = _running.get(id(scheduler))
        if server is not None:
            return server.url
        server = _Dashboard(scheduler, port, origins, title, reference)
        _running[id(scheduler)] = server
    try:
        for owner in owners:
            owner.on_shutdown(lambda: stop_dashboard(scheduler))
        _check_alive(scheduler, owners)  # one shut down meanwhile would never stop it
    except BaseException:  # nothing may keep listening after an error
        stop_dashboard(scheduler)
        raise
    return server.url


def _check_alive(source, owners: list) -> None:
    """A SchedulerError unless something alive will end the server (no server listens forever).

    A finished run whose schedulers have shut down (a sweep's own
    ``LocalScheduler``, say) has nothing left to show live and nothing
    that would stop its server.
    """
    alive = [o for o in owners if not getattr(o, "closed", False)]
    done = callable(getattr(source, "done", None)) and source.done()
    if not alive and (owners or done):
        raise SchedulerError(
            "the run has ended and its scheduler is shut down, so a dashboard would "
            "show nothing live and never stop; show the finished run with lk.board(run)",
            argument="scheduler",
        )


def _lifetime_owners(source) -> list:
    """What ends the dashboard of ``source``: itself, or a run's schedulers."""
    if callable(getattr(source, "on_shutdown", None)):
        return [source]
    return [
        s for s in getattr(source, "schedulers", []) if callable(getattr(s, "on_shutdown", None))
    ]


def _is_origins(value: object) -> bool:
    """Whether ``value`` is a ``host[:port]`` string or a list (or tuple) of them."""
    listed = [value] if isinstance(value, str) else value
    return isinstance(listed, (list, tuple)) and all(isinstance(o, str) and o for o in listed)


#: What ``allow_websocket_origin`` may be.
ORIGIN_RULES = [Satisfies(_is_origins, "a 'host[:port]' string or a list of them"), None]


def _origins(allowed: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """``allow_websocket_origin`` as a list of ``host[:port]`` strings, or an InputError."""
    check_argument("allow_websocket_origin", allowed, ORIGIN_RULES)
    if allowed is None:
        return []
    return [allowed] if isinstance(allowed, str) else list(allowed)


#: What ``port`` may be: 0 (any free port) or a TCP port number.
PORT_RULES = [Interval(int, 0, 65535, name="an int from 0 (any free port) to 65535")]


def _check_port(port: int) -> None:
    """An ``InputError`` unless ``port`` is 0 (a free one) or a TCP port number."""
    check_argument("port", port, PORT_RULES)


def running_url(scheduler) -> str | None:
    """The URL of the dashboard serving ``scheduler``, or ``None``."""
    server = _running.get(id(scheduler))
    return server.url if server is not None else None


def stop_dashboard(scheduler) -> bool:
    """Stop the dashboard of ``scheduler``; returns whether one was running."""
    with _lock:
        server = _running.pop(id(scheduler), None)
    if server is None:
        return False
    server.stop()
    return True


class _Fold:
    """What the dashboard's one subscription feeds: the tracker, and the sweeps' shelf.

    The events are folded off the engine's threads (:class:`~labkit.views.fold_queue.FoldQueue`):
    by a session about to draw (:meth:`drain`, or the sweeps' :meth:`refresh`), or
    when they waited too long.
    """

    def __init__(self, tracker: Tracker, shelf: SweepShelf, every=FOLD_EVERY):
        self.tracker, self.shelf = tracker, shelf
        self.queue = FoldQueue(self._fold, every=every)

    @property
    def version(self) -> int:
        return self.tracker.version

    def __call__(self, event) -> None:
        self.queue(event)

    def _fold(self, event) -> None:
        self.tracker(event)
        self.shelf(event)

    def drain(self) -> None:
        """Fold every event waiting."""
        self.queue.drain()

    def refresh(self) -> None:
        """The sweeps as a session reads them (:class:`~.sweep_shelf.Sweeps`): folded first."""
        self.queue.drain()
        self.shelf.refresh()

    def feeds(self) -> list:
        """Every sweep's tracker, oldest first."""
        return self.shelf.feeds()

    def snapshot(self):
        self.queue.drain()
        return self.tracker.snapshot()

    def source_ended(self) -> None:
        self.queue.drain()
        self.tracker.source_ended()


class _Dashboard:
    """The dashboard of one scheduler: one tracker and shelf, a document a browser session."""

    def __init__(self, scheduler, port: int, origins: list[str], title: str, reference=None):
        self.title, self.reference = title, reference
        # The scheduler's events feed one tracker and one shelf of sweeps through the
        # live-view base (subscribed with the views' state pace, unsubscribed once); each
        # session draws them at its own pace on the server's loop, where Bokeh documents
        # may be changed.
        self.tracker = Tracker()
        self.shelf = SweepShelf(scheduler, sink=self.tracker)
        self.fold = _Fold(self.tracker, self.shelf)  # events folded off the engine's threads
        self.feed = LiveView(scheduler, tracker=self.fold)
        self.names = DeviceNames([scheduler])
        client = client_of(scheduler)
        self.sampler = ClusterSampler(client, self.tracker).start() if client else None
        self.fold.drain()  # the events so far before the sweeps begun before, as they came
        self.shelf.refresh()  # the sweeps begun before: their runs and trials told
        self.server = BokehServer(self._make_document, port, origins)
        try:
            self.server.start()
        except BaseException:
            self._release()
            raise
        self.url, self.port = self.server.url, self.server.port

    def _make_document(self, doc) -> None:
        """A new browser session: its own run panel, components and sweeps, at a self-set pace."""
        panel = RunPanel()
        components = Components(
            self.tracker, sampler=self.sampler, run_filter=panel.run_filter, names=self.names
        )
        workers = WorkerCount(self.sampler)  # workers leaving and joining, over time

        def update():
            self.fold.drain()  # the events that came since, folded here: off the trials' threads
            panel.update(self.tracker.snapshot())  # first: the components follow its run
            components.update()
            workers.update()

        update()
        doc.title = self.title
        doc.add_root(
            column(panel.layout, workers.layout, components.layout, sizing_mode="stretch_width")
        )
        attach_sweeps(doc, self.fold, self.names.short, reference=self.reference)
        pacer = writer.Pacer()
        last = [time.thread_time()]

        def tick():
            # Each session paces itself: at most MAX_RATE, and CPU_SHARE of a core.  A
            # cycle's cost is all this server thread did since the last tick: the update,
            # and Bokeh serialising and sending its patches (three quarters of it, measured).
            try:
                update()
            finally:
                now = time.thread_time()
                gap = pacer.gap_after(now - last[0])
                last[0] = now
            with contextlib.suppress(Exception):  # the session closed meanwhile
                doc.add_timeout_callback(tick, int(1000 * gap))

        doc.add_timeout_callback(tick, int(1000 / writer.MAX_RATE))

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server and its thread, the sampler, and the subscription."""
        self.server.stop(timeout)
        self._release()

    def _release(self) -> None:
        self.feed.stop()
        if self.sampler is not None:
            self.sampler.stop()
