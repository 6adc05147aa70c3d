"""A sweep's checkpoints: where they go, checked from every worker, and loaded back afterwards.

:func:`place_of` chooses the sweep's location: ``checkpoints=`` (a folder or
any fsspec URL, with ``storage_options``), else the one a resumed sweep
stored, else the folder ``<store>-checkpoints`` beside the store, else
(``store=None``) a temporary folder that the sweep removes when it ends.
:func:`probe_workers` writes, reads back and deletes a small file from each
worker before any trial runs: a worker that cannot is a
:class:`~labkit.errors.StorageError` naming the location and the worker.
:class:`SavedCheckpoints` is how a result's record loads its trial's model
(``result.best.checkpoint()``), in any process that reaches the location.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from ..checkpoints.location import CheckpointLocation
from ..errors import InputError, StorageError
from .store.checkpoints import decode
from .store.database import Store
from .store.kept import read_old, ref_of
from .trials.checkpoint_place import CheckpointPlace, sweep_prefix

__all__ = ["place_of", "probe_workers", "probe_here", "SavedCheckpoints", "with_saved"]


def place_of(config: Any, store: Store, name: str, stored: dict | None) -> tuple:
    """``(place, temporary, given)``: the sweep's CheckpointPlace, whether to remove it at the
    end, and whether it was given (kept with the sweep: the default folder beside the store
    is found from the store's path, so a store moved with its folder still finds it).

    ``stored`` is a resumed sweep's settings (its location, when none is given).
    """
    url, temporary = config.checkpoints, False
    if url is None and stored:
        url = stored.get("checkpoints")
    given = url is not None
    if url is None and store.path is not None:
        url = f"{store.path}-checkpoints"
    if url is None:
        url, temporary = tempfile.mkdtemp(prefix="labkit-sweep-checkpoints-"), True
    url = os.fspath(url)
    if "://" not in url:
        url = os.path.abspath(url)  # a worker in another folder writes to the same place
    location = CheckpointLocation(url, config.storage_options)
    return CheckpointPlace(location, sweep_prefix(name)), temporary, given


def probe_here(location: CheckpointLocation) -> str | None:
    """On a worker (``client.run``): why the location cannot be used from here, or None."""
    where = "this process"
    try:
        from distributed import get_worker

        where = f"worker {get_worker().address}"
    except (ImportError, ValueError):  # not on a Dask worker: the client's own threads
        pass
    try:
        location.probe(where)
    except StorageError as err:
        return err.message
    return None


def probe_workers(scheduler: Any, location: CheckpointLocation) -> None:
    """Check the location from every worker now; a StorageError naming it and the worker."""
    answers = scheduler.run_on_workers(probe_here, location)
    for worker, why in sorted(answers.items()):
        if why is not None:
            raise StorageError(why, path=location.url, worker=str(worker))


def with_saved(result: Any, store: str | None, url: str | None, options: dict | None) -> Any:
    """``result`` whose records load their checkpoints (``record.checkpoint()``)."""
    saved = SavedCheckpoints(store, result.name, url, options)
    result.trials = [t.replace(saved=saved) for t in result.trials]
    return result


class SavedCheckpoints:
    """A sweep's kept checkpoints, read back from its store: a record's ``checkpoint()``."""

    def __init__(self, store: str | None, sweep: str, url: str | None, options: dict | None):
        self.store, self.sweep, self.url, self.options = store, sweep, url, options

    def __eq__(self, other: object) -> bool:
        # the live result's and the one read back name the same checkpoints
        return isinstance(other, SavedCheckpoints) and (self.store, self.sweep, self.url) == (
            other.store,
            other.sweep,
            other.url,
        )

    def __hash__(self) -> int:
        return hash((self.store, self.sweep, self.url))

    def __repr__(self) -> str:
        return f"<checkpoints of sweep {self.sweep!r} at {self.url}>"

    def load(self, trial: int, storage_options: dict | None = None) -> Any:
        """The decoded last checkpoint ``trial`` kept; a labkit error if none was kept."""
        if self.store is None:
            raise InputError(
                f"trial {trial}'s checkpoint was not kept: the sweep ran with store=None, so "
                "its checkpoints went to a temporary folder removed when it ended; give "
                "lk.sweep a store (or checkpoints=) to keep them",
                argument="store",
            )
        reader = Store(self.store, readonly=True)
        try:
            rows = reader.checkpoint_rows(self.sweep, trial)
            row = rows[0] if rows else None
            if row is not None and row["key"] is None and row["inline"]:
                data = reader.read(
                    "SELECT data FROM checkpoints WHERE sweep = ? AND trial = ?",
                    (self.sweep, trial),
                )[0]["data"]
                row["read_data"] = lambda: bytes(data)
        finally:
            reader.close()
        return self._decode(trial, row, storage_options)

    def _decode(self, trial: int, row: dict | None, storage_options: dict | None) -> Any:
        """The object ``row`` keeps (at the location, or in an old store itself)."""
        where = f"<checkpoint of trial {trial}>"
        if row is None:
            raise StorageError(
                f"trial {trial} of sweep {self.sweep!r} kept no checkpoint: it never called "
                "trial.checkpoint(...)",
                path=self.store,
            )
        if row["dropped"]:
            raise StorageError(
                f"trial {trial}'s checkpoint was not kept: {row['dropped']}", path=self.store
            )
        ref = ref_of(row)
        if ref is None:  # a store written before checkpoints went to a location
            return decode(read_old(row), where)
        options = self.options if storage_options is None else storage_options
        location = CheckpointLocation(str(self.url), options)
        return decode(location.read(ref), where)
