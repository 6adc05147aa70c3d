"""Chunks in shared memory: one copy from the client, mapped (not received) by a worker process.

Between processes of one machine, a chunk pickled through a socket is copied
at least twice (into the socket, out of it into the receiving buffer) and
costs the event loops on both sides CPU.  Here the client copies each big
array of a chunk once into a POSIX shared-memory segment and sends only its
name; the worker process maps the segment and trains on the array in place.
The client unlinks the segments when the task is done or cancelled, or when
the scheduler shuts down; a worker lost mid-task leaves them to the client,
which can send the same names again.

A worker maps a segment by name (``shm_open`` and ``mmap``), so it registers
nothing with a resource tracker: only the client, which made the segment,
answers for it.

Examples
--------
>>> import numpy as np
>>> segments = []
>>> chunk = SharedChunk.of(np.arange(10000.0), segments)
>>> float(chunk.materialize().sum())   # in a worker process, mapped
49995000.0
>>> unlink(segments)
"""

from __future__ import annotations

import contextlib
import threading

__all__ = [
    "SHARE_BYTES",
    "SharedArray",
    "SharedChunk",
    "SharedChunks",
    "share",
    "attach",
    "unmap",
    "unlink",
    "room",
    "segment_prefix",
]

#: Arrays at least this large travel through shared memory, smaller ones as they are.
SHARE_BYTES = 1 << 16


def segment_prefix() -> str:
    """The start of the names of the segments this process makes.

    Named by their maker (not Python's anonymous ``psm_``), so that the segments of one
    process, or one left behind, can be told from another program's on the machine.
    Short: macOS allows 31 characters a name.
    """
    import os

    return f"lk_{os.getpid()}_"


def _new_segment(nbytes: int):
    """A fresh shared-memory segment of ``nbytes``, named by this process (segment_prefix)."""
    import secrets
    from multiprocessing import shared_memory

    while True:
        name = segment_prefix() + secrets.token_hex(4)
        with contextlib.suppress(FileExistsError):  # 32 random bits taken: draw again
            return shared_memory.SharedMemory(name=name, create=True, size=nbytes)


class SharedArray:
    """A numpy array placed in a shared-memory segment: its name, shape and dtype."""

    def __init__(self, name: str, shape, dtype):
        self.name, self.shape, self.dtype = name, shape, dtype

    def attach(self, held: list | None = None):
        """The array, mapped here copy-on-write (its mapping appended to ``held``).

        The mapping lives as long as the array (or a view of it, in a node or a
        result) does.  Writes stay private to this process: a chunk sent again
        after a lost worker is the chunk as the client made it.
        """
        import _posixshmem
        import mmap
        import os

        import numpy as np

        fd = _posixshmem.shm_open("/" + self.name, os.O_RDONLY, mode=0o600)
        try:
            nbytes = int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize
            mapped = mmap.mmap(fd, nbytes, access=mmap.ACCESS_COPY)
        finally:
            os.close(fd)
        if held is not None:
            held.append(mapped)
        # frombuffer, not ndarray(buffer=): its memoryview holds the mapping's export, so
        # closing the mapping fails (BufferError) while any view of the array is alive
        count = int(np.prod(self.shape, dtype=np.int64))
        return np.frombuffer(mapped, self.dtype, count).reshape(self.shape)


def share(data, segments: list, take=None):
    """``data`` with its big numpy arrays copied into shared memory (recorded in ``segments``).

    ``take(nbytes)`` may offer a segment to reuse (or ``None``): a fresh one costs the
    kernel a page fault per 4 KiB on first write, ten times the copy itself.
    """
    import numpy as np

    if isinstance(data, tuple):
        return tuple(share(part, segments, take) for part in data)
    if not (
        isinstance(data, np.ndarray) and data.nbytes >= SHARE_BYTES and not data.dtype.hasobject
    ):
        return data
    segment = take(data.nbytes) if take is not None else None
    if segment is None:
        segment = _new_segment(data.nbytes)
    segments.append(segment)
    np.copyto(np.ndarray(data.shape, data.dtype, buffer=segment.buf), data)
    return SharedArray(segment.name, data.shape, data.dtype)


