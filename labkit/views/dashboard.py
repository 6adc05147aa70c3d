"""The Bokeh dashboard: a Bokeh server inside this process, one per scheduler.

:func:`dashboard` starts a Bokeh server on 127.0.0.1 (a free port unless one
is given) in a daemon thread with its own Tornado IOLoop, serving the app
``/labkit``.  Every browser session gets its own document and
:class:`~labkit.views.components.Components`, all drawing one shared
:class:`~labkit.views.tracker.Tracker` subscribed to the scheduler; a periodic
callback per document (:data:`~labkit.views.writer.MAX_RATE` a second) sends
the changes.  BokehJS comes from the server itself, so it works offline.

Pages are served only to requests whose ``Host`` is one of those origins
(others get 403, against DNS rebinding), and websockets are accepted only from the origins the server is reached at
(``127.0.0.1:PORT``, ``localhost:PORT``), from origins given explicitly, and,
behind JupyterHub or Binder (``JUPYTERHUB_SERVICE_PREFIX`` set), from the
hub's public host when the environment names it (``JUPYTERHUB_PUBLIC_URL``,
``JUPYTERHUB_PUBLIC_HUB_URL`` or ``JUPYTERHUB_HOST``).  Behind a hub the
returned link goes through jupyter-server-proxy:
``{JUPYTERHUB_SERVICE_PREFIX}proxy/{port}/labkit``; that proxy strips its
prefix, so BokehJS is linked (and also served) under it.

The server stops when the scheduler shuts down, or with :func:`stop_dashboard`;
no thread or port is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import threading
import time
from urllib.parse import urlparse

from bokeh.application import Application
from bokeh.application.handlers.function import FunctionHandler
from bokeh.layouts import column
from bokeh.resources import Resources
from bokeh.server.server import BaseServer
from bokeh.server.tornado import BokehTornado
from bokeh.server.util import bind_sockets
from bokeh.server.views.static_handler import StaticHandler
from tornado.httpserver import HTTPServer
from tornado.ioloop import IOLoop
from tornado.web import ErrorHandler

from ..constraints import Interval, Satisfies, check_argument
from ..errors import InputError, SchedulerError
from . import writer
from .cluster_sampler import ClusterSampler
from .components import Components
from .live import LiveView
from .priority import lower_this_thread
from .run_panel import RunPanel
from .subjects import check_source, client_of

__all__ = ["dashboard", "running_url", "stop_dashboard", "APP_PATH"]

logger = logging.getLogger("labkit.views")

APP_PATH = "/labkit"
_HOST = "127.0.0.1"

_lock = threading.Lock()
_running: dict[int, _DashboardServer] = {}  # id(scheduler) -> its server


def dashboard(scheduler, port: int = 0, allow_websocket_origin=None, title: str = "labkit") -> str:
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

    Returns
    -------
    str
        The URL of the app; the same one when called again for this scheduler.
    """
    check_source(scheduler, "lk.dashboard")
    _check_port(port)
    origins = _origins(allow_websocket_origin)
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
        server = _DashboardServer(scheduler, port, origins, title)
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


def _hub_prefix() -> str | None:
    """JupyterHub's per-user prefix (``/user/name/``), when running behind one."""
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX")
    if not prefix:
        return None
    return prefix if prefix.endswith("/") else prefix + "/"


def _hub_origins() -> list[str]:
    """The hub's public host(s) named by the environment (its pages open the websocket)."""
    hosts = []
    for var in ("JUPYTERHUB_PUBLIC_URL", "JUPYTERHUB_PUBLIC_HUB_URL", "JUPYTERHUB_HOST"):
        value = os.environ.get(var, "")
        host = urlparse(value).netloc if "://" in value else value.strip("/")
        if host and host not in hosts:
            hosts.append(host)
    return hosts


