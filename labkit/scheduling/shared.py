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

import threading

__all__ = ["SHARE_BYTES", "SharedArray", "SharedChunk", "SharedChunks", "share", "attach",
           "unlink"]

#: Arrays at least this large travel through shared memory, smaller ones as they are.
SHARE_BYTES = 1 << 16


class SharedArray:
    """A numpy array placed in a shared-memory segment: its name, shape and dtype."""

    def __init__(self, name: str, shape, dtype):
        self.name, self.shape, self.dtype = name, shape, dtype

    def attach(self):
        """The array, mapped here copy-on-write.

        The mapping lives as long as the array (or a view of it, in a node or a
        result) does.  Writes stay private to this process: a chunk sent again
        after a lost worker is the chunk as the client made it.
        """
        import mmap
        import os

        import _posixshmem
        import numpy as np
        fd = _posixshmem.shm_open("/" + self.name, os.O_RDONLY, mode=0o600)
        try:
            nbytes = int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize
            mapped = mmap.mmap(fd, nbytes, access=mmap.ACCESS_COPY)
        finally:
            os.close(fd)
        return np.ndarray(self.shape, self.dtype, buffer=mapped)


def share(data, segments: list):
    """``data`` with its big numpy arrays copied into shared memory (recorded in ``segments``)."""
    import numpy as np
    if isinstance(data, tuple):
        return tuple(share(part, segments) for part in data)
    if not (isinstance(data, np.ndarray) and data.nbytes >= SHARE_BYTES
            and not data.dtype.hasobject):
        return data
    from multiprocessing import shared_memory
    segment = shared_memory.SharedMemory(create=True, size=data.nbytes)
    segments.append(segment)
    np.ndarray(data.shape, data.dtype, buffer=segment.buf)[...] = data
    return SharedArray(segment.name, data.shape, data.dtype)


def attach(data):
    """``data`` with its :class:`SharedArray` parts mapped."""
    if isinstance(data, tuple):
        return tuple(attach(part) for part in data)
    return data.attach() if isinstance(data, SharedArray) else data


def unlink(segments: list) -> None:
    """The creator's end of segments: close and remove them (mappings elsewhere stay valid)."""
    for segment in segments:
        try:
            segment.close()
        except BufferError:  # the client still uses a view of it
            pass
        try:
            segment.unlink()
        except FileNotFoundError:
            pass
    segments.clear()


class SharedChunk:
    """A chunk whose arrays wait in shared memory; :meth:`materialize` maps them."""

    def __init__(self, parts):
        self.parts = parts

    @classmethod
    def of(cls, data, segments: list) -> "SharedChunk | None":
        """``data`` in shared memory, or ``None`` when it has no array big enough to share."""
        before = len(segments)
        parts = share(data, segments)
        return cls(parts) if len(segments) > before else None

    def materialize(self):
        """The chunk, its arrays mapped into this process."""
        return attach(self.parts)


class SharedChunks:
    """The client's segments, by task: made once per task, removed when it is done."""

    def __init__(self):
        self._held: dict[int, tuple[SharedChunk, list]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    def chunk_for(self, task: int, data):
        """``data`` of ``task`` as a :class:`SharedChunk` (the same one when sent again),
        or ``data`` itself when nothing in it is big enough to share."""
        with self._lock:
            held = self._held.get(task)
        if held is None:
            segments: list = []
            chunk = SharedChunk.of(data, segments)
            if chunk is None:
                return data
            held = (chunk, segments)
            with self._lock:
                self._held[task] = held
        return held[0]

    def drop(self, tasks) -> None:
        """Remove the segments of ``tasks`` (done or cancelled)."""
        if not self._held:
            return
        with self._lock:
            gone = [self._held.pop(t, None) for t in tasks]
        for held in gone:
            if held is not None:
                unlink(held[1])

    def drop_all(self) -> None:
        """Remove every segment (the scheduler shuts down)."""
        with self._lock:
            tasks = list(self._held)
        self.drop(tasks)
