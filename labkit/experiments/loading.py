"""``lk.load_sweep``: a sweep read back from its store, in any kernel; extended with its function."""

from __future__ import annotations

import json
import os
from typing import Any

from ..errors import InputError
from .checkpointing import with_saved
from .store.database import Store
from .store.workers import workers_of
from .sweep import extend_stored
from .sweep_result import SweepResult

__all__ = ["load_sweep", "result_from_store"]


def load_sweep(path: Any, name: str | None = None) -> SweepResult:
    """The sweep ``name`` (the newest when not given) read back from the store at ``path``.

    ``result.trials[i].checkpoint()`` loads a trial's kept checkpoint from the
    sweep's location (``checkpoint(storage_options=...)`` for object storage).
    """
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


def result_from_store(store: Store, row: dict) -> SweepResult:
    """The result of the sweep whose store row is ``row`` (``extend`` needs its function)."""
    space = json.loads(row["space"]).get("space", {})
    result = SweepResult(
        row["name"],
        row["metric"],
        row["mode"],
        row["seed"],
        space,
        store.records(row["name"]),
        store.path,
        row["settings"].get("early_stop"),
        _again=extend_stored(store.path, row, space),
        exploits=store.exploits(row["name"]),
        workers=workers_of(row["settings"]),
        objectives=tuple(n for n, _ in row["objectives"]),
        modes=tuple(m for _, m in row["objectives"]),
    )
    url = row["settings"].get("checkpoints") or (store.path and f"{store.path}-checkpoints")
    return with_saved(result, store.path, url, None)
