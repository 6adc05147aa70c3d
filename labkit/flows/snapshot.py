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

Writers name their temp files ``.labkit-<file>.<host>-<pid>.<random>.tmp``
beside the checkpoint, so a later save can tell a temp file that a killed
save left behind (its process is gone) from one a live save is writing.

Examples
--------
>>> import io, numpy as np
>>> buffer = io.BytesIO()
>>> write_snapshot({"w": np.eye(2)}, buffer)
>>> read_snapshot(io.BytesIO(buffer.getvalue()), "<memory>")["w"].tolist()
[[1.0, 0.0], [0.0, 1.0]]
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import socket
import tempfile
import time
import zipfile

import numpy as np

from ..errors import InputError, LabkitError
from .snapshot_state import Allowed, Decoder, Encoder, UnsavableError, allow_in_checkpoints

__all__ = [
    "write_snapshot",
    "read_snapshot",
    "load_checkpoint",
    "writer",
    "check_writable",
    "make_temp",
    "remove_stale_temps",
    "allow_in_checkpoints",
    "UnsavableError",
    "FORMATS",
    "STALE_AFTER_S",
]

FORMAT, VERSION = "labkit-snapshot", 1
FORMATS = ("safe", "pickle")
META = "meta.json"
TENSORS = "tensors.pt"

#: A temp file this old is stale even if a process with its pid is alive (pids get reused).
STALE_AFTER_S = 30 * 60


# -- writing -------------------------------------------------------------------------


def write_snapshot(obj, fh, root: str = "flow", encoder: Encoder | None = None) -> None:
    """Write ``obj`` in the safe format to the binary file ``fh``.

    ``root`` names ``obj`` in errors (``flow['lock']``); ``encoder`` is an
    :class:`Encoder` with the caller's checks and advice.
    """
    writer(obj, "safe", root, encoder)(fh)


def writer(obj, format: str = "safe", root: str = "flow", encoder: Encoder | None = None):
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


def _write_zip(fh, text: str, encoder: Encoder) -> None:
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        zf.writestr(META, text)
        for number, array in enumerate(encoder.arrays):
            with zf.open(f"arrays/{number}.npy", "w", force_zip64=True) as out:
                np.lib.format.write_array(out, array, allow_pickle=False)
        if encoder.tensors:
            import torch

            buffer = io.BytesIO()
            torch.save(encoder.tensors, buffer)
            zf.writestr(TENSORS, buffer.getvalue())


# -- reading -------------------------------------------------------------------------


def load_checkpoint(path, allow=None, trusted: bool = False):
    """The object saved at ``path``: safe format, or pickle when ``trusted``."""
    path = os.fspath(path)
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise InputError("no checkpoint there: the file does not exist", path=path) from None
    except IsADirectoryError:
        raise InputError("that is a folder, not a checkpoint file", path=path) from None
    with fh:
        head = fh.read(4)
        fh.seek(0)
        if head.startswith(b"PK"):
            return read_snapshot(fh, path, allow, trusted)
        if not head:
            raise InputError(
                "the checkpoint file is empty (a save that was interrupted?)", path=path
            )
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


def read_snapshot(fh, path: str, allow=None, trusted: bool = False, root: str = "flow"):
    """The object in the safe-format file ``fh``; ``path`` names it in errors, ``root`` the
    object itself (``flow['opt']``; a trial's ``checkpoint['state']``)."""
    allowed = Allowed(allow, trusted, flow=root == "flow")
    try:
        with zipfile.ZipFile(fh) as zf:
            meta = _meta(zf, path)
            decoder = Decoder(lambda n: _array(zf, n), lambda: _tensors(zf), allowed)
            return decoder.decode(meta["root"], root)
    except LabkitError as err:
        raise err.locate(path=path)
    except Exception as exc:  # noqa: BLE001 - any damage to the file reads as corruption
        raise InputError(
            f"the checkpoint is truncated or corrupt ({type(exc).__name__}: {exc}); "
            "load an earlier checkpoint or save the flow again",
            path=path,
        ) from exc


