"""A checkpoint's digest: a CRC-32 of the whole file, written on the way; old sha256 refs still read."""

import dataclasses
import hashlib
import io
import os
import zipfile
import zlib

import numpy as np
import pytest

from labkit.checkpoints import read_snapshot, write_snapshot
from labkit.checkpoints.location import CheckpointLocation, digest_of
from labkit.errors import StorageError


def test_the_digest_is_the_crc32_of_the_whole_file_for_write_and_write_with(tmp_path):
    where = CheckpointLocation(str(tmp_path))
    blob = bytes(range(256)) * 1000
    written = where.write("a/1.lkc", blob)
    streamed = where.write_with("a/2.lkc", lambda fh: [fh.write(blob[:7]), fh.write(blob[7:])])
    expected = f"crc32:{zlib.crc32(blob):08x}"
    assert written.digest == streamed.digest == digest_of(blob) == expected
    assert where.read(written) == where.read(streamed) == blob


def test_a_reference_written_before_with_a_sha256_digest_is_still_checked(tmp_path):
    where = CheckpointLocation(str(tmp_path))
    blob = b"an old checkpoint" * 100
    ref = where.write("t/old.lkc", blob)
    old = dataclasses.replace(ref, digest=hashlib.sha256(blob).hexdigest())
    assert where.read(old) == blob
    with open(where.path("t/old.lkc"), "r+b") as fh:  # one byte changed, same size
        fh.seek(40)
        fh.write(b"X")
    for either in (ref, old):
        with pytest.raises(StorageError, match="not the one written"):
            where.read(either)


@pytest.mark.parametrize(
    "array",
    [
        np.arange(10.0),
        np.zeros((3, 4), np.float32),
        np.array(5),
        np.zeros(0),
        np.arange(6).reshape(2, 3).T,  # Fortran order: numpy's own writer
        np.array([1 + 2j]),
        np.array(["ab"]),
        np.arange(4, dtype=">i4"),
        np.ones(3, bool),
        np.random.default_rng(0).random(9 * 2**20 // 8),  # more than one piece
    ],
    ids=lambda a: f"{a.dtype}{a.shape}",
)
def test_an_array_member_is_the_bytes_np_save_writes(array):
    numpys = io.BytesIO()
    np.lib.format.write_array(numpys, array, allow_pickle=False)
    buffer = io.BytesIO()
    write_snapshot({"a": array}, buffer, "checkpoint")
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as zf:
        assert zf.read("arrays/0.npy") == numpys.getvalue()  # CRC checked on the way
    back = read_snapshot(io.BytesIO(buffer.getvalue()), "here", root="checkpoint")["a"]
    assert back.dtype == array.dtype and np.array_equal(back, array)


def _encoded(where, key, state):
    """``state`` written as a trial writes it: encoded straight into the file, a zip digest."""
    from labkit.experiments.store.checkpoints import encode_into

    return where.write_with(key, lambda fh: encode_into(state, fh), step=1, zipped=True)


def test_a_zipped_checkpoint_s_digest_comes_from_its_members_crcs_and_reads_back(tmp_path):
    from labkit.experiments.store.checkpoints import decode

    where = CheckpointLocation(str(tmp_path))
    state = {"w": np.random.default_rng(1).random(300_000), "epoch": 2}
    ref = _encoded(where, "t/1.lkc", state)
    assert ref.digest.startswith("zip:") and ref.nbytes == os.path.getsize(where.path(ref.key))
    back = decode(where.read(ref))
    assert back["epoch"] == 2 and np.array_equal(back["w"], state["w"])


@pytest.mark.parametrize(
    "damage", ["array byte", "directory byte", "last byte", "header byte", "cut short", "longer"]
)
def test_a_zipped_checkpoint_changed_anywhere_that_matters_is_refused(tmp_path, damage):
    where = CheckpointLocation(str(tmp_path))
    ref = _encoded(where, "t/2.lkc", {"w": np.arange(100_000, dtype=np.float64)})
    path = where.path(ref.key)
    blob = bytearray(open(path, "rb").read())
    if damage == "array byte":
        blob[len(blob) // 2] ^= 0xFF  # inside the array's data: its member's CRC-32
    elif damage == "directory byte":
        blob[blob.rfind(b"PK\x01\x02") + 16] ^= 0xFF  # a CRC-32 in the central directory
    elif damage == "last byte":
        blob[-1] ^= 0xFF  # the end record's comment length: zipfile still reads the file
    elif damage == "header byte":
        blob[10] ^= 0xFF  # the first local header's time: zipfile never reads it
    elif damage == "cut short":
        blob = blob[:-10]
    else:
        blob += b"more"
    with open(path, "wb") as fh:
        fh.write(blob)
    with pytest.raises(StorageError, match="not the one written"):
        where.read(ref)
