"""Safe checkpoint files: loading one runs no code named in it.

A checkpoint is a zip file holding ``meta.json`` (the flow's structure as
JSON: class names, plain attributes), ``arrays/<n>.npy`` (numpy arrays, read
with ``allow_pickle=False``) and, when the flow holds torch modules or
tensors, ``tensors.pt`` (a ``torch.save`` dict of tensors, read with
``torch.load(..., weights_only=True)``).  Classes are recreated only from an
allow-list: labkit's nodes and flows, torch's built-in layers, losses and
optimizers, and classes or functions the user allows, with ``Flow.load(path, allow=[MyNode])``
or once with :func:`allow_in_checkpoints`.

labkit's old checkpoints are pickle files.  Unpickling runs code the file
names, so they load only with ``trusted=True``; by default they are refused.

Examples
--------
>>> import io, numpy as np
>>> buffer = io.BytesIO()
>>> write_snapshot({"w": np.eye(2)}, buffer)
>>> read_snapshot(io.BytesIO(buffer.getvalue()), "<memory>")["w"].tolist()
[[1.0, 0.0], [0.0, 1.0]]
"""

from __future__ import annotations

import io
import json
import os
import pickle
import zipfile
from collections.abc import Callable
from typing import IO, Any

import numpy as np

from ..errors import InputError, LabkitError
from .allowed import Allowed
from .decoder import Decoder
from .encoder import Encoder

__all__ = ["write_snapshot", "read_snapshot", "load_checkpoint", "writer", "FORMATS"]

FORMAT, VERSION = "labkit-snapshot", 1
FORMATS = ("safe", "pickle")
META = "meta.json"
TENSORS = "tensors.pt"


# -- writing -------------------------------------------------------------------------


def write_snapshot(
    obj: object, fh: IO[bytes], root: str = "flow", encoder: Encoder | None = None
) -> None:
    """Write ``obj`` in the safe format to the binary file ``fh``.

    ``root`` names ``obj`` in errors (``flow['lock']``); ``encoder`` is an
    :class:`Encoder` with the caller's checks and advice.
    """
    writer(obj, "safe", root, encoder)(fh)


def writer(
    obj: object, format: str = "safe", root: str = "flow", encoder: Encoder | None = None
) -> Callable[[IO[bytes]], None]:
    """A function writing ``obj`` to a binary file; the safe format encodes ``obj`` now.

    So a value the format cannot store fails before any file is touched.
    """
    if format == "pickle":
        return lambda fh: pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)
    if format != "safe":
        raise InputError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    encoder = encoder if encoder is not None else Encoder()
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "root": encoder.encode(obj, root),
        "arrays": len(encoder.arrays),
    }
    text = json.dumps(meta)
    return lambda fh: _write_zip(fh, text, encoder)


def _write_zip(fh: IO[bytes], text: str, encoder: Encoder) -> None:
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        zf.writestr(META, text)
        for number, array in enumerate(encoder.arrays):
            with zf.open(f"arrays/{number}.npy", "w", force_zip64=True) as out:
                _write_array(out, array)
        if encoder.tensors:
            import torch

            buffer = io.BytesIO()
            torch.save(encoder.tensors, buffer)
            zf.writestr(TENSORS, buffer.getvalue())


#: Plain numbers (bool, integers, floats, complex): their memory is their .npy data.
PLAIN_KINDS = "biufc"

#: A big array goes to the zip in pieces this size: each is checked and written while in cache.
PIECE = 4 * 2**20


def _write_array(out: IO[bytes], array: np.ndarray) -> None:
    """``array`` as a ``.npy`` member: the bytes ``np.save`` writes, a plain C-ordered array
    straight from its own memory (numpy would copy it in 16 MiB pieces for a zip member)."""
    if array.dtype.kind not in PLAIN_KINDS or not array.flags.c_contiguous:
        np.lib.format.write_array(out, array, allow_pickle=False)
        return
    header = np.lib.format.header_data_from_array_1_0(array)
    np.lib.format.write_array_header_1_0(out, header)
    data = array.reshape(-1).view(np.uint8).data
    for start in range(0, len(data), PIECE):
        out.write(data[start : start + PIECE])


# -- reading -------------------------------------------------------------------------


