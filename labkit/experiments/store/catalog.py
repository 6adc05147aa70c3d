"""A store's sweeps at a glance (``labkit sweeps STORE``): trials by status, the best, when.

:func:`summaries` reads a store opened read-only (so a store a running sweep
writes, or one on a read-only disk, is read as it is) with a few queries that
count in SQLite, not by loading every trial (the bytes of checkpoints a sweep
keeps at its location are summed from the references the store holds); :func:`format_summaries` lays
them out as an aligned table.  A missing, corrupt or foreign file is a
:class:`~labkit.errors.StorageError` naming it.

Examples
--------
>>> rows = [{"name": "lr-search", "metric": "loss", "mode": "min", "trials": 3,
...          "counts": {"completed": 2, "failed": 1}, "best": {"trial": 1, "value": 0.25},
...          "checkpoint_bytes": 52428800, "started": None, "last_written": None}]
>>> print(format_summaries(rows))
SWEEP      METRIC      TRIALS  COMPLETED  FAILED  BEST (TRIAL)  CHECKPOINTS  STARTED  LAST WRITTEN
lr-search  loss (min)       3          2       1  0.25 (1)         50.0 MiB  -        -
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

from ...errors import StorageError
from ..objectives.dominance import pareto_front
from ..trials.status import ORDER, RANKED
from .database import Store
from .reading.reads import one_read

__all__ = ["summaries", "summary", "store_file", "format_summaries", "summaries_json"]

_SWEEPS = "SELECT * FROM sweeps ORDER BY created"  # a version-4 store has no objectives


def summaries(path: Any) -> list[dict]:
    """One summary a sweep of the store at ``path`` (see :func:`summary`), oldest first."""
    store = Store(store_file(path), readonly=True)
    try:  # every sweep as of one commit: a writer's commit meanwhile shows whole or not at all
        with store.connection() as conn, one_read(conn):
            return [summary(store, row) for row in store.read(_SWEEPS)]
    finally:
        store.close()


def store_file(path: Any) -> str:
    """``path`` made absolute, when it is a file; a StorageError naming it when it is none."""
    where = os.path.abspath(os.fspath(path))
    if os.path.isdir(where):
        raise StorageError("this is a folder, not a sweep store", path=where)
    if not os.path.isfile(where):
        raise StorageError("no sweep store here: the file does not exist", path=where)
    return where


def summary(store: Store, row: dict) -> dict:
    """The sweep of ``row`` (of the table ``sweeps``) in ``store``, at a glance.

    ``{"name", "metric", "mode", "trials", "counts": {status: n}, "best":
    {"trial", "value"} | None, "front", "moves", "started", "last_written"}``: a sweep of
    several objectives has lists of ``metric`` and ``mode``, no ``best`` and the
    size of its Pareto front as ``front`` (None for one metric); ``moves`` counts
    its trials' executions that ended as their worker left gracefully; times are Unix
    seconds: when the sweep was made, and its newest write (a trial's start or
    end, a report, its settings).
    """
    name = row["name"]
    counted = {
        r["status"]: r["n"]
        for r in store.read(
            "SELECT status, COUNT(*) AS n FROM trials WHERE sweep = ? GROUP BY status", (name,)
        )
    }
    order = [s.value for s in ORDER] + sorted(set(counted) - {s.value for s in ORDER})
    times = store.read(
        "SELECT MAX(started) AS started, MAX(ended) AS ended FROM trials WHERE sweep = ?", (name,)
    )[0]
    newest = [row["updated"], times["started"], times["ended"], store.last_report_time(name)]
    pairs = json.loads(row.get("objectives") or "null")  # several objectives: [[name, mode]...]
    return {
        "name": name,
        "metric": row["metric"] if not pairs else [n for n, _ in pairs],
        "mode": row["mode"] if not pairs else [m for _, m in pairs],
        "trials": sum(counted.values()),
        "counts": {s: counted[s] for s in order if s in counted},
        "best": None if pairs else _best(store, name, row["mode"]),
        "front": _front_size(store, name, pairs) if pairs else None,
        "moves": _moves(store, name),
        "checkpoint_bytes": _kept_bytes(store, name),
        "started": row["created"],
        "last_written": max((t for t in newest if isinstance(t, (int, float))), default=None),
    }


def _best(store: Store, sweep: str, mode: str) -> dict | None:
    """The ranked trial with the best value (the lowest id among equals), as ``SweepResult.best``."""
    order = "DESC" if mode == "max" else "ASC"
    ranked = ", ".join(f"'{s.value}'" for s in RANKED)
    rows = store.read(
        f"SELECT id, value FROM trials WHERE sweep = ? AND status IN ({ranked}) "
        f"AND typeof(value) IN ('real', 'integer') ORDER BY value {order}, id ASC LIMIT 1",
        (sweep,),
    )  # a NaN is stored as the text 'NaN': never the best
    return {"trial": rows[0]["id"], "value": rows[0]["value"]} if rows else None


def _front_size(store: Store, sweep: str, pairs: list) -> int:
    """How many trials are on the sweep's Pareto front (as ``SweepResult.pareto``)."""
    ranked = ", ".join(f"'{s.value}'" for s in RANKED)
    rows = store.read(
        f"SELECT objectives, constraints FROM trials WHERE sweep = ? AND status IN ({ranked}) "
        "AND objectives IS NOT NULL",
        (sweep,),
    )
    points = []
    for r in rows:
        values, bounds = json.loads(r["objectives"]), json.loads(r["constraints"] or "[]")
        if all(b <= 0 for b in bounds) and all(n in values for n, _ in pairs):
            points.append([values[n] for n, _ in pairs])
    return len(pareto_front(points, [m for _, m in pairs])) if points else 0


