"""What a sweep returns: :class:`SweepResult`, one :class:`~.record.TrialRecord` a trial.

``best`` is the record with the best final value of the metric among trials
that completed or were stopped early; ``extend(n)`` runs more trials of the
sweep, through the sweep that made the result (it never imports the sweep:
the sweep hands it how).  See :mod:`.result` for the public face.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..constraints import Interval, check_argument
from ..errors import InputError
from .objectives.front import feasible, pareto_records
from .trials.record import TrialRecord
from .trials.status import RANKED

__all__ = ["SweepResult", "Again"]

#: How ``result.extend`` runs more trials: ``again(total, fn, scheduler, space, options)``.
Again = Callable[[int, Any, Any, Any, dict], "SweepResult"]


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
    _again: Again | None = field(default=None, repr=False, compare=False)  # runs more trials
    #: population-based training's exploits, oldest first (:class:`~.exploits.ExploitRecord`:
    #: ``trial``, ``step``, ``donor``, ``donor_step``, ``before``, ``after``, ``time``)
    exploits: list = field(default_factory=list, repr=False, compare=False)
    #: the Optuna study that mirrored the sweep when a sampler drove it (in the kernel
    #: that ran it; None otherwise, and for a sweep read back): read it, never ask or tell it
    study: Any = field(default=None, repr=False, compare=False)
    #: the workers trials ran on, as the cluster named them, kept with the sweep:
    #: ``{address: {"name": ..., "nthreads": ...}}`` (a read-back board names them so)
    workers: dict = field(default_factory=dict, repr=False, compare=False)
    #: every objective's name and mode, in order (``metric`` and ``mode`` are the first's);
    #: one each for a single metric.  Several: ``pareto`` is the front, ``best`` refuses
    objectives: tuple = ()
    modes: tuple = ()

    def __post_init__(self) -> None:
        if not self.objectives:
            self.objectives, self.modes = (self.metric,), (self.mode,)

    @property
    def several(self) -> bool:
        """Whether the sweep has several objectives (a Pareto front, no single best)."""
        return len(self.objectives) > 1

    @property
    def pareto(self) -> list[TrialRecord]:
        """The non-dominated trials (exact), in id order: completed or stopped, every
        objective's final value finite, feasible; one trial's best for a single metric."""
        if not self.several:
            best = self.best
            return [] if best is None else [best]
        return pareto_records(self.trials, self.objectives, self.modes)

    @property
    def worker_names(self) -> dict:
        """``{address: name}``: each worker a trial ran on, by the name its cluster gave it."""
        return {a: w.get("name") for a, w in self.workers.items()}

    @property
    def best(self) -> TrialRecord | None:
        """The completed or stopped trial with the best final value (None before any).

        A sweep of several objectives has no single best: an InputError pointing to
        ``result.pareto``.  An infeasible trial (a constraint > 0) is never the best.
        """
        if self.several:
            raise InputError(
                f"the sweep {self.name!r} has {len(self.objectives)} objectives "
                f"({', '.join(map(repr, self.objectives))}): no single trial is best; "
                "result.pareto lists the non-dominated trials",
                argument="metric",
            )
        ranked = [
            t
            for t in self.trials
            if t.status in RANKED
            and t.value is not None
            and not math.isnan(t.value)
            and feasible(t)
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
                **{n: (t.objectives or {}).get(n) for n in self.objectives[1:]},
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

    def extend(self, n: int, fn=None, scheduler=None, space=None, **options) -> SweepResult:
        """Run ``n`` more trials of this sweep (new configurations drawn as if asked from the start).

        In the kernel that ran the sweep, ``fn`` and the space are known; for a
        sweep read back with :func:`load_sweep`, give ``fn`` (and ``space`` when
        the stored one holds values that are not plain data).  Other keywords
        go to ``lk.sweep`` (``early_stop``, ``wait``, ...).
        """
        check_argument("n", n, [Interval(int, 1, name="an int n >= 1")], "extend")
        if self._again is None:
            raise InputError("this result runs no more trials (it was not made by a sweep)")
        return self._again(len(self.trials) + n, fn, scheduler, space, options)

    def __repr__(self):
        counts = ", ".join(f"{v} {k}" for k, v in sorted(self.counts().items()))
        if self.several:
            return (
                f"<labkit SweepResult {self.name!r}: {counts}; objectives "
                f"{', '.join(self.objectives)}; {len(self.pareto)} on the Pareto front>"
            )
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
