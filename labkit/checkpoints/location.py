"""Where checkpoints live: a folder or any fsspec URL, written by the process that runs the work.

A :class:`CheckpointLocation` is small and picklable: it travels to the
worker that runs a trial (or a rank of a group trial), which writes there
itself.  What comes back is a :class:`CheckpointRef` (its key under the
location, the step, its size and digest), never the bytes, so a checkpoint
of a large model never passes through the notebook's process.

Writes are atomic: on a local folder a temp file beside the target and a
rename; on object storage one ``put`` (an object appears whole or not at
all).  A read checks the digest, so a torn or foreign file is a labkit
:class:`~labkit.errors.StorageError` naming the location, never a wrong model.
The digest is a CRC-32 of the whole file (``"crc32:..."``), computed on the way
to the file: it catches a torn, cut or changed file at a third of a
cryptographic hash's cost (a 50 MB state: 0.013 s against sha256's 0.033 s).
A trial's checkpoint (a zip file, whose format already holds each member's
CRC-32) uses those instead (``"zip:..."``: a CRC-32 of every byte but the
members' data, and of the directory's members' CRC-32s; a read checks it, then
every member against its CRC-32), so its bytes are checksummed once, not twice.  Neither proves a file was not forged (the
location is trusted as the store is).  References written before (a bare
sha256) are still checked.

Objects that write their own checkpoint (a data-parallel trainer whose state
lives on its ranks) declare :class:`Checkpointable`.

Examples
--------
>>> import tempfile
>>> root = tempfile.mkdtemp()
>>> where = CheckpointLocation(root)
>>> ref = where.write("trial-1/step-3.lkc", b"abc", step=3)
>>> ref.nbytes, ref.step, where.read(ref)
(3, 3, b'abc')
>>> copied = where.copy(ref, "trial-2/step-3.lkc")
>>> where.read(copied), where.exists(ref)
(b'abc', True)
>>> where.delete(ref); where.exists(ref)
False
>>> where.remove_all(); import os; os.path.exists(root)
False
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import os
import struct
import uuid
import zipfile
import zlib
from collections.abc import Callable, Iterator
from typing import Any, Protocol, runtime_checkable

from ..errors import StorageError

__all__ = ["CheckpointRef", "CheckpointLocation", "Checkpointable", "digest_of"]

#: How a digest written now begins (a reference written before holds a bare sha256).
CRC32, ZIP = "crc32:", "zip:"


@dataclasses.dataclass(frozen=True)
class CheckpointRef:
    """One written checkpoint: its ``key`` under the location, ``step``, size and digest."""

    key: str
    step: Any
    nbytes: int
    digest: str


@runtime_checkable
class Checkpointable(Protocol):
    """An object that writes and reads its own checkpoint at a location (e.g. from its ranks)."""

    def write_checkpoint(self, location: CheckpointLocation, key: str, step: Any) -> CheckpointRef:
        """Write the object's state under ``key`` of ``location``; its reference."""
        ...

    def read_checkpoint(self, location: CheckpointLocation, ref: CheckpointRef) -> None:
        """Load the state ``ref`` names into the object."""
        ...