def _moves(store: Store, sweep: str) -> int:
    """The moves of the sweep's trials, summed (0 in a store older than the count)."""
    if "moves" not in {r["name"] for r in store.read("PRAGMA table_info(trials)")}:
        return 0
    rows = store.read("SELECT SUM(moves) AS n FROM trials WHERE sweep = ?", (sweep,))
    return int(rows[0]["n"] or 0)


def _kept_bytes(store: Store, sweep: str) -> int:
    """The bytes of the checkpoints ``sweep`` keeps (retention's dropped ones not counted)."""
    names = {r["name"] for r in store.read("PRAGMA table_info(checkpoints)")}
    kept = " AND dropped IS NULL" if "dropped" in names else ""
    rows = store.read(f"SELECT SUM(size) AS n FROM checkpoints WHERE sweep = ?{kept}", (sweep,))
    return int(rows[0]["n"] or 0)


def _bytes(n: int | None) -> str:
    """A size as people read it: ``50.0 MiB``."""
    if n is None:
        return "-"
    size, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"


def format_summaries(rows: list[dict]) -> str:
    """``rows`` of :func:`summaries` as an aligned text table (a column a status present)."""
    statuses = list(dict.fromkeys(s for r in rows for s in r["counts"]))
    moved = any(r.get("moves") for r in rows)  # a column beside the failures, when any moved
    counted = _counted(statuses, moved)
    head = ["SWEEP", "METRIC", "TRIALS", *(s.upper() for s in counted)]
    head += ["BEST (TRIAL)", "CHECKPOINTS", "STARTED", "LAST WRITTEN"]
    several = any(r.get("front") is not None for r in rows)
    if several:  # a sweep of several objectives: its Pareto front's size, not a best
        head.insert(head.index("BEST (TRIAL)") + 1, "FRONT")
    numeric = {"TRIALS", "CHECKPOINTS", "FRONT", "MOVES", *(s.upper() for s in statuses)}
    cells = [
        [
            _printable(r["name"]),
            _printable(_objectives(r["metric"], r["mode"])),
            str(r["trials"]),
            *(str(r.get(s) or 0 if s == "moves" else r["counts"].get(s, 0)) for s in counted),
            "-" if r["best"] is None else f"{_number(r['best']['value'])} ({r['best']['trial']})",
            *([] if not several else ["-" if r.get("front") is None else str(r["front"])]),
            _bytes(r.get("checkpoint_bytes")),
            _when(r["started"]),
            _when(r["last_written"]),
        ]
        for r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
    lines = []
    for line in [head, *cells]:
        parts = [
            c.rjust(w) if h in numeric else c.ljust(w)
            for c, w, h in zip(line, widths, head, strict=True)
        ]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def _counted(statuses: list[str], moved: bool) -> list[str]:
    """The columns of counts: the statuses present, and ``moves`` beside ``failed``
    (after the statuses when none failed) where a trial moved."""
    if not moved:
        return statuses
    at = statuses.index("failed") + 1 if "failed" in statuses else len(statuses)
    return [*statuses[:at], "moves", *statuses[at:]]


def summaries_json(rows: list[dict]) -> str:
    """``rows`` of :func:`summaries` as JSON (a best of infinity as the text "inf": JSON has none)."""
    out = []
    for row in rows:
        best = row["best"]
        if best is not None and isinstance(best["value"], float) and math.isinf(best["value"]):
            row = {**row, "best": {**best, "value": str(best["value"])}}
        out.append(row)
    return json.dumps(out, indent=2)


def _objectives(metric: Any, mode: Any) -> str:
    """``loss (min)``, or ``loss (min), latency_ms (min)`` for several objectives."""
    if isinstance(metric, str):
        return f"{metric} ({mode})"
    return ", ".join(f"{n} ({m})" for n, m in zip(metric, mode, strict=True))


def _printable(text: str) -> str:
    r"""``text`` with each character a terminal would act on (ESC, BEL, a newline) escaped.

    >>> _printable("a\x1b[31mb\x07\nc")
    'a\\x1b[31mb\\x07\\nc'
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def _number(value: float) -> str:
    return f"{value:.6g}" if isinstance(value, float) and math.isfinite(value) else str(value)


def _when(t: float | None) -> str:
    """Local time to the second, or ``-``."""
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
