"""A store followed while another process writes it: which trials reported, and what is new.

A reader that follows a store (``labkit dashboard --store``, through
:class:`~.store_changes.StoreChanges`) keeps how many reports of each trial
it has, and asks only about what may have changed:
:func:`reported_after` names the trials with report rows written since a
mark, by row id; :func:`reports_after` gives a trial's reports after the
first ``n``, reading of its packs (:mod:`.report_ops`) only the counts, and
the packs that hold new reports; of a trial that only grew since (it runs),
only the rows written after the last one read.  Either costs what was
written since, not the store's size.  A store of schema version 0 or 1 (a
JSON row a report) opened to read only is read so too, and one migrated
meanwhile by another opener is read on as version 2.

Examples
--------
>>> from labkit.experiments.store.database import Store
>>> store = Store(None)
>>> store.create_sweep("demo", "{}", "loss", "min", 0, {}, now=False)
>>> store.add_trials("demo", [(0, {})])
>>> for step in range(3):
...     store.trial_reports("demo", 0, 1, [(step, {"loss": 1 / (step + 1)}, 0.0)])
...     store.flush()                            # a commit: a pack
>>> n, at, new = store.reports_after({("demo", 0): (1, None)})[("demo", 0)]
>>> n, [step for step, _, _ in new]               # after the first one
(3, [1, 2])
>>> store.reports_after({("demo", 0): (3, at)})[("demo", 0)][2]
[]
>>> store.close()
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import Any

from ..report_ops import paused_gc
from ..report_pack import unpack
from ..schema import schema_version
from .reads import one_read

__all__ = ["reported_after", "reports_after"]

_CHUNK = 500  # values bound in one query (SQLite allows 999 at least)


def reported_after(conn: sqlite3.Connection, mark: tuple | None) -> tuple[tuple, set]:
    """The mark of the store's reports now, and the trials ``(sweep, trial)`` with report rows
    written after ``mark`` (one this function gave; None: the mark only).

    Rows are found by their row id, so the cost is what was written since.  It
    is a hint, not a proof: a row rewritten in place (a restart's dropped
    reports) or given a row id that a compaction freed is not named; a reader
    also asks :func:`reports_after` about the trials that run.  A store
    migrated meanwhile names every trial with reports, once.
    """
    table = _table(conn)
    newest = conn.execute(f"SELECT COALESCE(MAX(rowid), 0) FROM {table}").fetchall()[0][0]
    if mark is None:
        return (table, newest), set()
    after = mark[1] if mark[0] == table else 0
    # no DISTINCT: SQLite would scan the whole index of trials for it, not the new rows
    rows = conn.execute(f"SELECT sweep, trial FROM {table} WHERE rowid > ?", (after,)).fetchall()
    return (table, newest), set(rows)


def reports_after(conn: sqlite3.Connection, had: dict[tuple, tuple]) -> dict[tuple, tuple]:
    """``{(sweep, trial): (n, at, reports)}`` for each trial of ``had``: how many reports it
    has, where they end, and ``[(step, metrics, time), ...]`` after the first ``had[key][0]``
    (every one where it has fewer: a restart dropped some).

    ``had[key]`` is ``(n, at)``: the reader has the trial's first ``n`` reports,
    and ``at`` is what this function gave for it the last time, if the trial
    only grew since (it ran all along and did not restart), else None.  Given
    ``at``, only the rows written after it are read; without, every pack's
    count and the packs holding new reports.  Read as of one commit.
    """
    out: dict[tuple, tuple] = {}
    with one_read(conn):
        table = _table(conn)
        whole = {key: n for key, (n, at) in had.items() if at is None or at[0] != table}
        grown = {key: (n, at[1]) for key, (n, at) in had.items() if key not in whole}
        if table == "report_packs":
            out.update(_packs_after(conn, whole))
            out.update(_packs_grown(conn, grown))
        else:  # a JSON row a report: read by count (a legacy store, read only)
            out.update(_rows_after(conn, {**whole, **{k: n for k, (n, _) in grown.items()}}))
    return out


def _packs_after(conn: sqlite3.Connection, had: dict[tuple, int]) -> dict[tuple, tuple]:
    """:func:`reports_after` of trials that may have been rewritten: every pack's count read."""
    packs: dict[tuple, list] = {key: [] for key in had}  # key -> [(rowid, n), ...] in order
    for sweep, trials in _chunks(had):
        rows = conn.execute(
            f"SELECT trial, rowid, n FROM report_packs WHERE sweep = ? AND trial IN "
            f"({','.join('?' * len(trials))}) ORDER BY trial, rowid",
            (sweep, *trials),
        ).fetchall()
        for trial, rowid, n in rows:
            packs[(sweep, trial)].append((rowid, n))
    wanted: dict[tuple, tuple[int, list]] = {}  # key -> reports to skip, packs to read
    out: dict[tuple, tuple] = {}
    for key, rows in packs.items():
        total, old = sum(n for _, n in rows), had[key]
        out[key] = (total, ("report_packs", rows[-1][0] if rows else 0), [])
        if total == old:
            continue
        skip = old if total > old else 0
        need: list[int] = []
        for rowid, n in rows:
            if not need and skip >= n:
                skip -= n  # a pack of reports the reader has
            else:
                need.append(rowid)
        wanted[key] = (skip, need)
    blobs = _blobs(conn, [rowid for _, need in wanted.values() for rowid in need])
    with paused_gc():
        for key, (skip, need) in wanted.items():
            reports = [r for rowid in need for r in unpack(blobs[rowid])]
            out[key] = (*out[key][:2], reports[skip:])
    return out