class _DashboardServer:
    """One Bokeh server in its own thread, over one tracker of one scheduler."""

    def __init__(self, scheduler, port: int, origins: list[str], title: str):
        self.title = title
        # The scheduler's events feed one tracker through the live-view base (subscribed
        # with the views' state pace, unsubscribed once); each session draws it at its
        # own pace on the server's loop, where Bokeh documents may be changed.
        self.feed = LiveView(scheduler)
        self.tracker = self.feed.tracker
        client = client_of(scheduler)
        self.sampler = ClusterSampler(client, self.tracker).start() if client else None
        self._requested = (port, origins)
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: IOLoop | None = None
        self._server: BaseServer | None = None
        self.port: int | None = None
        self.url = ""
        self._thread = threading.Thread(
            target=self._serve, daemon=True, name="labkit-dashboard-bokeh"
        )
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._release()
            raise self._error

    # -- in the server thread ----------------------------------------------------

    def _serve(self) -> None:
        """Thread body: bind, start the server, run its IOLoop until stopped."""
        lower_this_thread()
        asyncio.set_event_loop(asyncio.new_event_loop())
        self._loop = loop = IOLoop.current()
        try:
            self._start_server(loop)
        except BaseException as exc:  # reported to the caller of dashboard()
            self._error = exc
            self._ready.set()
            loop.close(all_fds=True)
            return
        self._ready.set()
        loop.start()
        # stopped: close every socket still registered (open websockets included)
        loop.close(all_fds=True)

    def _start_server(self, loop: IOLoop) -> None:
        """Bind 127.0.0.1 first, so the origins can name the port that was picked."""
        port, extra = self._requested
        try:
            sockets, self.port = bind_sockets(_HOST, port)
        except OSError as exc:
            raise InputError(
                f"cannot serve the dashboard on {_HOST}:{port} "
                f"({exc.strerror or exc}); choose another port, or port=0 for "
                f"any free one",
                port=port,
            ) from exc
        origins = [f"{_HOST}:{self.port}", f"localhost:{self.port}", *extra]
        hub = _hub_prefix()
        static_root = "/"
        patterns = []
        if hub:
            # jupyter-server-proxy strips "{hub}proxy/{port}", so the page's
            # root-relative links to BokehJS must carry it; serve them there too.
            static_root = f"{hub}proxy/{self.port}/"
            patterns.append((re.escape(static_root) + "static/(.*)", StaticHandler))
            origins += _hub_origins()
        # Pages only for the hosts it was told about (no DNS rebinding); behind a hub,
        # jupyter-server-proxy authenticates every request before it forwards it.
        hosts = None if hub or "*" in extra else origins
        app = _LabkitTornado(
            {APP_PATH: Application(FunctionHandler(self._make_document))},
            static_root=static_root,
            hosts=hosts,
            extra_websocket_origins=origins,
            extra_patterns=patterns,
            use_index=False,
            redirect_root=False,
        )
        http = HTTPServer(app)
        http.add_sockets(sockets)
        self._server = server = BaseServer(loop, app, http)
        server.start()
        base = f"{hub}proxy/{self.port}" if hub else f"http://{_HOST}:{self.port}"
        self.url = base + APP_PATH

    def _make_document(self, doc) -> None:
        """A new browser session: its own run panel and components, redrawn at a self-set pace."""
        panel = RunPanel()
        components = Components(self.tracker, sampler=self.sampler, run_filter=panel.run_filter)

        def update():
            panel.update(self.tracker.snapshot())  # first: the components follow its run
            components.update()

        update()
        doc.title = self.title
        doc.add_root(column(panel.layout, components.layout, sizing_mode="stretch_width"))
        from .sweep_plots import attach as attach_sweep_plots

        attach_sweep_plots(doc, self.tracker)  # the newest sweep's curves and table
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

    def _shutdown(self) -> None:
        """On the IOLoop: stop the server (closes the listening socket), then the loop."""
        try:
            if self._server is not None:
                self._server.stop()
        finally:
            if self._loop is not None:
                self._loop.stop()

    # -- from any thread ---------------------------------------------------------

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server and its thread, the sampler, and the subscription."""
        if self._loop is not None and self._thread.is_alive():
            self._loop.add_callback(self._shutdown)
            if self._thread is not threading.current_thread():
                self._thread.join(timeout)
        self._release()

    def _release(self) -> None:
        self.feed.stop()
        if self.sampler is not None:
            self.sampler.stop()


class _LabkitTornado(BokehTornado):
    """BokehTornado that answers only its own hosts, with BokehJS under a chosen root.

    ``hosts`` lists the ``Host`` headers (``host:port``) it serves; others get
    403 (``None``: any).  The root is a proxy's prefix behind JupyterHub.
    """

    def __init__(self, applications, *, static_root: str = "/", hosts=None, **kw):
        self._static_root = static_root
        self._hosts = None if hosts is None else {h.lower() for h in hosts}
        super().__init__(applications, **kw)

    def find_handler(self, request, **kwargs):
        """403 for a request whose ``Host`` header names another host."""
        if self._hosts is not None and request.host.lower() not in self._hosts:
            logger.warning("labkit dashboard: refused a request for host %r", request.host)
            return self.get_handler_delegate(request, ErrorHandler, {"status_code": 403})
        return super().find_handler(request, **kwargs)

    def resources(self, absolute_url=None) -> Resources:
        """Server-mode resources: BokehJS from this server, never a CDN."""
        return Resources(
            mode="server", root_url=self._static_root, path_versioner=StaticHandler.append_version
        )
