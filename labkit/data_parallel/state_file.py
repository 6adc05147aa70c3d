"""A trainer's state as one checkpoint in labkit's safe format, encoded where the state is.

A :class:`~labkit.data_parallel.trainer.DataParallelTrainer` checkpoint is the
mapping :meth:`~labkit.data_parallel.trainer.DataParallelTrainer.state_dict`
returns (``model``, ``optimizer``, ``steps``, ``shares``, ``bucket_shares``)
in the safe format of :mod:`labkit.checkpoints`, the one ``trial.checkpoint``
writes: loading it runs no code named in it, and a decoded checkpoint is a
plain dict that ``model.load_state_dict(state["model"])`` or
``trainer.load_state_dict(state)`` takes.  On Dask workers rank 0 encodes it
(:mod:`.worker.saving`), on threads this process does.

Examples
--------
>>> import torch
>>> model = torch.nn.Linear(2, 1)
>>> state = {"model": model.state_dict(), "optimizer": {"state": {}, "param_groups": []}}
>>> decoded = decode_state(encode_state(state, "a trainer"), "<memory>")
>>> sorted(decoded["model"]), decoded["optimizer"]
(['bias', 'weight'], {'state': {}, 'param_groups': []})
"""

from __future__ import annotations

import io

from ..checkpoints import Allowed, Encoder, read_snapshot, write_snapshot
from ..errors import InputError, LabkitError

__all__ = ["encode_state", "decode_state", "EXTRA_KEYS"]

#: What a trainer's checkpoint holds beside the model's and the optimizer's state.
EXTRA_KEYS = ("steps", "shares", "bucket_shares")

#: Said with a refusal: what a trainer's checkpoint can hold.
ADVICE = (
    "a trainer's checkpoint holds its model's and optimizer's state dicts (tensors, "
    "numbers, strings); an optimizer whose state holds other objects cannot be checkpointed"
)


def encode_state(state: dict, who: str) -> bytes:
    """``state`` (``model``, ``optimizer`` and the extras) in the safe checkpoint format."""
    buffer = io.BytesIO()
    try:
        write_snapshot(state, buffer, "checkpoint", Encoder(Allowed(None), ADVICE))
    except LabkitError as err:
        raise InputError(f"the checkpoint of {who} cannot hold its state: {err.message}") from None
    return buffer.getvalue()


def decode_state(blob: bytes, where: str) -> dict:
    """The trainer's state in ``blob`` (read from ``where``); loading runs no code named in it."""
    state = read_snapshot(io.BytesIO(blob), where, root="checkpoint")
    if not isinstance(state, dict) or not {"model", "optimizer"} <= set(state):
        raise InputError(
            "the checkpoint is not a trainer's (it holds no model and optimizer state); "
            "a trainer restores only what a trainer's write_checkpoint wrote",
            path=where,
        )
    return state
