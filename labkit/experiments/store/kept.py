"""The checkpoints a sweep store keeps: one reference a trial, and retention.

A trial writes its checkpoints itself, to the sweep's location
(:class:`~labkit.experiments.trials.checkpoint_place.CheckpointPlace`); the
store keeps the reference of each trial's latest (``key``, step, size,
``digest``) in its ``checkpoints`` table.  A newer checkpoint replaces the
row, and the older one is deleted from the location once the row is
committed (never one under another trial's keys).  A store written before
issue 46 kept the bytes in the row (``data``) or in a file (``path``): they
are read still, and written to the location when a resumed sweep needs them.

Retention, as Determined has it: every trial keeps its latest checkpoint
while it may run again (running, pending, cancelled); with ``keep_best=k``,
a trial that ended keeps it only while it is one of the ``k`` best by the
sweep's metric (failed ones never), and the rest are deleted as trials end.
A dropped row stays, saying why (``dropped``), so asking for that trial's
model says it was not kept, and why.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from ...errors import StorageError
from ..objectives.front import dominance_order
from ..trials.checkpoint_place import CheckpointPlace, CheckpointRef
from ..trials.status import RANKED, TERMINAL

__all__ = [
    "Retained",
    "save_op",
    "retain_op",
    "latest",
    "bytes_kept",
    "ref_of",
    "selected",
    "read_old",
]

logger = logging.getLogger("labkit.experiments")


class Retained:
    """What a store knows of a sweep it keeps checkpoints of: its place, mode, keep_best, metric
    (and, for several, every objective and mode: the best are then kept by dominance)."""

    def __init__(
        self,
        place: CheckpointPlace,
        mode: str,
        keep_best: int | None,
        metric: str,
        objectives: tuple = (),
        modes: tuple = (),
    ):
        self.place, self.mode, self.keep_best, self.metric = place, mode, keep_best, metric
        self.objectives, self.modes = objectives, modes


def _delete(place: CheckpointPlace, keys: list) -> None:
    """Delete ``keys`` from the location (after the commit); a failure is logged, not raised."""
    for key in keys:
        try:
            place.location.delete(key)
        except StorageError as err:  # left behind: removed with the sweep's folder
            logger.warning("labkit: a checkpoint was not deleted: %s", err)


def _unlink(path: str | None) -> None:
    """Remove an old store's checkpoint file (before issue 46)."""
    if path and os.path.exists(path):
        os.unlink(path)


def save_op(
    sweep: str, trial: int, seq: int, step: Any, ref: CheckpointRef, retained: Retained | None
) -> Callable[[sqlite3.Connection], Any]:
    """The writer's op keeping ``ref`` as ``trial``'s latest; it deletes the one replaced."""

    def write(conn: sqlite3.Connection) -> Any:
        old = conn.execute(
            "SELECT key, path FROM checkpoints WHERE sweep = ? AND trial = ?", (sweep, trial)
        ).fetchone()
        conn.execute(
            "INSERT OR REPLACE INTO checkpoints (sweep, trial, seq, step, time, size, data, "
            "path, key, digest, dropped) VALUES (?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?, NULL)",
            (sweep, trial, seq, step, time.time(), ref.nbytes, ref.key, ref.digest),
        )
        if old is None:
            return None
        stale_key = old[0] if old[0] and old[0] != ref.key else None
        owned = retained is not None and stale_key and retained.place.owns(stale_key, trial)

        def after() -> None:
            _unlink(old[1])
            if owned and retained is not None:
                _delete(retained.place, [stale_key])

        return after

    return write


def retain_op(sweep: str, retained: Retained) -> Callable[[sqlite3.Connection], Any]:
    """The writer's op applying ``keep_best``: drop every ended trial's checkpoint but the best's."""

    def retain(conn: sqlite3.Connection) -> Any:
        rows = conn.execute(
            "SELECT c.trial, c.key, c.path, t.status, t.value, t.objectives, t.constraints "
            "FROM checkpoints c JOIN trials t ON t.sweep = c.sweep AND t.id = c.trial "
            "WHERE c.sweep = ? AND c.dropped IS NULL",
            (sweep,),
        ).fetchall()
        ended = [r for r in rows if r[3] in {s.value for s in TERMINAL}]
        keep = {r[0] for r in _best_first(ended, retained)[: retained.keep_best]}
        gone = [r for r in ended if r[0] not in keep]
        if not gone:
            return None
        why = (
            f"retention: keep_best={retained.keep_best} keeps the last checkpoint of the "
            f"{retained.keep_best} best trial(s) by {_by(retained)}"
        )
        conn.executemany(
            "UPDATE checkpoints SET dropped = ?, data = NULL WHERE sweep = ? AND trial = ?",
            [(_reason(r, why), sweep, r[0]) for r in gone],
        )
        keys = [r[1] for r in gone if r[1] and retained.place.owns(r[1], r[0])]

        def after() -> None:
            for r in gone:
                _unlink(r[2])
            _delete(retained.place, keys)

        return after

    return retain


