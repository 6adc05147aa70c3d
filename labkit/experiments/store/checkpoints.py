"""A trial's checkpoints as bytes in labkit's safe format (and an old store's files of them).

``trial.checkpoint(obj)`` encodes ``obj`` at once, where the trial runs, into
the safe checkpoint format of :mod:`labkit.checkpoints` (JSON structure,
numpy arrays read without pickle, torch tensors read with
``weights_only=True``): loading one back runs no code named in it, and a
value the format cannot hold fails in the trial's own line.  The trial then
writes the bytes to the sweep's checkpoint location itself
(:mod:`labkit.checkpoints.location`); only a reference reaches the client.
Before issue 46 the bytes travelled to the client, which kept checkpoints up
to :data:`INLINE_BYTES` in the store's database and bigger ones in files
beside it: such a store is still read (:mod:`.kept`).

Examples
--------
>>> import numpy as np
>>> blob = encode({"epoch": 3, "w": np.arange(3)})
>>> decode(blob)["w"].tolist(), len(blob) < INLINE_BYTES
([0, 1, 2], True)
"""

from __future__ import annotations

import io
import os

from ...checkpoints import Allowed, Encoder, read_snapshot, write_snapshot
from ...errors import InputError, LabkitError, StorageError

__all__ = ["INLINE_BYTES", "encode", "encode_into", "decode", "write_bytes", "read_bytes"]

#: Before issue 46: checkpoints up to this size lived in the store's database, bigger in files.
INLINE_BYTES = 256 * 1024


#: What to do instead, said with a checkpoint's every refusal.
ADVICE = (
    "checkpoint plain data instead: numbers, strings, lists, dicts, numpy arrays, torch "
    "tensors and state dicts (model.state_dict(), optimizer.state_dict()), or your "
    "object's fields (dataclasses.asdict(obj)), and rebuild the object from them after "
    "trial.restore()"
)


def encode(obj, who: str = "the trial") -> bytes:
    """``obj`` in the safe checkpoint format, refused now if ``trial.restore()`` could not
    load it back; the InputError names ``who`` and the field (``checkpoint['opt'].lr``)."""
    buffer = io.BytesIO()
    encode_into(obj, buffer, who)
    return buffer.getvalue()


def encode_into(obj, fh, who: str = "the trial") -> None:
    """:func:`encode` written straight to the binary stream ``fh`` (no copy of the whole).

    The object is checked before the first byte is written.
    """
    try:
        # the loads of trial.restore() allow what this process allows now
        write_snapshot(obj, fh, "checkpoint", Encoder(Allowed(None), ADVICE))
    except LabkitError as err:
        advice = "" if ADVICE in err.message else f"; {ADVICE}"
        raise InputError(
            f"trial.checkpoint() of {who} cannot store this object: {err.message}{advice}",
            argument="obj",
        ) from None


def decode(blob: bytes, where: str = "<checkpoint>"):
    """The object in ``blob``; loading runs no code named in it."""
    return read_snapshot(io.BytesIO(blob), where, root="checkpoint")


def write_bytes(path: str, blob: bytes) -> None:
    """Write ``blob`` to ``path`` atomically (a temp file beside it, then a rename)."""
    folder = os.path.dirname(os.path.abspath(path))
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(folder, exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise StorageError.of(exc, "writing a checkpoint", path) from exc


def read_bytes(path: str) -> bytes:
    """The bytes of the checkpoint file ``path``."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise StorageError.of(exc, "reading a checkpoint", path) from exc
