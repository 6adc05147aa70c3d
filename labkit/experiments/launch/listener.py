"""The sweep's listening sockets: handshakes with a deadline that hold up no other connection.

``multiprocessing.connection.Listener.accept`` authenticates a connection
before it returns, on the accepting thread and with no deadline: one local
connection that sends nothing (or half a message) held every later one back,
so no slot connected, every trial stayed pending, and the accepting thread
never ended.  :class:`Listener` accepts plain sockets and authenticates each
on a thread of its own (the thread that then serves it, as
``multiprocessing.connection`` would), shutting a connection whose handshake
has not ended within :data:`HANDSHAKE` seconds.  :meth:`Listener.close` ends
the accepting thread and every handshake still under way.

Examples
--------
>>> import queue
>>> from multiprocessing.connection import Client
>>> got = queue.Queue()
>>> listener = Listener(b"key", lambda conn: got.put(conn.recv()), "doc")
>>> with Client(listener.address, authkey=b"key") as conn:
...     conn.send("hello")
>>> got.get(timeout=30)
'hello'
>>> listener.close()
>>> listener.join()
>>> listener.alive()
[]
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge

from .slot_line import shut

__all__ = ["Listener", "HANDSHAKE"]

logger = logging.getLogger("labkit.experiments")

#: Seconds a connection has to authenticate before it is shut.
HANDSHAKE = 20.0

#: Seconds :meth:`Listener.close` waits for its threads.
CLOSE_WAIT = 5.0


class Listener:
    """Accepts on a thread of its own; authenticates and serves each connection on another.

    ``serve(conn)`` is called with each authenticated connection, on that
    connection's thread; the connection is closed when it returns.
    ``family``: ``"AF_INET"`` (127.0.0.1, any free port) or ``"AF_UNIX"`` (a
    socket in a folder of its own, which only this user may enter).
    """

    def __init__(
        self,
        authkey: bytes,
        serve: Callable[[Connection], None],
        name: str,
        family: str = "AF_INET",
        handshake: float | None = None,
    ):
        self.authkey, self.serve, self.name = authkey, serve, name
        self.handshake = HANDSHAKE if handshake is None else handshake
        self._folder: str | None = None
        self._sock = self._bind(family)
        self.address = self._sock.getsockname()
        self.closed = False
        self._lock = threading.Lock()
        self._pending: set = set()  # connections in their handshake
        self._threads: list[threading.Thread] = []  # one a connection: handshake, then serve
        self._accepting = threading.Thread(target=self._accept, daemon=True, name=f"{name}-accept")
        self._accepting.start()

    def _bind(self, family: str) -> socket.socket:
        """The listening socket of ``family``."""
        if family == "AF_UNIX":
            self._folder = tempfile.mkdtemp(prefix="labkit-")  # mode 0700: this user alone
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(os.path.join(self._folder, "socket"))
        else:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        return sock

    def alive(self) -> list[threading.Thread]:
        """The threads of this listener still running (accepting, handshakes, served lines)."""
        with self._lock:
            threads = [self._accepting, *self._threads]
        return [t for t in threads if t.is_alive()]

    def _accept(self) -> None:
        """Take each connection and hand it to a thread of its own, until closed."""
        while True:
            try:
                sock, _ = self._sock.accept()
            except OSError:
                if self.closed:
                    return
                continue  # a connection that went before it was taken (ECONNABORTED)
            with self._lock:
                if self.closed:
                    sock.close()
                    return
                self._threads = [t for t in self._threads if t.is_alive()]
                thread = threading.Thread(
                    target=self._connection, args=(sock,), daemon=True, name=f"{self.name}-line"
                )
                self._threads.append(thread)
            thread.start()

    def _connection(self, sock: socket.socket) -> None:
        """Authenticate ``sock`` within the deadline, then serve it; close it at the end."""
        sock.setblocking(True)
        conn = Connection(sock.detach())
        try:
            if self._authenticate(conn):
                self.serve(conn)
        except Exception:  # the served line's own failure: logged, the listener goes on
            logger.exception("labkit: serving a connection of %s failed", self.name)
        finally:
            conn.close()

    def _authenticate(self, conn: Connection) -> bool:
        """Whether ``conn`` answered the challenge, and knew ours, in time."""
        with self._lock:
            if self.closed:
                return False
            self._pending.add(conn)
        timer = threading.Timer(self.handshake, self._expire, (conn,))
        timer.daemon = True
        timer.start()
        try:
            deliver_challenge(conn, self.authkey)
            answer_challenge(conn, self.authkey)
            ok = True
        except (OSError, EOFError, AuthenticationError, ValueError):
            ok = False  # silent, garbage, the wrong key, or shut at the deadline
        finally:
            timer.cancel()
        with self._lock:
            expired = conn not in self._pending
            self._pending.discard(conn)
        return ok and not expired

    def _expire(self, conn: Connection) -> None:
        """The deadline of ``conn``'s handshake: shut it if it is still under way."""
        with self._lock:
            if conn not in self._pending:
                return
            self._pending.discard(conn)
        shut(conn)

    def close(self) -> None:
        """Stop accepting, shut the handshakes under way, wait (a little) for the accepting thread.

        Lines already served go on until their ``serve`` returns.
        """
        with self._lock:
            if self.closed:
                return
            self.closed = True
            pending = list(self._pending)
            self._pending.clear()
        for conn in pending:
            shut(conn)
        self._wake()
        self._accepting.join(timeout=CLOSE_WAIT)
        self._sock.close()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)

    def _wake(self) -> None:
        """Wake the accepting thread (closed now, it returns)."""
        with contextlib.suppress(OSError):  # wakes the accept on Linux
            self._sock.shutdown(socket.SHUT_RDWR)
        family = socket.AF_INET if isinstance(self.address, tuple) else socket.AF_UNIX
        with (
            contextlib.suppress(OSError),  # elsewhere: a connection it takes and drops
            socket.socket(family, socket.SOCK_STREAM) as sock,
        ):
            sock.settimeout(1.0)
            sock.connect(self.address)

    def join(self, timeout: float = CLOSE_WAIT) -> None:
        """Wait up to ``timeout`` seconds in all for the served lines to end."""
        deadline = time.monotonic() + timeout
        for thread in self.alive():
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