def _best_first(ended: list, retained: Retained) -> list:
    """The ranked, feasible rows best first: by value (ties to the lower id, as
    ``result.best``), or by dominance for several objectives."""
    ranked = [
        r
        for r in sorted(ended, key=lambda r: r[0])
        if r[3] in {s.value for s in RANKED}
        and _finite(r[4])
        and all(v <= 0 for v in json.loads(r[6] or "[]"))  # an infeasible trial is no best
    ]
    if len(retained.objectives) > 1:
        values = [json.loads(r[5] or "{}") for r in ranked]
        ranked = [r for r, v in zip(ranked, values, strict=True) if _all(v, retained.objectives)]
        points = [
            [v[n] for n in retained.objectives] for v in values if _all(v, retained.objectives)
        ]
        return [ranked[i] for i in dominance_order(points, retained.modes)]
    sign = -1 if retained.mode == "max" else 1
    return sorted(ranked, key=lambda r: (sign * r[4], r[0]))


def _by(retained: Retained) -> str:
    """What ranks the trials: the metric, or dominance over every objective."""
    if len(retained.objectives) > 1:
        return f"dominance over {', '.join(retained.objectives)} (then crowding)"
    return retained.metric


def _all(values: dict, names: tuple) -> bool:
    """Whether ``values`` holds a finite value of every objective in ``names``."""
    return all(_finite(values.get(n)) for n in names)


def _finite(value: Any) -> bool:
    return value is not None and not math.isnan(value)


def _reason(row: tuple, why: str) -> str:
    """Why one trial's checkpoint was dropped."""
    if row[3] == "failed":
        return f"{why}; the trial failed"
    if not _finite(row[4]):
        return f"{why}; the trial has no value of the metric"
    return f"{why}, and it was not one of them"


def selected(names: set) -> str:
    """The columns a read of ``checkpoints`` selects, on a store of any version (no bytes)."""
    new = ("key", "digest", "dropped")
    extra = ", ".join(n if n in names else f"NULL AS {n}" for n in new)
    return f"trial, seq, step, size, path, data IS NOT NULL AS inline, {extra}"


def ref_of(row: dict) -> CheckpointRef | None:
    """The reference a row of the ``checkpoints`` table keeps (None: an old row, or dropped)."""
    if row.get("key") is None or row.get("dropped"):
        return None
    return CheckpointRef(row["key"], row["step"], row["size"], row["digest"])


def latest(
    rows: list[dict], trial: int, retained: Retained | None, save: Callable
) -> tuple[CheckpointRef, Any, int] | None:
    """``(ref, step, seq)`` of a trial's latest checkpoint from its ``rows``, or None.

    An old store's bytes (inline or in a file) are written to the sweep's
    location first, and that reference kept (``save(seq, step, ref)``).
    """
    if not rows or rows[0].get("dropped"):
        return None
    row = rows[0]
    ref = ref_of(row)
    if ref is None:
        if retained is None:
            return None
        blob = read_old(row)
        key = retained.place.key(trial, 0, row["seq"], row["step"])
        ref = retained.place.location.write(key, blob, step=row["step"])
        save(row["seq"], row["step"], ref)
    return ref, row["step"], row["seq"]


def read_old(row: dict) -> bytes:
    """The bytes an old store's row keeps (``data``, read by ``row["read_data"]``) or its file."""
    if row["inline"]:
        return row["read_data"]()
    try:
        with open(row["path"], "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise StorageError.of(exc, "reading a checkpoint", row["path"]) from exc


def bytes_kept(conn: sqlite3.Connection) -> dict[str, int]:
    """``{sweep: bytes}`` of the checkpoints every sweep of the store keeps."""
    columns = {r[1] for r in conn.execute("PRAGMA table_info(checkpoints)").fetchall()}
    where = " WHERE dropped IS NULL" if "dropped" in columns else ""
    rows = conn.execute(f"SELECT sweep, SUM(size) FROM checkpoints{where} GROUP BY sweep")
    return {sweep: int(total or 0) for sweep, total in rows.fetchall()}
