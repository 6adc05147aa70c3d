"""The trainer's state: read and loaded here, or checkpointed to a location where it lives.

``state_dict`` and ``load_state_dict`` carry the state through this process
(from rank 0 on Dask workers).  A checkpoint does not: on a group that
:class:`~labkit.data_parallel.replica_group.SavesOnRanks` (Dask workers) rank
0 writes it to the :class:`~labkit.checkpoints.CheckpointLocation` and every
rank reads it back from there, and only the
:class:`~labkit.checkpoints.CheckpointRef` and the extras (steps, shares)
travel.  On threads the state is in this process anyway: it is encoded and
written here.  Either way the file is the safe format of :mod:`..state_file`,
and the user's model holds what the replicas hold after a restore, as after a
fit (:mod:`.model_sync`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from ...checkpoints import CheckpointLocation, CheckpointRef
from ...constraints import InstanceOf, check_arguments
from ..replica_group import SavesOnRanks
from ..state_file import decode_state, encode_state
from .model_sync import ModelSync
from .one_call import OneCall
from .stepper import Stepper

__all__ = ["TrainerState"]

#: What a checkpoint's arguments may be.
_RULES = {
    "location": [InstanceOf(CheckpointLocation, "a labkit.checkpoints.CheckpointLocation")],
    "ref": [InstanceOf(CheckpointRef, "a labkit.checkpoints.CheckpointRef")],
}


class TrainerState:
    """A trainer's state in and out: ``state_dict``, ``load_state_dict``, checkpoints."""

    def __init__(
        self, stepper: Stepper, sync: ModelSync, calls: OneCall, check_open: Callable[[], None]
    ):
        self.stepper, self.sync, self.calls, self.check_open = stepper, sync, calls, check_open
        group = stepper.group
        #: the group, where its ranks write and read checkpoints themselves (asked once)
        self.ranks: SavesOnRanks | None = group if isinstance(group, SavesOnRanks) else None

    def extras(self) -> dict:
        """What a checkpoint holds beside the model and the optimizer: steps and shares."""
        loads = self.stepper.loads
        return {
            "shares": loads.shares(),
            "steps": self.stepper.steps,
            "bucket_shares": loads.bucket_shares,
        }

    def state_dict(self) -> dict:
        """The model's and the optimizer's state, and the extras; a snapshot."""
        self.check_open()
        state = self.stepper.group.state_dict()
        # a snapshot: live tensors would change with the next step (and be shared on load)
        return copy.deepcopy(dict(state, **self.extras()))

    def load_state_dict(self, state: dict) -> None:
        """``state`` into every replica and the model; the extras into the trainer."""
        self.check_open()
        with self.calls.held("load_state_dict"):
            self.stepper.group.load_state_dict(state)
        self.sync.model.load_state_dict(state["model"])
        self.sync.optimizer.load_state_dict(state["optimizer"])
        self.sync.loaded()
        self.load_extras(state)

    def load_extras(self, state: dict) -> None:
        """The step count and the shares (those of as many replicas as there are now)."""
        shares, names = state.get("shares"), self.stepper.names
        same = shares is not None and len(shares) == len(names)
        buckets = {
            k: v for k, v in (state.get("bucket_shares") or {}).items() if len(v) == len(names)
        }
        self.stepper.loads.load(shares if same else None, buckets)
        self.stepper.steps = int(state.get("steps", self.stepper.steps) or 0)

    def write(self, location: CheckpointLocation, key: str, step: Any) -> CheckpointRef:
        """The state written under ``key`` of ``location`` where it lives; its reference."""
        check_arguments(_RULES, "write_checkpoint", location=location)
        self.check_open()
        with self.calls.held("write_checkpoint"):
            if self.ranks is not None:
                return self.ranks.write_state(location, key, step, self.extras())
            state = dict(self.stepper.group.state_dict(), **self.extras())
            return location.write(key, encode_state(state, "the trainer"), step)

    def read(self, location: CheckpointLocation, ref: CheckpointRef) -> None:
        """The state ``ref`` names loaded into every replica (and the model)."""
        check_arguments(_RULES, "read_checkpoint", location=location, ref=ref)
        self.check_open()
        if self.ranks is None:  # the state lives here: read and loaded here
            where = location.url.rstrip("/") + "/" + ref.key
            self.load_state_dict(decode_state(location.read(ref), where))
            return
        # every rank reads it where it runs; the model then copies the ranks' state, as
        # after a fit (sync_model=False: it is left stale instead)
        with self.calls.held("read_checkpoint"), self.sync.call(trains=True):
            extras = self.ranks.read_state(location, ref)
        self.load_extras(extras)