class CheckpointLocation:
    """A folder or fsspec URL checkpoints are written to and read from (see the module).

    Parameters
    ----------
    url : str
        A local folder, or any URL fsspec knows (``"s3://bucket/sweeps"``, ``"file:///..."``).
    storage_options : dict, optional
        Passed to fsspec's file system (``{"endpoint_url": ..., "key": ...}`` for S3).
    """

    def __init__(self, url: str, storage_options: dict | None = None):
        self.url = str(url)
        self.storage_options = dict(storage_options or {})
        self._fs: Any = None
        self._root: str | None = None

    def __getstate__(self) -> dict:
        # the file system object is rebuilt where the location lands (it holds sessions)
        return {"url": self.url, "storage_options": self.storage_options}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["url"], state["storage_options"])  # type: ignore[misc]

    def __eq__(self, other) -> bool:
        return isinstance(other, CheckpointLocation) and (self.url, self.storage_options) == (
            other.url,
            other.storage_options,
        )

    def __hash__(self) -> int:
        return hash(self.url)

    def __repr__(self) -> str:
        return f"CheckpointLocation({self.url!r})"

    @property
    def is_local(self) -> bool:
        """Whether the location is a folder of this machine's file system."""
        return "://" not in self.url or self.url.startswith("file://")

    def _open_fs(self) -> tuple[Any, str]:
        """fsspec's file system and the root path under it (made once per process)."""
        if self._fs is None:
            from fsspec.core import url_to_fs

            try:
                self._fs, self._root = url_to_fs(self.url, **self.storage_options)
            except (ImportError, ValueError) as exc:  # no s3fs, an unknown protocol
                raise StorageError(
                    f"cannot open the checkpoint location {self.url}: {type(exc).__name__}: {exc}",
                    path=self.url,
                ) from exc
        return self._fs, str(self._root).rstrip("/")

    def path(self, key: str) -> str:
        """The full path of ``key`` on the location's file system."""
        _, root = self._open_fs()
        key = key.strip("/")
        return f"{root}/{key}" if key else root

    def write(self, key: str, blob: bytes, step: Any = None) -> CheckpointRef:
        """Write ``blob`` under ``key`` atomically; its reference."""
        fs, _ = self._open_fs()
        path = self.path(key)
        try:
            if self.is_local:
                folder = os.path.dirname(path)
                os.makedirs(folder, exist_ok=True)
                tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
                try:
                    with open(tmp, "wb") as fh:
                        fh.write(blob)
                    os.replace(tmp, path)
                finally:
                    if os.path.exists(tmp):
                        os.unlink(tmp)
            else:
                fs.pipe_file(path, blob)  # one put: the object appears whole
        except OSError as exc:
            raise StorageError.of(exc, "writing a checkpoint", self._shown(key)) from exc
        except Exception as exc:  # botocore and friends: not OSErrors
            raise StorageError(
                f"writing a checkpoint failed: {type(exc).__name__}: {exc}", path=self._shown(key)
            ) from exc
        return CheckpointRef(key, step, len(blob), digest_of(blob))

    def write_with(
        self, key: str, fill: Callable[[Any], None], step: Any = None, zipped: bool = False
    ) -> CheckpointRef:
        """Write what ``fill(file)`` writes to ``file`` under ``key`` atomically; its reference.

        On a local folder the bytes go straight to the file, checksummed on the way, with
        no copy of the whole in memory (an encoder writing a large state saves a copy and
        a growing buffer); elsewhere they are gathered, then put as :meth:`write` does.
        ``file`` is a write-only stream (no ``seek``).  If ``fill`` raises, nothing is
        left under ``key`` and its error goes on.  ``zipped``: ``fill`` writes a zip file,
        whose members' CRC-32s (computed by the zip format on the way) make the digest
        (``"zip:..."``), so the bytes are not checksummed a second time.
        """
        if not self.is_local:
            gathered = io.BytesIO()
            fill(_Hashing(gathered))
            return self.write(key, gathered.getvalue(), step)
        path = self.path(key)
        tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(tmp, "wb") as fh:
                stream = _Hashing(fh, checksum=not zipped)
                fill(stream)  # its own errors (an object it refuses) go on as they are
            digest = _zip_digest_of(tmp, stream.nbytes) if zipped else stream.hexdigest()
            os.replace(tmp, path)
        except StorageError:
            raise
        except OSError as exc:  # a full disk, no permission: while writing, or renaming
            raise StorageError.of(exc, "writing a checkpoint", self._shown(key)) from exc
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return CheckpointRef(key, step, stream.nbytes, digest)

    def read(self, ref: CheckpointRef) -> bytes:
        """The bytes ``ref`` names, checked against its digest."""
        fs, _ = self._open_fs()
        try:
            blob = fs.cat_file(self.path(ref.key))
        except FileNotFoundError as exc:
            raise StorageError(
                "reading a checkpoint failed: it is not there (deleted, or another location)",
                path=self._shown(ref.key),
            ) from exc
        except OSError as exc:
            raise StorageError.of(exc, "reading a checkpoint", self._shown(ref.key)) from exc
        except Exception as exc:
            raise StorageError(
                f"reading a checkpoint failed: {type(exc).__name__}: {exc}",
                path=self._shown(ref.key),
            ) from exc
        if len(blob) != ref.nbytes or not _matches(blob, ref.digest):
            raise StorageError(
                f"the checkpoint read back is not the one written ({len(blob)} bytes, "
                f"{ref.nbytes} written): it was changed or cut short",
                path=self._shown(ref.key),
            )
        return blob

    def exists(self, ref: CheckpointRef | str) -> bool:
        """Whether ``ref`` (or a key) is at the location."""
        with self._failing_as("looking for a checkpoint", _key(ref)):
            return bool(self._fresh_fs().exists(self.path(_key(ref))))

    def delete(self, ref: CheckpointRef | str) -> None:
        """Remove ``ref`` (or a key); one already gone is fine."""
        fs = self._fresh_fs()
        with self._failing_as("deleting a checkpoint", _key(ref), missing_ok=True):
            fs.rm_file(self.path(_key(ref)))

    def copy(self, ref: CheckpointRef, key: str) -> CheckpointRef:
        """Copy ``ref`` to ``key`` on the storage side (no bytes through this process if it can)."""
        fs = self._fresh_fs()
        with self._failing_as("copying a checkpoint", key):
            if self.is_local:
                os.makedirs(os.path.dirname(self.path(key)), exist_ok=True)
            fs.copy(self.path(ref.key), self.path(key))
        return dataclasses.replace(ref, key=key)

    def size_of(self, prefix: str = "") -> int:
        """Bytes stored under ``prefix`` (all the location if empty)."""
        fs = self._fresh_fs()
        with self._failing_as("measuring checkpoints", prefix):
            path = self.path(prefix)
            if not fs.exists(path):
                return 0
            # one listing with sizes (fsspec's du asks for each object's size on its own)
            found = fs.find(path, detail=True)
        return sum(int(info.get("size") or 0) for info in found.values())

    def remove_all(self, prefix: str = "") -> None:
        """Remove everything under ``prefix`` (the whole location if empty)."""
        fs = self._fresh_fs()
        with self._failing_as("removing checkpoints", prefix):
            path = self.path(prefix)
            if not fs.exists(path):
                return
            if self.is_local:
                fs.rm(path, recursive=True)
            elif found := fs.find(path):
                # objects only: a location at a bucket's root keeps its bucket
                fs.rm(found)

    def probe(self, where: str = "this process") -> None:
        """Write, read back and delete a small file; a StorageError naming the location and
        ``where`` (a worker's address) if any of it fails."""
        key = f".labkit-probe-{uuid.uuid4().hex}"
        try:
            ref = self.write(key, b"labkit")
            self.read(ref)
            self.delete(ref)
        except StorageError as err:
            raise StorageError(
                f"the checkpoint location {self.url} cannot be used from {where}: {err.message}",
                errno=err.errno,  # kept: ``except OSError`` callers may read it
                path=self.url,
                worker=where,
            ) from err

    def _shown(self, key: str) -> str:
        """``key`` as a user reads it: the location's URL and the key."""
        if not key:
            return self.url
        return f"{self.url.rstrip('/')}/{key.lstrip('/')}"

    def _fresh_fs(self) -> Any:
        """The file system with its listings forgotten: other processes write here too."""
        fs, _ = self._open_fs()
        fs.invalidate_cache()  # s3fs would answer exists/find from a stale listing
        return fs

    @contextlib.contextmanager
    def _failing_as(self, doing: str, key: str, missing_ok: bool = False) -> Iterator[None]:
        """Turn what fsspec, the OS or botocore raise while ``doing`` into a StorageError
        naming the key's URL (a missing file is fine when ``missing_ok``)."""
        try:
            yield
        except StorageError:
            raise
        except FileNotFoundError as exc:
            if not missing_ok:
                raise StorageError.of(exc, doing, self._shown(key)) from exc
        except OSError as exc:
            raise StorageError.of(exc, doing, self._shown(key)) from exc
        except Exception as exc:  # botocore and friends: not OSErrors
            raise StorageError(
                f"{doing} failed: {type(exc).__name__}: {exc}", path=self._shown(key)
            ) from exc


