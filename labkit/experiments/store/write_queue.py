"""One SQLite connection whose writes queue for one writer thread, committed every fraction of a second.

Writes never wait on the disk in a trial's path: they queue for one writer
thread, which comes by every :data:`COMMIT_EVERY` seconds (a queued write
wakes nobody) and commits what it finds in one transaction.  Reads take the
same connection between commits.  A failed commit is kept and raised by
:meth:`WriteQueue.check` as a :class:`~labkit.errors.StorageError` naming the file.

What is only worth its latest value (an early-stopping rule's state) is not
queued at each change: a *keeper* (:meth:`WriteQueue.keep`) is asked once a
commit, so a thousand changes between two commits cost one write.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ...errors import StorageError
from .schema import read_failure

__all__ = ["WriteQueue", "COMMIT_EVERY"]

logger = logging.getLogger("labkit.experiments")

#: Most seconds a queued write waits for its commit.
COMMIT_EVERY = 0.25

_STOP = object()


class WriteQueue:
    """Queued writes on ``conn`` (the file at ``path``; None in memory)."""

    def __init__(self, conn: sqlite3.Connection, path: str | None):
        self.path = path
        self._conn = conn
        self._ops: collections.deque = collections.deque()  # appends are thread-safe
        self._due = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        # the writer's connection, shared with readers (reentrant: reads inside a snapshot)
        self._conn_lock = threading.RLock()
        self._closed = False
        self._keepers: list[Callable[[], Any]] = []

    @property
    def where(self) -> str:
        """The file, or ``<memory>``."""
        return self.path or "<memory>"

    def read(self, sql: str, params: Any = ()) -> list[dict]:
        """Rows of a query (any thread): on the writer's connection, between its commits.

        Another kernel reads the same file on a connection of its own (WAL lets it).
        """
        with self._conn_lock:
            try:
                cursor = self._conn.execute(sql, params)
                names = [d[0] for d in cursor.description]
                return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
            except sqlite3.Error as exc:
                raise StorageError(read_failure(exc), path=self.where) from exc

    @contextlib.contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """The connection, between the writer's commits (for a transaction of one's own)."""
        with self._conn_lock:
            yield self._conn

    def put(self, sql: str, params: Any = (), many: bool = False) -> None:
        """Queue one write (``many``: ``params`` is a list of rows)."""
        self._ops.append((sql, params, many))  # wakes nobody: the writer comes by on its own
        if self._thread is None:
            self._start()

    def call(self, fn: Callable[[sqlite3.Connection], Any]) -> None:
        """Queue ``fn(connection)``, run by the writer inside its transaction.

        What ``fn`` returns, if callable, is called after the commit.
        """
        self._ops.append(fn)
        if self._thread is None:
            self._start()

    def keep(self, keeper: Callable[[], Any]) -> None:
        """Ask ``keeper()`` once a commit, before it, for a write to add (or None: nothing new).

        It is called on the writer thread holding none of this queue's locks (it
        may take locks of its own), and a last time when the queue closes.
        """
        self._keepers.append(keeper)
        if self._thread is None:
            self._start()

    def _coalesce(self, batch: list) -> list:
        """The writes of ``batch`` to run (a store merges some); here as they are."""
        return batch

    def _start(self) -> None:
        with self._lock:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._write_loop, daemon=True, name="labkit-store-writer"
                )
                self._thread.start()

    def _write_loop(self) -> None:
        """Every :data:`COMMIT_EVERY` seconds (at once when asked), commit what is queued."""
        while True:
            self._due.wait(COMMIT_EVERY)
            self._due.clear()
            batch = []
            while self._ops:
                batch.append(self._ops.popleft())
            batch += self._kept()
            if not batch:
                continue
            with self._conn_lock:
                self._commit(self._coalesce(batch))
            for op in batch:
                if isinstance(op, threading.Event):
                    op.set()
            if any(op is _STOP for op in batch):
                with self._conn_lock:  # here, never under a writer still at work
                    self._conn.close()
                return

    def _kept(self) -> list:
        """What the keepers have new (asked outside the locks: they take their own)."""
        ops = []
        for keeper in self._keepers:
            try:
                op = keeper()
            except Exception:  # a keeper's failure must not stop the other writes
                logger.exception("labkit: a keeper of the sweep store %s failed", self.path)
                continue
            if op is not None:
                ops.append(op)
        return ops

    def _commit(self, batch: list) -> None:
        """Run the writes of ``batch`` in one transaction; a failure is kept for :meth:`check`."""
        after: list = []
        try:
            for op in batch:
                if isinstance(op, tuple):
                    sql, params, many = op
                    (self._conn.executemany if many else self._conn.execute)(sql, params)
                elif callable(op) and not isinstance(op, threading.Event):
                    done = op(self._conn)
                    if callable(done):
                        after.append(done)
            self._conn.commit()
        except Exception as exc:  # disk full, a removed folder: the sweep is told
            logger.error("labkit: writing the sweep store %s failed: %s", self.path, exc)
            with contextlib.suppress(sqlite3.Error):
                self._conn.rollback()
            if self._error is None:
                self._error = exc
            return
        for fn in after:  # e.g. removing a checkpoint file the commit replaced
            with contextlib.suppress(OSError):
                fn()

    def flush(self, timeout: float | None = 30.0) -> None:
        """Wait until every queued write is committed; raise the store's error, if any."""
        if self._thread is not None and self._thread.is_alive():
            done = threading.Event()
            self._ops.append(done)
            self._due.set()
            done.wait(timeout)
        self.check()

    def check(self) -> None:
        """Raise a write's failure as a StorageError naming the store."""
        error = self._error
        if error is not None:
            if isinstance(error, StorageError):
                raise error
            raise StorageError(
                f"writing the sweep store failed: {error}", path=self.where
            ) from error

    def close(self) -> None:
        """Commit what is queued and stop the writer; idempotent (:meth:`check` says how it went)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        if thread is None:
            self._conn.close()
            return
        self._ops.append(_STOP)
        self._due.set()
        thread.join()  # the writer closes the connection: never under its feet