def _packs_grown(conn: sqlite3.Connection, had: dict[tuple, tuple[int, int]]) -> dict:
    """:func:`reports_after` of trials that only grew: their packs after the last one read."""
    out = {}
    for (sweep, trial), (n, after) in had.items():
        rows = conn.execute(  # the index of (sweep, trial) holds the row id: a range of it
            "SELECT rowid, data FROM report_packs WHERE sweep = ? AND trial = ? AND rowid > ? "
            "ORDER BY rowid",
            (sweep, trial, after),
        ).fetchall()
        with paused_gc():
            reports = [r for _, data in rows for r in unpack(data)]
        at = rows[-1][0] if rows else after
        out[(sweep, trial)] = (n + len(reports), ("report_packs", at), reports)
    return out


def _rows_after(conn: sqlite3.Connection, had: dict[tuple, int]) -> dict[tuple, tuple]:
    """:func:`reports_after` of a store of schema version 0 or 1 (a JSON row a report)."""
    counts: dict[tuple, int] = {}
    for sweep, trials in _chunks(had):
        rows = conn.execute(
            f"SELECT trial, COUNT(*) FROM reports WHERE sweep = ? AND trial IN "
            f"({','.join('?' * len(trials))}) GROUP BY trial",
            (sweep, *trials),
        ).fetchall()
        counts.update(((sweep, trial), n) for trial, n in rows)
    out: dict[tuple, tuple] = {}
    for key, old in had.items():
        total = counts.get(key, 0)
        out[key] = (total, None, [])  # no row to go on from: counted again next time
        if total != old:
            rows = conn.execute(
                "SELECT step, metrics, time FROM reports WHERE sweep = ? AND trial = ? "
                "ORDER BY rowid LIMIT -1 OFFSET ?",
                (*key, old if total > old else 0),
            ).fetchall()
            out[key] = (total, None, [(step, json.loads(m), t) for step, m, t in rows])
    return out


def _blobs(conn: sqlite3.Connection, ids: list[int]) -> dict[int, Any]:
    """The packs of rows ``ids``, by row id."""
    blobs: dict[int, Any] = {}
    for at in range(0, len(ids), _CHUNK):
        part = ids[at : at + _CHUNK]
        marks = ",".join("?" * len(part))
        rows = conn.execute(f"SELECT rowid, data FROM report_packs WHERE rowid IN ({marks})", part)
        blobs.update(rows.fetchall())
    return blobs


def _chunks(keys) -> Iterator[tuple[str, list]]:
    """``(sweep, [trial, ...])`` of ``keys`` ``(sweep, trial)``, at most :data:`_CHUNK` a query."""
    by_sweep: dict[str, list] = {}
    for sweep, trial in keys:
        by_sweep.setdefault(sweep, []).append(trial)
    for sweep, trials in by_sweep.items():
        for at in range(0, len(trials), _CHUNK):
            yield sweep, trials[at : at + _CHUNK]


def _table(conn: sqlite3.Connection) -> str:
    """Where the store keeps reports now (asked at each read: another opener may migrate it)."""
    return "report_packs" if schema_version(conn) >= 2 else "reports"
