"""One sweep at a time owns a name: claims on a store's sweeps, across threads and processes.

A claim is a row of the store's ``owners`` table (the owner's token, host,
pid and since when).  :func:`claim` reads and takes it in one transaction
(``BEGIN IMMEDIATE``: the write lock), so of two sweeps starting with one
name, exactly one gets it.  A claim whose process is gone (on this host) is
taken over.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import time

from ...errors import StorageError

__all__ = ["claim", "owned", "disowned"]

#: Owner tokens of the sweeps this process runs now (a claim of this process that is not
#: among them was left by a sweep that ended without releasing it).
_OWNED: set = set()


def owned(owner: str) -> None:
    """``owner`` runs a sweep of this process now."""
    _OWNED.add(owner)


def disowned(owner: str) -> None:
    """``owner``'s sweep ended."""
    _OWNED.discard(owner)


def claim(conn: sqlite3.Connection, where: str, sweep: str, owner: str) -> dict | None:
    """Make ``owner`` the one sweep that runs ``sweep`` now; ``None``, or who holds it."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute(
            "SELECT owner, host, pid, since FROM owners WHERE sweep = ?", (sweep,)
        ).fetchone()
        if row is not None and row[0] != owner and not _stale(*row):
            conn.rollback()
            return {"owner": row[0], "host": row[1], "pid": row[2], "since": row[3]}
        conn.execute(
            "INSERT OR REPLACE INTO owners VALUES (?, ?, ?, ?, ?)",
            (sweep, owner, socket.gethostname(), os.getpid(), time.time()),
        )
        conn.commit()
    except sqlite3.Error as exc:
        with contextlib.suppress(sqlite3.Error):
            conn.rollback()
        raise StorageError(f"the store cannot be written: {exc}", path=where) from exc
    owned(owner)
    return None


def _stale(owner: str, host: str | None, pid: int | None, since: float | None) -> bool:
    """Whether a claim's sweep has ended without releasing it (its process is gone)."""
    if host != socket.gethostname() or pid is None:
        return False  # another machine's process: it cannot be asked
    if pid == os.getpid():
        return owner not in _OWNED
    import psutil  # Dask's own dependency

    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:  # ended, not yet reaped
            return True
        started = process.create_time()
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:  # alive, another user's
        return False
    # a process that began after the claim only got the claimer's pid again
    return since is not None and started > since + 1.0
