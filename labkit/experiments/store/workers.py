"""The workers a sweep ran on, kept with it: what names each (its Dask name and threads).

A trial's row names its worker by address; what a board calls that worker
(``worker 1``) comes from the cluster, which is gone when a stored sweep is
read back.  The engine learns each new address's name once
(:class:`~.worker_namer.WorkerNamer`) and the store keeps them in the sweep's
settings, under ``"workers"``: ``{address: {"name": ..., "nthreads": ...}}``.
Both writes here run on the store's writer, in its transaction: a name adds
to what is kept, and new settings (a resumed sweep's, ``add(n)``'s) keep it.

Examples
--------
>>> import sqlite3
>>> conn = sqlite3.connect(":memory:")
>>> _ = conn.execute("CREATE TABLE sweeps (name TEXT, settings TEXT, updated REAL)")
>>> _ = conn.execute("INSERT INTO sweeps VALUES ('s', '{\\"trials\\": 2}', 0)")
>>> named("s", {"tcp://a:1": {"name": 0, "nthreads": 1}})(conn)
>>> replaced("s", {"trials": 3})(conn)
>>> workers_of(json.loads(conn.execute("SELECT settings FROM sweeps").fetchone()[0]))
{'tcp://a:1': {'name': 0, 'nthreads': 1}}
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable

__all__ = ["WORKERS", "named", "replaced", "workers_of"]

#: The key of the sweep's settings that keeps its workers' names.
WORKERS = "workers"

Write = Callable[[sqlite3.Connection], None]


def workers_of(settings: dict | None) -> dict[str, dict]:
    """The workers kept in a sweep's settings: ``{address: {"name", "nthreads"}}``."""
    kept = (settings or {}).get(WORKERS)
    return {str(a): dict(w) for a, w in kept.items() if isinstance(w, dict)} if kept else {}


def _stored(conn: sqlite3.Connection, sweep: str) -> dict | None:
    """The sweep's stored settings (None: no such sweep)."""
    row = conn.execute("SELECT settings FROM sweeps WHERE name = ?", (sweep,)).fetchone()
    if row is None:
        return None
    try:
        settings = json.loads(row[0] or "{}")
    except ValueError:  # settings no labkit wrote: replaced, as they were before
        return {}
    return settings if isinstance(settings, dict) else {}


def _write(conn: sqlite3.Connection, sweep: str, settings: dict) -> None:
    conn.execute(
        "UPDATE sweeps SET settings = ?, updated = ? WHERE name = ?",
        (json.dumps(settings), time.time(), sweep),
    )


def named(sweep: str, identities: dict[str, dict]) -> Write:
    """The write that adds ``identities`` (``{address: {"name", "nthreads"}}``) to the sweep's."""

    def write(conn: sqlite3.Connection) -> None:
        settings = _stored(conn, sweep)
        if settings is None:
            return
        settings[WORKERS] = {**workers_of(settings), **identities}
        _write(conn, sweep, settings)

    return write


def replaced(sweep: str, settings: dict) -> Write:
    """The write that replaces the sweep's settings by ``settings``, keeping its workers."""

    def write(conn: sqlite3.Connection) -> None:
        kept = workers_of(_stored(conn, sweep))
        _write(conn, sweep, {**settings, WORKERS: kept} if kept else dict(settings))

    return write
