"""What a sweep returns, and reads back from its store: trial records and comparisons.

A :class:`SweepResult` holds one :class:`TrialRecord` a trial; ``best`` is the
record (:mod:`.record`) with the best final value of the metric among trials
that completed or were stopped early.  ``lk.load_sweep(path, name)``
(:mod:`.loading`) builds the same result from the store, in any kernel.
:class:`SweepResult` lives in :mod:`.sweep_result` (below the sweep), the
record in :mod:`.record`; this module is their public face.

Examples
--------
>>> a = TrialRecord(id=0, config={"lr": 0.1}, status="completed", metrics={"acc": 0.9},
...                 value=0.9, best=0.9, step=4)
>>> b = TrialRecord(id=1, config={"lr": 0.01}, status="stopped", metrics={"acc": 0.7},
...                 value=0.7, best=0.7, step=1, reason="ASHA")
>>> result = SweepResult("demo", "acc", "max", 0, {}, [a, b])
>>> result.best.id, [row["status"] for row in result.table()]
(0, ['completed', 'stopped'])
"""

from __future__ import annotations

from .loading import load_sweep, result_from_store
from .sweep_result import SweepResult
from .trials.record import TrialRecord

__all__ = ["TrialRecord", "SweepResult", "load_sweep", "result_from_store"]
