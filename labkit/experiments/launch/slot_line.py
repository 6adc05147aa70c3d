"""The two ends of a slot's socket: the client's :class:`Line`, and what both ends set on it.

A slot (:mod:`.slot`) and the sweep's client (:mod:`.slots`) talk
over one ``multiprocessing.connection`` socket on 127.0.0.1.  Its messages
are small and go both ways at once, so each end turns Nagle's wait off
(:func:`no_delay`); the client's end is a :class:`Line`, which several of
the client's threads send on (the thread that serves it, the sweep's loop
with a stop) and one thread reads.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading

__all__ = ["Line", "no_delay", "shut", "shut_reading"]


def no_delay(conn) -> None:
    """Send each message of ``conn`` (a socket's connection) at once, without Nagle's wait.

    Two small writes in a row (a trial's start, then its end) would otherwise
    wait for the peer's delayed acknowledgement, 40 ms on Linux.
    """
    with contextlib.suppress(OSError, ValueError):
        sock = socket.socket(fileno=os.dup(conn.fileno()))
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        finally:
            sock.close()


def shut(conn) -> None:
    """End the socket of ``conn`` both ways: a thread blocked reading it wakes (at its end).

    (Closing the descriptor would not wake it.)
    """
    _shutdown(conn, socket.SHUT_RDWR)


def shut_reading(conn) -> None:
    """Stop reading ``conn``: a thread blocked reading it wakes, and it may still send.

    (A slot whose worker leaves says so, and how its trial ended, after that.)
    """
    _shutdown(conn, socket.SHUT_RD)


def _shutdown(conn, how: int) -> None:
    """``shutdown(how)`` on a duplicate of ``conn``'s descriptor; a closed one is fine."""
    with contextlib.suppress(OSError, ValueError):
        sock = socket.socket(fileno=os.dup(conn.fileno()))
        try:
            sock.shutdown(how)
        finally:
            sock.close()


class Line:
    """The client's end of one slot's socket: the trials it holds, one sender at a time."""

    def __init__(self, conn, number: int, worker: str):
        self.conn, self.number, self.worker = conn, number, worker
        self.held: dict = {}  # trial -> execution, of the trial sent and not ended
        self.stops: set = set()  # those of them told to stop
        self.leaving = False  # its worker leaves gracefully: its trial moves, none is sent
        self._sending = threading.Lock()

    def send(self, message) -> bool:
        """Send ``message``; False when the line is broken."""
        with self._sending:
            try:
                self.conn.send(message)
            except (OSError, ValueError):  # broken, or closed here
                return False
        return True

    def stop(self, trial: int) -> None:
        """Tell the slot to stop ``trial`` (once)."""
        if trial in self.held and trial not in self.stops:
            self.stops.add(trial)
            self.send(("stop", trial))

    def shut(self) -> None:
        """End the line; the thread reading it wakes."""
        shut(self.conn)
