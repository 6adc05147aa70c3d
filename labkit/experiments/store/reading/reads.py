"""A sweep read back from its store in bulk: its trials' rows and their reports, fast.

Ten thousand trials are read in a few queries, their JSON decoded in one
``json.loads`` for all configurations (and one for all final metrics: a call
a trial costs more than the decoding) and their reports unpacked in C
(:func:`~labkit.experiments.store.report_ops.read_reports`), with the cyclic collector paused while
the many small objects are made.  A store of schema version 0 or 1 opened to
read only (not migrated) is read as it was written: a JSON row a report.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from ....errors import StorageError
from ...trials.status import Status
from ..report_ops import paused_gc, read_reports
from ..schema import schema_version
from ..values import unreal

__all__ = [
    "TRIAL_COLUMNS",
    "trials_and_reports",
    "trial_rows",
    "reports",
    "last_report_time",
    "one_read",
]

#: The trials' columns a record is made of, in the order read.
TRIAL_COLUMNS = (
    "id",
    "config",
    "status",
    "metrics",
    "value",
    "best",
    "step",
    "error",
    "traceback",
    "reason",
    "attempts",
    "worker",
    "started",
    "ended",
    "objectives",
    "constraints",
    "moves",
)
#: The columns a store of schema version 4 or older lacks (read as NULL there; moves as 0).
_SINCE_V5 = ("objectives", "constraints", "moves")
_STATUS = {s.value: s for s in Status}


def trials_and_reports(conn: sqlite3.Connection, sweep: str) -> tuple[list[tuple], dict]:
    """:func:`trial_rows` and :func:`reports` as of one commit (one read transaction: a
    store another process writes meanwhile gives no trial ended without its last reports)."""
    with one_read(conn):
        return trial_rows(conn, sweep), reports(conn, sweep)


@contextmanager
def one_read(conn: sqlite3.Connection) -> Iterator[None]:
    """Reads inside see the store as of one commit (one read transaction, unless one is open)."""
    began = not conn.in_transaction
    if began:
        conn.execute("BEGIN")
    try:
        yield
    finally:
        if began:
            conn.rollback()  # it wrote nothing: ends the read


def trial_rows(conn: sqlite3.Connection, sweep: str) -> list[tuple]:
    """The trials' rows (:data:`TRIAL_COLUMNS`) in id order, their JSON and NaNs decoded."""
    rows = conn.execute(
        f"SELECT {', '.join(_selected(conn))} FROM trials WHERE sweep = ? ORDER BY id", (sweep,)
    ).fetchall()
    with paused_gc():
        configs = json.loads("[" + ",".join(r[1] for r in rows) + "]")
        metrics = json.loads("[" + ",".join(r[3] or "null" for r in rows) + "]")
        objectives = json.loads("[" + ",".join(r[14] or "null" for r in rows) + "]")
        constraints = json.loads("[" + ",".join(r[15] or "null" for r in rows) + "]")
        return [
            (
                r[0], config, _status(r[2], sweep, r[0]), final, *map(unreal, r[4:7]), *r[7:14],
                values, None if bounds is None else tuple(bounds),  # JSON keeps NaN
                r[16] or 0,
            )
            for r, config, final, values, bounds in zip(
                rows, configs, metrics, objectives, constraints, strict=True
            )
        ]  # fmt: skip


def _selected(conn: sqlite3.Connection) -> list[str]:
    """:data:`TRIAL_COLUMNS`, NULL for those an older store read as written lacks."""
    present = {r[1] for r in conn.execute("PRAGMA table_info(trials)").fetchall()}
    return [c if c in present or c not in _SINCE_V5 else "NULL" for c in TRIAL_COLUMNS]


def _status(word, sweep: str, trial: int) -> Status:
    """A stored trial's status; a word this labkit does not know is a StorageError naming it."""
    status = _STATUS.get(word)
    if status is None:
        raise StorageError(
            f"trial {trial} of sweep {sweep!r} has the status {word!r}, which this labkit "
            f"does not know (it knows {', '.join(_STATUS)}): the store was edited, or "
            "written by another program or a newer labkit",
            sweep=sweep,
            trial=trial,
        )
    return status


def reports(conn: sqlite3.Connection, sweep: str) -> dict[int, list]:
    """``{trial: [(step, metrics, time), ...]}`` of ``sweep``, each in report order."""
    if _packed(conn):
        return read_reports(conn, sweep)
    out: dict[int, list] = {}
    rows = conn.execute(
        "SELECT trial, step, metrics, time FROM reports WHERE sweep = ? ORDER BY rowid", (sweep,)
    ).fetchall()
    with paused_gc():
        for trial, step, metrics, t in rows:
            out.setdefault(trial, []).append((step, json.loads(metrics), t))
    return out


def last_report_time(conn: sqlite3.Connection, sweep: str) -> float | None:
    """When the newest stored report of ``sweep`` was made (None: none stored)."""
    sql = (
        "SELECT MAX(last) FROM report_packs WHERE sweep = ?"
        if _packed(conn)
        else "SELECT MAX(time) FROM reports WHERE sweep = ?"
    )
    return conn.execute(sql, (sweep,)).fetchall()[0][0]


def _packed(conn: sqlite3.Connection) -> bool:
    """Whether the store keeps packed reports (schema 2) now: asked at each read, as a store
    read by one process may be migrated by another that opens it to write meanwhile."""
    return schema_version(conn) >= 2
