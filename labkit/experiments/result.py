"""What a sweep returns, and reads back from its store: trial records and comparisons.

A :class:`SweepResult` holds one :class:`TrialRecord` a trial; ``best`` is the
record with the best final value of the metric among trials that completed
or were stopped early.  ``lk.load_sweep(path, name)`` builds the same result
from the store, in any kernel.

Examples
--------
>>> a = TrialRecord(0, {"lr": 0.1}, "completed", {"acc": 0.9}, [], 0.9, 0.9, 4)
>>> b = TrialRecord(1, {"lr": 0.01}, "stopped", {"acc": 0.7}, [], 0.7, 0.7, 1, reason="ASHA")
>>> result = SweepResult("demo", "acc", "max", 0, {}, [a, b])
>>> result.best.id, [row["status"] for row in result.table()]
(0, ['completed', 'stopped'])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import InputError

__all__ = ["TrialRecord", "SweepResult", "load_sweep"]

#: Statuses whose final value competes for ``best``.
RANKED = ("completed", "stopped")


def trial_row(trial, with_history: bool = False) -> dict:
    """A trial, live (the engine's) or recorded, as one plain row: a board's table row.

    >>> record = TrialRecord(3, {"lr": 0.1}, "completed", {"loss": 0.5}, [(0, {"loss": 0.5}, 0.0)])
    >>> trial_row(record)["config"], "history" in trial_row(record)
    ({'lr': 0.1}, False)
    """
    out = {
        "id": trial.id,
        "config": dict(trial.config),
        "status": trial.status,
        "value": trial.value,
        "best": trial.best,
        "step": trial.step,
        "attempts": trial.attempts,
        "worker": trial.worker,
        "reason": trial.reason,
        "error": trial.error,
        "traceback": trial.traceback,
        "metrics": trial.metrics,
        "started": trial.started,
        "ended": trial.ended,
    }
    if with_history:
        out["history"] = [(s, dict(m), t) for s, m, t in trial.history]
    return out


@dataclass(frozen=True)
class TrialRecord:
    """One trial: ``id``, ``config``, ``status``, final ``metrics``, its ``history`` of reports.

    ``history`` lists ``(step, metrics, time)`` in report order; ``value`` is
    the metric's final value, ``best`` its best value reported; ``error`` and
    ``traceback`` say why a trial failed, ``reason`` why one was stopped.
    """

    id: int
    config: dict
    status: str
    metrics: dict | None
    history: list
    value: float | None = None
    best: float | None = None
    step: int | float | None = None
    attempts: int = 1
    worker: str | None = None
    error: str | None = None
    traceback: str | None = None
    reason: str | None = None
    started: float | None = None
    ended: float | None = None

    def row(self) -> dict:
        """The record as a plain row, as a live sweep's snapshot gives it (with its history)."""
        return trial_row(self, with_history=True)

    def curve(self, metric: str) -> tuple[list, list]:
        """``(steps, values)`` of ``metric`` over the history (for a plot)."""
        points = [(s, m[metric]) for s, m, _ in self.history if metric in m]
        return [p[0] for p in points], [p[1] for p in points]

    @property
    def seconds(self) -> float | None:
        """How long the trial ran (wall time), when it ended."""
        return None if self.started is None or self.ended is None else self.ended - self.started

    @classmethod
    def of(cls, row: dict, history: list) -> "TrialRecord":
        """A record from a state's or the store's row."""
        return cls(
            row["id"],
            row["config"],
            row["status"],
            row.get("metrics"),
            history,
            row.get("value"),
            row.get("best"),
            row.get("step"),
            row.get("attempts") or 0,
            row.get("worker"),
            row.get("error"),
            row.get("traceback"),
            row.get("reason"),
            row.get("started"),
            row.get("ended"),
        )


@dataclass
class SweepResult:
    """The trials of a sweep: ``trials``, ``best``, ``table()``; ``extend(n)`` runs more."""

    name: str
    metric: str
    mode: str
    seed: int | None
    space: dict
    trials: list
    store: str | None = None
    rule: str | None = None
    _again: object = field(default=None, repr=False, compare=False)  # runs more trials

    @property
    def best(self) -> TrialRecord | None:
        """The completed or stopped trial with the best final value (None before any)."""
        ranked = [
            t
            for t in self.trials
            if t.status in RANKED and t.value is not None and not math.isnan(t.value)
        ]
        if not ranked:
            return None
        sign = 1 if self.mode == "max" else -1
        return max(ranked, key=lambda t: (sign * t.value, -t.id))

    def by_status(self, status: str) -> list[TrialRecord]:
        """The trials of one status (``"completed"``, ``"stopped"``, ``"failed"``, ...)."""
        return [t for t in self.trials if t.status == status]

    def counts(self) -> dict[str, int]:
        """How many trials have each status."""
        out: dict[str, int] = {}
        for t in self.trials:
            out[t.status] = out.get(t.status, 0) + 1
        return out

    def table(self, sort: bool = False) -> list[dict]:
        """One plain row a trial: ``trial``, ``status``, each parameter, the metric, ...

        ``sort`` puts the best first (trials without a value last).
        """
        rows = []
        for t in self.trials:
            row = {
                "trial": t.id,
                "status": t.status,
                **t.config,
                self.metric: t.value,
                "best": t.best,
                "step": t.step,
                "attempts": t.attempts,
            }
            if t.reason or t.error:
                row["note"] = t.reason or t.error
            rows.append(row)
        if sort:
            sign = -1 if self.mode == "max" else 1
            rows.sort(
                key=lambda r: (
                    r[self.metric] is None or math.isnan(r[self.metric]),
                    sign * (r[self.metric] or 0.0),
                    r["trial"],
                )
            )
        return rows

    def format_table(self, limit: int | None = None, sort: bool = True) -> str:
        """The table as text, best first (the ``limit`` best rows)."""
        rows = self.table(sort=sort)[:limit]
        if not rows:
            return "(no trials)"
        columns = list(dict.fromkeys(k for r in rows for k in r if k != "note"))
        cells = [[_cell(r.get(c)) for c in columns] for r in rows]
        widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
        lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True))]
        lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
        return "\n".join(lines)

    def extend(self, n: int, fn=None, scheduler=None, space=None, **options) -> "SweepResult":
        """Run ``n`` more trials of this sweep (new configurations drawn as if asked from the start).

        In the kernel that ran the sweep, ``fn`` and the space are known; for a
        sweep read back with :func:`load_sweep`, give ``fn`` (and ``space`` when
        the stored one holds values that are not plain data).  Other keywords
        go to ``lk.sweep`` (``early_stop``, ``wait``, ...).
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InputError(f"extend(n) needs an int n >= 1, got {n!r}", argument="n")
        if self._again is not None and fn is None:
            return self._again(len(self.trials) + n, scheduler, space, options)
        if fn is None:
            raise InputError(
                "this sweep was read back from its store: give the trial "
                "function, result.extend(n, fn, scheduler=...)",
                argument="fn",
            )
        from .space import Space
        from .sweep import sweep

        if self.store is None:
            raise InputError(
                "the sweep kept its store in memory; extend it in the kernel that ran it",
                argument="store",
            )
        return sweep(
            fn,
            space if space is not None else Space.from_description(self.space),
            trials=len(self.trials) + n,
            metric=self.metric,
            mode=self.mode,
            scheduler=scheduler,
            seed=self.seed,
            store=self.store,
            name=self.name,
            resume=True,
            **options,
        )

    def __repr__(self):
        counts = ", ".join(f"{v} {k}" for k, v in sorted(self.counts().items()))
        best = self.best
        shown = (
            "none yet"
            if best is None
            else (f"trial {best.id} {self.metric}={_cell(best.value)} {best.config}")
        )
        return f"<labkit SweepResult {self.name!r}: {counts}; best {shown}>"


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def load_sweep(path, name: str | None = None) -> SweepResult:
    """The sweep ``name`` (the newest when not given) read back from the store at ``path``."""
    import os
    from .store import Store

    if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
        raise InputError(f"no sweep store at {path!r}", argument="path")
    store = Store(path, readonly=True)
    try:
        names = store.sweep_names()
        if name is None:
            if not names:
                raise InputError(f"the store {path} holds no sweep", argument="path")
            name = names[-1]
        row = store.sweep(name)
        if row is None:
            raise InputError(
                f"the store {path} holds no sweep named {name!r} (it holds "
                f"{', '.join(map(repr, names)) or 'none'})",
                argument="name",
            )
        return result_from_store(store, row)
    finally:
        store.close()


def result_from_store(store, row: dict) -> SweepResult:
    """The result of the sweep whose store row is ``row``."""
    import json

    reports = store.reports(row["name"])
    trials = [TrialRecord.of(t, reports.get(t["id"], [])) for t in store.trials(row["name"])]
    return SweepResult(
        row["name"],
        row["metric"],
        row["mode"],
        row["seed"],
        json.loads(row["space"]).get("space", {}),
        trials,
        store.path,
        row["settings"].get("early_stop"),
    )
