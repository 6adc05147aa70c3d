"""A rank's checkpoint at a location: rank 0 writes it there, every rank reads it back there.

A trainer on Dask workers checkpoints without its state passing through the
client (``trial.checkpoint(trainer)``): :func:`write_state` runs on rank 0's
worker, encodes its model and optimizer (all ranks hold the same) with the
extras the client sent (steps, shares) in the safe format
(:mod:`..state_file`), and writes it to the
:class:`~labkit.checkpoints.CheckpointLocation`; only the
:class:`~labkit.checkpoints.CheckpointRef` goes back.  :func:`read_state`
runs on every rank at once: each reads and decodes the checkpoint itself, the
ranks agree over their process group that every one of them has it, and only
then does each load it, so a rank that cannot read the location leaves every
replica as it was.
"""

from __future__ import annotations

import torch

from ...checkpoints import CheckpointLocation, CheckpointRef
from ...errors import LabkitError
from ..state_file import decode_state, encode_state
from .lifecycle import to_cpu
from .rank import RANKS, rank_error

__all__ = ["write_state", "read_state"]


def write_state(
    gid: str, location: CheckpointLocation, key: str, step, extra: dict
) -> CheckpointRef:
    """Encode this worker's rank of ``gid`` (with ``extra``) and write it under ``key``."""
    rank = RANKS[gid]
    try:
        state = {
            "model": to_cpu(rank.model.state_dict(), clone=False),
            "optimizer": to_cpu(rank.optimizer.state_dict(), clone=False),
            **extra,
        }
        blob = encode_state(state, f"replica {rank.rank}")
        del state  # the encoded bytes are all that is needed now (a large model: memory)
        return location.write(key, blob, step)
    except Exception as exc:
        raise _located(exc, rank) from None


def read_state(gid: str, location: CheckpointLocation, ref: CheckpointRef) -> dict | None:
    """Read ``ref`` from ``location`` here and load it once every rank has read it; its extras
    (None, nothing loaded, where a peer could not read it: that peer raises why)."""
    rank = RANKS[gid]
    state, error = None, None
    try:
        state = decode_state(location.read(ref), location.url.rstrip("/") + "/" + ref.key)
    except Exception as exc:  # told to the peers first: none may load while one cannot
        error = exc
    failed = torch.tensor([0.0 if error is None else 1.0], device=rank.device)
    if rank.group is not None:
        rank.group.all_reduce(failed)
    if error is not None:
        raise _located(error, rank) from None
    if failed.item() or state is None:  # a peer raises why: that is the call's error
        return None
    try:
        rank.model.load_state_dict(state["model"])
        rank.optimizer.load_state_dict(state["optimizer"])
    except Exception as exc:
        raise _located(exc, rank) from None
    rank.steps = int(state.get("steps") or 0)
    rank.commit = rank.earlier = None  # a fit goes on from here, never back before it
    return {k: v for k, v in state.items() if k not in ("model", "optimizer")}


def _located(exc: BaseException, rank) -> LabkitError:
    """``exc`` as a labkit error naming the replica and its worker."""
    return rank_error(exc, rank.rank, rank.name).locate(worker=rank.name)