def load_checkpoint(path: str | os.PathLike[str], allow: Any = None, trusted: bool = False) -> Any:
    """The object saved at ``path``: safe format, or pickle when ``trusted``."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            return _read_file(fh, path, allow, trusted)
    except FileNotFoundError:
        raise InputError("no checkpoint there: the file does not exist", path=path) from None
    except IsADirectoryError:
        raise InputError("that is a folder, not a checkpoint file", path=path) from None


def _read_file(fh: IO[bytes], path: str, allow: Any, trusted: bool) -> Any:
    """The object in the open file ``fh``, by its first bytes: a zip (safe) or a pickle."""
    head = fh.read(4)
    fh.seek(0)
    if head.startswith(b"PK"):
        return read_snapshot(fh, path, allow, trusted)
    if not head:
        raise InputError("the checkpoint file is empty (a save that was interrupted?)", path=path)
    if trusted:
        return _read_pickle(fh, path)
    if head.startswith(b"\x80"):
        raise InputError(
            "the file is a pickle checkpoint (labkit's old format); loading pickle runs "
            "code named in the file, so it is refused by default. If you trust the file, "
            "load it with lk.Flow.load(path, trusted=True) (and save it again to convert "
            "it to the safe format)",
            path=path,
        )
    raise InputError(
        "the file is not a labkit checkpoint (neither the safe format nor pickle)", path=path
    )


def read_snapshot(
    fh: IO[bytes], path: str, allow: Any = None, trusted: bool = False, root: str = "flow"
) -> Any:
    """The object in the safe-format file ``fh``; ``path`` names it in errors, ``root`` the
    object itself (``flow['opt']``; a trial's ``checkpoint['state']``)."""
    allowed = Allowed(allow, trusted, flow=root == "flow")
    try:
        with zipfile.ZipFile(fh) as zf:
            meta = _meta(zf, path)
            decoder = Decoder(lambda n: _array(zf, n), lambda: _tensors(zf), allowed)
            return decoder.decode(meta["root"], root)
    except LabkitError as err:
        err.locate(path=path)
        raise  # the same error, located
    except Exception as exc:  # noqa: BLE001 - any damage to the file reads as corruption
        raise InputError(
            f"the checkpoint is truncated or corrupt ({type(exc).__name__}: {exc}); "
            "load an earlier checkpoint or save the flow again",
            path=path,
        ) from exc


def _meta(zf: zipfile.ZipFile, path: str) -> dict[str, Any]:
    """The checked ``meta.json`` of a checkpoint."""
    if META not in zf.namelist():
        raise InputError(
            f"the file is a zip file but not a labkit checkpoint (no {META})", path=path
        )
    meta = json.loads(zf.read(META))
    if meta.get("format") != FORMAT:
        raise InputError(
            f"the file is not a labkit checkpoint (format {meta.get('format')!r})", path=path
        )
    if not isinstance(meta.get("version"), int) or meta["version"] > VERSION:
        raise InputError(
            f"the checkpoint was written by a newer labkit (version "
            f"{meta.get('version')!r}, this labkit reads {VERSION}): "
            "upgrade labkit to load it",
            path=path,
        )
    return meta


def _array(zf: zipfile.ZipFile, number: int) -> np.ndarray:
    with zf.open(f"arrays/{int(number)}.npy") as fh:
        return np.lib.format.read_array(fh, allow_pickle=False)


def _tensors(zf: zipfile.ZipFile) -> dict[str, Any]:
    import torch

    tensors = torch.load(io.BytesIO(zf.read(TENSORS)), weights_only=True)
    if not isinstance(tensors, dict):
        raise ValueError(f"{TENSORS} holds no dict of tensors")
    return tensors


def _read_pickle(fh: IO[bytes], path: str) -> Any:
    """Unpickle a trusted old checkpoint; damage becomes an InputError naming ``path``."""
    try:
        return pickle.load(fh)
    except LabkitError as err:
        err.locate(path=path)
        raise  # the same error, located
    except Exception as exc:  # noqa: BLE001 - unpickling fails in many ways
        raise InputError(
            f"the checkpoint could not be unpickled ({type(exc).__name__}: "
            f"{exc}): it is truncated or corrupt, or needs code this Python lacks",
            path=path,
        ) from exc
