"""``labkit sweeps STORE``: the sweeps a sweep store keeps, listed without a notebook.

As ``optuna-dashboard sqlite:///...`` and ``mlflow ui`` do for theirs: each
sweep's name, metric, trials by status, best trial and value (the size of the
Pareto front for a sweep of several objectives), when it started
and when it was last written (:mod:`labkit.experiments.store.catalog`), as an
aligned table or ``--json``.  The store is opened read-only; a missing,
corrupt or foreign file is said in one line naming it (exit status 1).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["sweeps_parser", "run_sweeps"]


def sweeps_parser(commands: Any) -> argparse.ArgumentParser:
    """``labkit sweeps``'s parser, added to the ``labkit`` command's ``commands``."""
    sweeps: argparse.ArgumentParser = commands.add_parser(
        "sweeps",
        help="list the sweeps of a sweep store (trials by status, the best, checkpoints kept, when)",
        description="List the sweeps kept in the sweep store STORE (the SQLite file lk.sweep "
        "writes, experiments.db by default): each sweep's name, metric, trials by status, "
        "its best trial and value (several objectives: the size of its Pareto front), the bytes of checkpoints it keeps (at its checkpoint location), when it started and when it was last written. The store "
        "is opened read-only: one a running sweep writes, or one on a read-only disk, lists "
        "as it is.",
        epilog="--json prints a list of objects: name, metric, mode, trials, counts "
        "({status: n}), best ({trial, value} or null), front (the size of the Pareto front of "
        "a sweep of several objectives, whose metric and mode are lists; null otherwise), "
        "moves (executions that ended as their worker left gracefully: no failures; a MOVES "
        "column beside FAILED in the table when any), "
        "checkpoint_bytes (the checkpoints kept, "
        "after retention), started and last_written (Unix seconds).",
    )
    sweeps.add_argument("store", metavar="STORE", help="the sweep store, e.g. experiments.db")
    sweeps.add_argument(
        "--json", action="store_true", help="print JSON instead of a table (for scripts)"
    )
    return sweeps


def run_sweeps(args: argparse.Namespace) -> int:
    """``labkit sweeps STORE``: the store's sweeps as a table (or JSON); 1 on a store error."""
    from .errors import LabkitError
    from .experiments.store.catalog import format_summaries, summaries, summaries_json

    try:
        rows = summaries(args.store)
    except LabkitError as err:  # missing, corrupt, foreign or newer: said, no traceback
        print(f"labkit sweeps: {err}", file=sys.stderr)
        return 1
    if args.json:
        print(summaries_json(rows))
    elif rows:
        print(format_summaries(rows))
    else:
        print(f"no sweeps in {args.store}")
    return 0