def _meta(zf: zipfile.ZipFile, path: str) -> dict:
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


def _array(zf: zipfile.ZipFile, number) -> np.ndarray:
    with zf.open(f"arrays/{int(number)}.npy") as fh:
        return np.lib.format.read_array(fh, allow_pickle=False)


def _tensors(zf: zipfile.ZipFile) -> dict:
    import torch

    tensors = torch.load(io.BytesIO(zf.read(TENSORS)), weights_only=True)
    if not isinstance(tensors, dict):
        raise ValueError(f"{TENSORS} holds no dict of tensors")
    return tensors


def _read_pickle(fh, path: str):
    """Unpickle a trusted old checkpoint; damage becomes an InputError naming ``path``."""
    try:
        return pickle.load(fh)
    except LabkitError as err:
        raise err.locate(path=path)
    except Exception as exc:  # noqa: BLE001 - unpickling fails in many ways
        raise InputError(
            f"the checkpoint could not be unpickled ({type(exc).__name__}: "
            f"{exc}): it is truncated or corrupt, or needs code this Python lacks",
            path=path,
        ) from exc


# -- files: checks, temp files -------------------------------------------------------


def check_writable(path) -> str:
    """``path`` as a string if a checkpoint can be written there, else an InputError."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        what = "is not a folder" if os.path.exists(folder) else "does not exist"
        raise InputError(
            f"cannot write a checkpoint: the folder {folder} {what}; "
            "create it first or choose another path",
            path=path,
        )
    if os.path.isdir(path):
        raise InputError(
            "cannot write a checkpoint: the path is a folder; give a file path inside it", path=path
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(
            f"cannot write a checkpoint: the folder {folder} is not writable", path=path
        )
    return path


def _prefix(path: str) -> str:
    """``.labkit-<file>.``: the start of every temp file for ``path``."""
    name = os.path.basename(path)
    if len(name.encode()) > 120:  # leave room for host, pid and random part in 255 bytes
        name = hashlib.sha1(name.encode()).hexdigest()
    return f".labkit-{name}."


def _host() -> str:
    return hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]


def make_temp(path: str) -> tuple[int, str]:
    """A new temp file beside ``path``, named for this host and process: ``(fd, name)``."""
    folder = os.path.dirname(os.path.abspath(check_writable(path)))
    try:
        return tempfile.mkstemp(
            prefix=f"{_prefix(path)}{_host()}-{os.getpid()}.", suffix=".tmp", dir=folder
        )
    except OSError as exc:
        raise InputError(f"cannot write a checkpoint: {exc}", path=path) from exc


def remove_stale_temps(path: str, max_age: float = STALE_AFTER_S) -> list[str]:
    """Remove temp files that saves to ``path`` left behind; return their names.

    A temp file is stale when its writer's process is gone (same host) or it
    has not changed for ``max_age`` seconds; others may be live saves.
    """
    folder = os.path.dirname(os.path.abspath(path))
    prefix, host, removed = _prefix(path), _host(), []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        if entry.name.startswith(prefix) and entry.name.endswith(".tmp"):
            writer_host, _, pid = entry.name[len(prefix) :].partition(".")[0].partition("-")
            if pid.isdigit() and _is_stale(entry, writer_host == host, int(pid), max_age):
                try:
                    os.unlink(entry.path)
                    removed.append(entry.name)
                except OSError:
                    pass  # removed by another save meanwhile, or not ours to remove
    return removed


def _is_stale(entry: os.DirEntry, same_host: bool, pid: int, max_age: float) -> bool:
    try:
        age = time.time() - entry.stat().st_mtime
    except OSError:
        return False
    if age > max_age:
        return True
    return same_host and not _alive(pid)


def _alive(pid: int) -> bool:
    """Whether a process with ``pid`` runs on this host."""
    if pid <= 0:
        return False  # os.kill(0, ...) would mean our own process group
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    except OSError:
        return False
    return True