class _Hashing(io.RawIOBase):
    """A write-only stream that checksums and counts what passes to ``target``."""

    def __init__(self, target: Any, checksum: bool = True):
        super().__init__()
        self.target, self.crc, self.nbytes, self.checksum = target, 0, 0, checksum

    def writable(self) -> bool:
        """Always: it is a stream to write to."""
        return True

    def write(self, data: Any) -> int:
        """Checksum ``data``, then pass it on whole; its length."""
        view = memoryview(data).cast("B")
        if self.checksum:
            self.crc = zlib.crc32(view, self.crc)
        self.target.write(view)
        self.nbytes += len(view)
        return len(view)

    def hexdigest(self) -> str:
        """The digest of all written so far, as :func:`digest_of` gives it."""
        return f"{CRC32}{self.crc:08x}"


def digest_of(blob: Any) -> str:
    """The digest a :class:`CheckpointRef` holds for the bytes ``blob``: ``"crc32:<8 hex>"``."""
    return f"{CRC32}{zlib.crc32(blob):08x}"


def _matches(blob: bytes, digest: str) -> bool:
    """Whether ``blob`` has ``digest``: a CRC-32, a zip's (see :func:`_zip_digest`), or the
    sha256 of a reference written before."""
    if digest.startswith(CRC32):
        return digest_of(blob) == digest
    if digest.startswith(ZIP):
        try:
            if _zip_digest(io.BytesIO(blob), len(blob)) != digest:
                return False
            with zipfile.ZipFile(io.BytesIO(blob)) as zf:
                return zf.testzip() is None  # every member's data against its CRC-32
        except Exception:  # noqa: BLE001 - any damage to the zip reads as a changed file
            return False
    return hashlib.sha256(blob).hexdigest() == digest


