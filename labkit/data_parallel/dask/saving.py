"""A replica group's checkpoints written and read by its ranks, never through the client.

:func:`write_state` has rank 0 encode and write the group's state to a
:class:`~labkit.checkpoints.CheckpointLocation` on its worker
(:func:`..worker.saving.write_state`): what comes back to the client is the
:class:`~labkit.checkpoints.CheckpointRef`.  :func:`read_state` has every rank
read it from the location on its own worker and load it, once all have it
(:func:`..worker.saving.read_state`); what comes back is the small extras
(steps, shares).  Errors name the replica and its worker; the location's own
(a :class:`~labkit.errors.StorageError`) name it too.
"""

from __future__ import annotations

from ...checkpoints import CheckpointLocation, CheckpointRef
from ...errors import InputError
from ..worker import saving

__all__ = ["write_state", "read_state"]


def write_state(group, location: CheckpointLocation, key: str, step, extra: dict) -> CheckpointRef:
    """Rank 0 of ``group`` writes the state (with ``extra``) under ``key``: its reference."""
    __tracebackhide__ = True
    group.check_open()
    with group.tasks.call("checkpoint"):
        future = group.tasks.submit(0, saving.write_state, group.gid, location, key, step, extra)
        return group.tasks.run([future], "checkpoint", ranks=[0])[0]


def read_state(group, location: CheckpointLocation, ref: CheckpointRef) -> dict:
    """Every rank of ``group`` reads ``ref`` from ``location`` and loads it; the extras."""
    __tracebackhide__ = True
    group.check_open()
    with group.tasks.call("restore"):
        ranks = range(len(group.names))
        futures = [
            group.tasks.submit(r, saving.read_state, group.gid, location, ref) for r in ranks
        ]
        extras = group.tasks.run(futures, "restore", collective=True)  # a rank's error raises
    if extras[0] is None:
        raise InputError(f"no replica loaded the checkpoint {ref.key}: a replica could not read it")
    return extras[0]
