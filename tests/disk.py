"""A real, tiny disk for full-disk tests: a tmpfs of a few hundred KiB, filled on demand."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import tempfile

from tests.system import require, skip_or_fail


@contextlib.contextmanager
def tiny_disk(size_kib: int = 512):
    """A folder on a fresh tmpfs of ``size_kib`` KiB; unmounted and removed afterwards."""
    require("mount")
    folder = tempfile.mkdtemp(prefix="labkit-tiny-disk-")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", folder],
                          capture_output=True, text=True)
    if done.returncode != 0:
        os.rmdir(folder)
        skip_or_fail(f"cannot mount a tmpfs here ({done.stderr.strip()})",
                     "run the tests as root with CAP_SYS_ADMIN (CI does)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", folder], check=False)
        os.rmdir(folder)


def fill(folder: str) -> str:
    """Fill the disk of ``folder`` to the last byte; the filler's path."""
    path = os.path.join(folder, "filler")
    with open(path, "wb", buffering=0) as fh:   # unbuffered: nothing left to fail on close
        for block in (b"\0" * 65536, b"\0"):   # big blocks, then the last bytes one by one
            try:
                while fh.write(block):
                    pass
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
    return path