def attach(data, held: list | None = None):
    """``data`` with its :class:`SharedArray` parts mapped (mappings appended to ``held``)."""
    if isinstance(data, tuple):
        return tuple(attach(part, held) for part in data)
    return data.attach(held) if isinstance(data, SharedArray) else data


def unmap(held: list) -> bool:
    """Close the mappings in ``held``; whether all closed (nothing here still views them).

    A node that kept a view of its chunk, or a result that is one, keeps its
    mapping open: then the client must not write into those segments again.
    """
    closed = True
    for mapped in held:
        try:
            mapped.close()
        except BufferError:
            closed = False
    held.clear()
    return closed


def room() -> int:
    """Bytes free for new segments on this machine (0 where it has no /dev/shm).

    A segment past what the file system holds fails only when written (SIGBUS):
    callers check first, and send the data another way.
    """
    import os

    try:
        stat = os.statvfs("/dev/shm")
    except OSError:
        return 0
    return stat.f_bavail * stat.f_frsize


def unlink(segments: list) -> None:
    """The creator's end of segments: close and remove them (mappings elsewhere stay valid)."""
    for segment in segments:
        with contextlib.suppress(BufferError):  # the client still uses a view of it
            segment.close()
        with contextlib.suppress(FileNotFoundError):
            segment.unlink()
    segments.clear()


class SharedChunk:
    """A chunk whose arrays wait in shared memory; :meth:`materialize` maps them."""

    def __init__(self, parts):
        self.parts = parts

    @classmethod
    def of(cls, data, segments: list, take=None) -> SharedChunk | None:
        """``data`` in shared memory, or ``None`` when it has no array big enough to share."""
        before = len(segments)
        parts = share(data, segments, take)
        return cls(parts) if len(segments) > before else None

    def materialize(self, held: list | None = None):
        """The chunk, its arrays mapped into this process (see :func:`unmap`)."""
        return attach(self.parts, held)


class SharedChunks:
    """The client's segments, by task; a task's segments are reused once it is done.

    Reused only when the worker said it unmapped them all (nothing there still
    views the chunk); otherwise removed.  At most ``keep_bytes`` wait for reuse.
    """

    def __init__(self, keep_bytes: int = 256 * 2**20):
        self.keep_bytes = keep_bytes
        self._held: dict[int, tuple[SharedChunk, list]] = {}
        self._free: list = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    @property
    def free_bytes(self) -> int:
        """Bytes of segments waiting for reuse."""
        with self._lock:
            return sum(seg.size for seg in self._free)

    def chunk_for(self, task: int, data):
        """``data`` of ``task`` as a :class:`SharedChunk` (the same one when sent again),
        or ``data`` itself when nothing in it is big enough to share."""
        with self._lock:
            held = self._held.get(task)
        if held is None:
            segments: list = []
            chunk = SharedChunk.of(data, segments, self._take)
            if chunk is None:
                return data
            held = (chunk, segments)
            with self._lock:
                self._held[task] = held
        return held[0]

    def _take(self, nbytes: int):
        """A free segment of ``nbytes`` to twice that, or ``None``."""
        with self._lock:
            for i, seg in enumerate(self._free):
                if nbytes <= seg.size <= 2 * nbytes:
                    return self._free.pop(i)
        return None

    def drop(self, tasks, reuse: bool = False) -> None:
        """The segments of ``tasks`` (done or cancelled): kept for reuse, or removed."""
        if not self._held:
            return
        with self._lock:
            gone = [self._held.pop(t, None) for t in tasks]
        for held in gone:
            if held is not None:
                self._give(held[1]) if reuse else unlink(held[1])

    def _give(self, segments: list) -> None:
        with self._lock:
            room = self.keep_bytes - sum(seg.size for seg in self._free)
            kept = []
            for seg in segments:
                if seg.size <= room:
                    kept.append(seg)
                    room -= seg.size
            self._free.extend(kept)
        unlink([seg for seg in segments if seg not in kept])

    def drop_all(self) -> None:
        """Remove every segment (the scheduler shuts down)."""
        with self._lock:
            tasks = list(self._held)
        self.drop(tasks)
        with self._lock:
            free, self._free = self._free, []
        unlink(free)
