"""Writing checkpoint files atomically: a temp file beside the target, then a rename.

Writers name their temp files ``.labkit-<file>.<host>-<pid>.<random>.tmp``
beside the checkpoint, so a later save can tell a temp file that a killed
save left behind (its process is gone) from one a live save is writing.

Examples
--------
>>> import os, shutil, tempfile
>>> folder = tempfile.mkdtemp()
>>> atomic_dump({"epoch": 3}, os.path.join(folder, "state.lk"))
>>> os.listdir(folder)
['state.lk']
>>> shutil.rmtree(folder)
"""

from __future__ import annotations

import hashlib
import os
import socket
import tempfile
import time

from ..errors import InputError, LabkitError, StorageError
from .format import writer

__all__ = ["atomic_dump", "check_writable", "make_temp", "remove_stale_temps", "STALE_AFTER_S"]

#: A temp file this old is stale even if a process with its pid is alive (pids get reused).
STALE_AFTER_S = 30 * 60


def atomic_dump(obj: object, path: str | os.PathLike[str], format: str = "safe") -> None:
    """Write ``obj`` to ``path`` atomically: a temp file beside it, then rename.

    ``format`` is ``"safe"`` (labkit's checkpoint format, see
    :mod:`labkit.checkpoints.format`) or ``"pickle"``.  Temp files that killed
    saves to ``path`` left behind are removed first; a crash never leaves a
    half-written ``path``.
    """
    path = os.fspath(path)
    write = writer(obj, format)  # encodes now: what cannot be stored fails before any file
    tmp = None
    try:
        remove_stale_temps(path)
        fd, tmp = make_temp(path)
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, LabkitError):
            kept = "the file there is as it was" if os.path.exists(path) else "nothing was written"
            raise StorageError.of(exc, f"saving to {path} ({kept})", path) from exc
        raise


def check_writable(path: str | os.PathLike[str]) -> str:
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
    prefix, host = _prefix(path), _host()
    removed: list[str] = []
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


def _is_stale(entry: os.DirEntry[str], same_host: bool, pid: int, max_age: float) -> bool:
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
