"""A Bokeh server in a thread of this process, on 127.0.0.1, answering only its own origins.

:class:`BokehServer` binds 127.0.0.1 (a free port unless one is given),
serves one app (``/labkit``) whose documents ``make_document(doc)`` builds,
in a daemon thread with its own Tornado IOLoop, and stops with
:meth:`BokehServer.stop`, leaving no thread or port.  BokehJS comes from the
server itself, so it works offline.

Pages are served only to requests whose ``Host`` is one of those origins
(others get 403, against DNS rebinding), and websockets are accepted only
from the origins the server is reached at (``127.0.0.1:PORT``,
``localhost:PORT``), from origins given explicitly, and, behind JupyterHub or
Binder (``JUPYTERHUB_SERVICE_PREFIX`` set), from the hub's public host when
the environment names it (``JUPYTERHUB_PUBLIC_URL``,
``JUPYTERHUB_PUBLIC_HUB_URL`` or ``JUPYTERHUB_HOST``).  Behind a hub the URL
goes through jupyter-server-proxy: ``{JUPYTERHUB_SERVICE_PREFIX}proxy/{port}/labkit``;
that proxy strips its prefix, so BokehJS is linked (and also served) under it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from bokeh.application import Application
from bokeh.application.handlers.function import FunctionHandler
from bokeh.resources import Resources
from bokeh.server.server import BaseServer
from bokeh.server.tornado import BokehTornado
from bokeh.server.util import bind_sockets
from bokeh.server.views.static_handler import StaticHandler
from tornado.httpserver import HTTPServer
from tornado.ioloop import IOLoop
from tornado.web import ErrorHandler

from ...errors import InputError

__all__ = ["BokehServer", "APP_PATH", "HOST", "THREAD_NAME"]

logger = logging.getLogger("labkit.views")

APP_PATH = "/labkit"
HOST = "127.0.0.1"
THREAD_NAME = "labkit-dashboard-bokeh"


class BokehServer:
    """One Bokeh app served from its own thread; :attr:`url` once started."""

    def __init__(
        self, make_document: Callable[[Any], None], port: int = 0, origins: list[str] | None = None
    ):
        self._make_document = make_document
        self._requested = (port, list(origins or []))
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: IOLoop | None = None
        self._server: BaseServer | None = None
        self.port: int | None = None
        self.url = ""
        self._thread = threading.Thread(target=self._serve, daemon=True, name=THREAD_NAME)

    def start(self) -> BokehServer:
        """Bind and serve; raises what stopped it from serving (a port in use: InputError)."""
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self

    # -- in the server thread ----------------------------------------------------

    def _serve(self) -> None:
        """Thread body: bind, start the server, run its IOLoop until stopped.

        The thread keeps its maker's priority: it answers a browser that waits (a page, a
        websocket) and draws each session paced to ``CPU_SHARE`` of a core (the dashboard's
        ``Pacer``).  At a low priority a loaded machine starved it: a page took over 20 s
        for 0.3 s of CPU and a session drew nothing for a whole run (issue 44).
        """
        asyncio.set_event_loop(asyncio.new_event_loop())
        self._loop = loop = IOLoop.current()
        try:
            self._start_server()
        except BaseException as exc:  # reported to the caller of start()
            self._error = exc
            self._ready.set()
            loop.close(all_fds=True)
            return
        self._ready.set()
        loop.start()
        # stopped: close every socket still registered (open websockets included)
        loop.close(all_fds=True)

    def _start_server(self) -> None:
        """Bind 127.0.0.1 first, so the origins can name the port that was picked."""
        assert self._loop is not None
        port, extra = self._requested
        try:
            sockets, self.port = bind_sockets(HOST, port)
        except OSError as exc:
            raise InputError(
                f"cannot serve the dashboard on {HOST}:{port} "
                f"({exc.strerror or exc}); choose another port, or port=0 for "
                f"any free one",
                port=port,
            ) from exc
        origins = [f"{HOST}:{self.port}", f"localhost:{self.port}", *extra]
        hub = hub_prefix()
        static_root = "/"
        patterns = []
        if hub:
            # jupyter-server-proxy strips "{hub}proxy/{port}", so the page's
            # root-relative links to BokehJS must carry it; serve them there too.
            static_root = f"{hub}proxy/{self.port}/"
            patterns.append((re.escape(static_root) + "static/(.*)", StaticHandler))
            origins += hub_origins()
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
        self._server = server = BaseServer(self._loop, app, http)
        server.start()
        base = f"{hub}proxy/{self.port}" if hub else f"http://{HOST}:{self.port}"
        self.url = base + APP_PATH

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
        """Stop the server and its thread (waits for it, unless called from it)."""
        if self._loop is not None and self._thread.is_alive():
            self._loop.add_callback(self._shutdown)
            if self._thread is not threading.current_thread():
                self._thread.join(timeout)


def hub_prefix() -> str | None:
    """JupyterHub's per-user prefix (``/user/name/``), when running behind one."""
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX")
    if not prefix:
        return None
    return prefix if prefix.endswith("/") else prefix + "/"


def hub_origins() -> list[str]:
    """The hub's public host(s) named by the environment (its pages open the websocket)."""
    hosts = []
    for var in ("JUPYTERHUB_PUBLIC_URL", "JUPYTERHUB_PUBLIC_HUB_URL", "JUPYTERHUB_HOST"):
        value = os.environ.get(var, "")
        host = urlparse(value).netloc if "://" in value else value.strip("/")
        if host and host not in hosts:
            hosts.append(host)
    return hosts


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
