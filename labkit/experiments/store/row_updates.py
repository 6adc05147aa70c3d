"""A trial's row changes as the store queues them: a commit's changes of one trial are one UPDATE.

A trial's configuration (asked as it starts), its start and its end reach
the store as three writes, usually within one commit (a trivial trial takes
a millisecond; the writer commits every quarter of a second).  Each is a
:class:`RowUpdate`, the columns it sets; :func:`merge_rows` makes those of
one trial in a commit one ``UPDATE``, as if run one after another: a later
value wins, and a column set only where the row holds none
(``started = COALESCE(started, ?)``) keeps the value set before it.

Examples
--------
>>> import sqlite3
>>> conn = sqlite3.connect(":memory:")
>>> _ = conn.execute("CREATE TABLE trials (sweep, id, status, started, ended, config)")
>>> _ = conn.execute("INSERT INTO trials VALUES ('s', 0, 'pending', NULL, 5.0, '{}')")
>>> batch = [RowUpdate("s", 0, {"config": '{"x": 1}'}),
...          RowUpdate("s", 0, {"status": "running", "ended": None}, first={"started": 1.0}),
...          RowUpdate("s", 0, {"status": "completed", "ended": 2.0})]
>>> [op.sql() for op in merge_rows(batch)]  # doctest: +NORMALIZE_WHITESPACE
['UPDATE trials SET config = ?, status = ?, ended = ?, started = COALESCE(started, ?)
  WHERE sweep = ? AND id = ?']
>>> for op in merge_rows(batch): op(conn)
>>> conn.execute("SELECT status, started, ended, config FROM trials").fetchall()
[('completed', 1.0, 2.0, '{"x": 1}')]
"""

from __future__ import annotations

import sqlite3

from .report_ops import Compact, Drop, Reports

__all__ = ["RowUpdate", "merge_rows", "PROGRESS"]

#: The columns a trial's reports set too (:class:`~.report_ops.Reports`' progress).
PROGRESS = frozenset({"value", "best", "step"})


class RowUpdate:
    """Columns of one trial's row to set: ``values`` outright, ``first`` only where it holds none."""

    __slots__ = ("key", "values", "first")

    def __init__(self, sweep: str, trial: int, values: dict, first: dict | None = None):
        self.key = (sweep, trial)
        self.values = values
        self.first = first or {}

    def merged(self, later: RowUpdate) -> RowUpdate:
        """This update then ``later``, as one (what the two run in turn would leave)."""
        values, first = dict(self.values), dict(self.first)
        for column, value in later.values.items():
            values[column] = value
            first.pop(column, None)
        for column, value in later.first.items():
            if column in values:
                if values[column] is None:  # COALESCE(column, value) after a NULL set
                    values[column] = value
            elif first.get(column) is None:
                first[column] = value
        return RowUpdate(*self.key, values, first)

    def sql(self) -> str:
        """The ``UPDATE`` statement (its columns in order: those set, then those kept first)."""
        sets = [f"{c} = ?" for c in self.values] + [f"{c} = COALESCE({c}, ?)" for c in self.first]
        return f"UPDATE trials SET {', '.join(sets)} WHERE sweep = ? AND id = ?"

    def __call__(self, conn: sqlite3.Connection) -> None:
        conn.execute(self.sql(), (*self.values.values(), *self.first.values(), *self.key))


def merge_rows(batch: list) -> list:
    """``batch`` with each trial's :class:`RowUpdate`\\ s merged into one, in the place of its last.

    Moving a trial's earlier update to its last one's place must not reorder
    it against a write of the same columns: a trial's run of merging ends at
    its :class:`~.report_ops.Reports` that set progress when the update holds
    some (its packs' writes touch no row), and every run ends at any other
    write (raw SQL, an op that reads the trials, such as retention's).
    """
    out: list = []
    runs: dict[tuple, int] = {}  # trial -> where its merged update is in ``out``
    for op in batch:
        if isinstance(op, RowUpdate):
            at = runs.get(op.key)
            if at is not None:
                op, out[at] = out[at].merged(op), None
            runs[op.key] = len(out)
        elif isinstance(op, Reports):
            at = runs.get(op.key)
            if at is not None and op.progress is not None and PROGRESS.intersection(out[at].values):
                runs.pop(op.key)
        elif not isinstance(op, (Drop, Compact)):  # (those write a trial's packs, no row)
            runs.clear()
        out.append(op)
    return [op for op in out if op is not None]
