"""Where a sweep's checkpoints go: its location, each trial's keys there, and what travels.

A :class:`CheckpointPlace` is the sweep's
:class:`~labkit.checkpoints.location.CheckpointLocation` and the prefix of
the sweep's keys under it; it travels inside the trial function
(:class:`PlacedFunction`) to wherever trials run, so ``trial.checkpoint``
writes there from the trial's own process and only a
:class:`~labkit.checkpoints.location.CheckpointRef` goes back.  A reference
crosses Dask's event stream and the scheduler's metadata as a plain dict
(:func:`ref_fields`, :func:`as_ref`).

Examples
--------
>>> place = CheckpointPlace(CheckpointLocation("/tmp/ck"), sweep_prefix("my sweep"))
>>> place.trial_prefix(3).startswith("my_sweep-"), place.owns(place.key(3, 0, 1, 7), 3)
(True, True)
>>> as_ref(ref_fields(CheckpointRef("a/b.lkc", 2, 10, "ff")))
CheckpointRef(key='a/b.lkc', step=2, nbytes=10, digest='ff')
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import re
import shutil
import tempfile
import threading
import uuid
from typing import Any

from ...checkpoints.location import CheckpointLocation, CheckpointRef

__all__ = [
    "CheckpointPlace",
    "PlacedFunction",
    "sweep_prefix",
    "as_ref",
    "ref_fields",
    "scratch_place",
    "CheckpointLocation",
    "CheckpointRef",
]


def sweep_prefix(name: str) -> str:
    """The folder of a sweep's checkpoints under its location: its name, made safe for paths."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:60]
    if safe == name:
        return name
    return f"{safe}-{hashlib.sha1(name.encode()).hexdigest()[:8]}"  # two names never meet


@dataclasses.dataclass(frozen=True)
class CheckpointPlace:
    """A sweep's checkpoint location and the prefix of its keys there."""

    location: CheckpointLocation
    prefix: str

    def trial_prefix(self, trial: int) -> str:
        """The folder of ``trial``'s checkpoints (ends with ``/``)."""
        return f"{self.prefix}/trial-{trial}/"

    def key(self, trial: int, attempt: int, n: int, step: Any) -> str:
        """A new key for ``trial``'s ``n``-th checkpoint of ``attempt``, taken at ``step``."""
        shown = "none" if step is None else re.sub(r"[^0-9A-Za-z.+-]", "_", str(step))
        return f"{self.trial_prefix(trial)}{attempt}.{n}-{shown}-{uuid.uuid4().hex[:8]}.lkc"

    def owns(self, key: str, trial: int) -> bool:
        """Whether ``key`` is one of ``trial``'s own (not a donor's it was handed)."""
        return key.startswith(self.trial_prefix(trial))


class PlacedFunction:
    """The trial function as it travels: the user's ``fn`` and where its checkpoints go.

    Called as ``fn(config, trial)``, it tells the trial its place first, so
    ``trial.checkpoint`` writes there from whatever process runs it.
    """

    def __init__(self, fn: Any, place: CheckpointPlace):
        self.fn, self.place = fn, place
        self.__name__ = getattr(fn, "__name__", "fn")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)

    def __call__(self, config: dict, trial: Any) -> Any:
        trial.use(self.place)
        return self.fn(config, trial)

    def __repr__(self) -> str:
        return f"<{self.__name__} checkpointing to {self.place.location.url}>"


def ref_fields(ref: CheckpointRef | None) -> dict | None:
    """``ref`` as plain data (for Dask's event stream and the scheduler's metadata)."""
    return None if ref is None else dataclasses.asdict(ref)


def as_ref(value: Any) -> CheckpointRef | None:
    """A reference from one, from its plain data (:func:`ref_fields`), or None."""
    if value is None or isinstance(value, CheckpointRef):
        return value
    if isinstance(value, dict):
        return CheckpointRef(value["key"], value["step"], value["nbytes"], value["digest"])
    raise TypeError(f"not a checkpoint reference: {type(value).__name__}")


_SCRATCH: list[CheckpointPlace] = []
_SCRATCH_LOCK = threading.Lock()


def scratch_place() -> CheckpointPlace:
    """A temporary folder of this process, for a trial made by hand (removed at exit)."""
    with _SCRATCH_LOCK:
        if not _SCRATCH:
            folder = tempfile.mkdtemp(prefix="labkit-trial-checkpoints-")
            atexit.register(shutil.rmtree, folder, True)
            _SCRATCH.append(CheckpointPlace(CheckpointLocation(folder), "by-hand"))
        return _SCRATCH[0]