def _zip_digest(fh: Any, nbytes: int) -> str:
    """A zip file's digest (``fh`` seekable, ``nbytes`` long): a CRC-32 of every byte but its
    members' data (headers, descriptors, directory) and of its directory's list of members'
    places, sizes and CRC-32s, which cover every byte of their data."""
    with zipfile.ZipFile(fh) as zf:
        members = sorted(zf.infolist(), key=lambda info: info.header_offset)
    crc, at = 0, 0
    for info in members:
        fh.seek(info.header_offset + 26)  # the local header's name and extra lengths
        names, extra = struct.unpack("<HH", fh.read(4))
        start = info.header_offset + 30 + names + extra
        crc, at = _crc_between(fh, at, start, crc), start + info.compress_size
    crc = _crc_between(fh, at, nbytes, crc)
    listed = [(i.filename, i.header_offset, i.compress_size, i.CRC) for i in members]
    return f"{ZIP}{zlib.crc32(repr(listed).encode(), crc):08x}"


def _crc_between(fh: Any, start: int, end: int, crc: int) -> int:
    """``crc`` carried over the bytes of ``fh`` from ``start`` to ``end``."""
    if end < start:
        raise ValueError("zip members overlap")
    fh.seek(start)
    return zlib.crc32(fh.read(end - start), crc)


def _zip_digest_of(path: str, nbytes: int) -> str:
    """:func:`_zip_digest` of the zip file just written at ``path`` (all but its members' data)."""
    try:
        with open(path, "rb") as fh:
            return _zip_digest(fh, nbytes)
    except (zipfile.BadZipFile, ValueError, struct.error) as exc:
        raise StorageError(f"the checkpoint written is not a zip file: {exc}", path=path) from exc


def _key(ref: CheckpointRef | str) -> str:
    """The key of a reference or a key."""
    return ref.key if isinstance(ref, CheckpointRef) else ref
