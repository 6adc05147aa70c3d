"""CheckpointLocation on a local folder and on S3 (moto's server over HTTP): writes, reads, copies."""

import os
import pickle
import uuid

import numpy as np
import pytest

from labkit.checkpoints.location import CheckpointLocation, CheckpointRef, digest_of
from labkit.errors import StorageError
from tests.helpers import own_client


def _blob(seed, size=1 << 16):
    """Bytes that differ by seed (made again on a worker from the seed alone)."""
    return np.random.default_rng(seed).bytes(size)


def _overwrite(location, key, blob):
    """Replace the object at ``key`` behind the location's back (another program's write)."""
    if location.is_local:
        with open(location.path(key), "wb") as fh:
            fh.write(blob)
    else:
        import s3fs

        fs = s3fs.S3FileSystem(**location.storage_options, skip_instance_cache=True)
        fs.pipe_file(location.path(key), blob)


def test_write_then_read_round_trips(location):
    blob = _blob(1)
    ref = location.write("sweep/trial-1/0-3-abcd.lkc", blob, step=3)
    assert isinstance(ref, CheckpointRef)
    assert (ref.key, ref.step, ref.nbytes) == ("sweep/trial-1/0-3-abcd.lkc", 3, len(blob))
    assert location.read(ref) == blob
    assert location.exists(ref) and location.exists(ref.key)
    assert location.path(ref.key).endswith("/sweep/trial-1/0-3-abcd.lkc")
    assert location.write("sweep/empty.lkc", b"").nbytes == 0


def test_a_second_write_of_a_key_replaces_it_whole(location):
    first = location.write("t/k.lkc", _blob(1), step=1)
    second = location.write("t/k.lkc", _blob(2, 1000), step=2)
    assert location.read(second) == _blob(2, 1000)
    with pytest.raises(StorageError):  # the first write's reference no longer matches
        location.read(first)
    if location.is_local:  # no temp file left beside the target
        assert os.listdir(os.path.dirname(location.path("t/k.lkc"))) == ["k.lkc"]


@pytest.mark.parametrize("change", ["same size", "cut short", "longer"])
def test_digest_check_catches_a_changed_object(location, change):
    blob = _blob(3)
    ref = location.write("trial-2/1-5-beef.lkc", blob, step=5)
    changed = {
        "same size": bytes([blob[0] ^ 1]) + blob[1:],
        "cut short": blob[:-10],
        "longer": blob + b"x",
    }[change]
    _overwrite(location, ref.key, changed)
    with pytest.raises(StorageError, match="not the one written") as info:
        location.read(ref)
    assert f"{location.url}/trial-2/1-5-beef.lkc" in str(info.value)


def test_reading_a_missing_checkpoint_says_it_is_not_there(location):
    ref = location.write("trial-3/a.lkc", b"abc")
    location.delete(ref)
    with pytest.raises(StorageError, match="not there") as info:
        location.read(ref)
    assert info.value.where["path"] == f"{location.url}/trial-3/a.lkc"


def test_delete_exists_and_copy(location):
    ref = location.write("donor/3.lkc", _blob(4), step=3)
    copied = location.copy(ref, "recipient/3.lkc")
    assert (copied.key, copied.step, copied.nbytes, copied.digest) == (
        "recipient/3.lkc",
        3,
        ref.nbytes,
        ref.digest,
    )
    location.delete(ref)
    assert not location.exists(ref) and not location.exists("donor/3.lkc")
    assert location.exists(copied)
    assert location.read(copied) == _blob(4)  # the copy outlives its source
    location.delete(ref)  # gone already: fine
    location.delete("never/written.lkc")
    with pytest.raises(StorageError, match="copying a checkpoint"):
        location.copy(ref, "recipient/again.lkc")  # its source is gone


def test_size_of_and_remove_all(location):
    assert location.size_of() == 0  # nothing written yet (not even the root)
    location.write("a/trial-1/0.lkc", b"x" * 100)
    location.write("a/trial-1/1.lkc", b"x" * 50)
    location.write("a/trial-2/0.lkc", b"x" * 7)
    location.write("b/trial-1/0.lkc", b"x" * 3)
    assert location.size_of("a/trial-1") == 150
    assert location.size_of("a") == 157
    assert location.size_of() == 160
    assert location.size_of("a/trial-9") == 0
    location.remove_all("a/trial-1")
    assert location.size_of("a") == 7 and not location.exists("a/trial-1/0.lkc")
    location.remove_all("missing/prefix")  # nothing there: fine
    location.remove_all()
    assert location.size_of() == 0
    ref = location.write("c/0.lkc", b"again")  # the location is still usable
    assert location.read(ref) == b"again"


def test_remove_all_at_a_buckets_root_keeps_the_bucket(s3):
    import s3fs

    url, options = s3
    bucket = f"labkit-root-{uuid.uuid4().hex[:8]}"
    s3fs.S3FileSystem(**options, skip_instance_cache=True).mkdir(bucket)
    where = CheckpointLocation(f"s3://{bucket}", options)
    where.write("sweep/trial-1/0.lkc", b"abc")
    where.remove_all()
    assert where.size_of() == 0
    assert where.read(where.write("sweep/trial-1/1.lkc", b"d")) == b"d"  # the bucket is there
    where.remove_all()


def test_probe_passes_and_leaves_nothing_behind(location):
    location.probe("this test")
    assert location.size_of() == 0


def test_probe_on_a_bucket_that_does_not_exist_names_the_url_and_the_worker(s3):
    _, options = s3
    where = CheckpointLocation("s3://labkit-no-such-bucket/sweeps", options)
    with pytest.raises(StorageError) as info:
        where.probe("worker tcp://127.0.0.1:4321")
    text = str(info.value)
    assert "s3://labkit-no-such-bucket/sweeps" in text
    assert "worker tcp://127.0.0.1:4321" in text
    assert info.value.where["worker"] == "worker tcp://127.0.0.1:4321"


def test_probe_of_an_endpoint_nobody_listens_on_names_the_url(s3):
    url, options = s3
    unreachable = {
        **options,
        "endpoint_url": "http://127.0.0.1:9",  # the discard port: refused at once
        "config_kwargs": {"retries": {"max_attempts": 1}},  # botocore would back off 10 s
    }
    where = CheckpointLocation(f"{url}/sweeps", unreachable)
    with pytest.raises(StorageError, match="s3://labkit-tests/sweeps") as info:
        where.probe("the client")
    assert "the client" in str(info.value) and "EndpointConnectionError" in str(info.value)


def _read_only_folder(tmp_path):
    """A folder no write can go to: chmod'ed read-only, or (as root, who ignores modes) sysfs."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    if os.geteuid() == 0:
        return "/sys/labkit-checkpoints"  # sysfs refuses new folders, even to root
    return str(folder / "checkpoints")


def test_probe_on_a_read_only_folder_names_the_folder_and_the_worker(tmp_path):
    url = _read_only_folder(tmp_path)
    with pytest.raises(StorageError) as info:
        CheckpointLocation(url).probe("worker tcp://127.0.0.1:4321")
    assert url in str(info.value) and "worker tcp://127.0.0.1:4321" in str(info.value)
    assert isinstance(info.value, OSError) and info.value.errno is not None
    (tmp_path / "read-only").chmod(0o755)


def test_probe_on_a_folder_under_a_file_names_the_folder(tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    url = str(tmp_path / "a-file" / "checkpoints")
    with pytest.raises(StorageError, match="cannot be used from worker w1") as info:
        CheckpointLocation(url).probe("worker w1")
    assert url in str(info.value)


def test_an_unknown_protocol_is_a_storage_error():
    with pytest.raises(StorageError, match="labkit-nothing://x"):
        CheckpointLocation("labkit-nothing://x").probe()


def test_a_location_pickles_without_its_file_system(location):
    location.write("k.lkc", b"opened")  # the file system is made now, and must not travel
    back = pickle.loads(pickle.dumps(location))
    assert back == location and hash(back) == hash(location)
    assert back.storage_options == location.storage_options
    assert back.read(location.write("k.lkc", b"abc")) == b"abc"


def _write_on_worker(location, key, seed):
    """Run on a worker process: make the bytes there, write them; the reference and the pid."""
    return location.write(key, _blob(seed, 1 << 20), step=seed), os.getpid()


def _exists_on_worker(location, ref):
    """Run on a worker process: whether it sees ``ref``."""
    return location.exists(ref)


def test_a_worker_process_writes_and_the_client_reads(location, cluster):
    mine = location.write("sweep/trial-1/client.lkc", b"c" * 10)
    assert location.size_of() == 10  # the client has listed the folder (s3fs caches listings)
    with own_client(cluster.scheduler_address) as client:
        future = client.submit(_write_on_worker, location, "sweep/trial-1/0.lkc", 7, pure=False)
        ref, pid = future.result(timeout=120)
        assert pid != os.getpid()
        assert location.exists(ref) and location.size_of() == ref.nbytes + mine.nbytes
        assert location.read(ref) == _blob(7, 1 << 20)
        location.delete(ref)  # gone for the worker too
        assert not client.submit(_exists_on_worker, location, ref, pure=False).result(timeout=120)
        ref, _ = client.submit(
            _write_on_worker, location, "sweep/trial-1/0.lkc", 8, pure=False
        ).result(timeout=120)
        assert location.exists(ref) and location.read(ref) == _blob(8, 1 << 20)


def test_two_s3_servers_bind_ports_of_their_own_and_leave_nothing_behind():
    import socket

    from tests.s3 import CREDENTIALS, moto_s3

    before = {name: os.environ.get(name) for name in CREDENTIALS}
    with moto_s3("labkit-one") as (one, first), moto_s3("labkit-two") as (two, second):
        assert first["endpoint_url"] != second["endpoint_url"]  # port 0: no race for one
        a = CheckpointLocation(one, first)
        b = CheckpointLocation(two, second)
        assert a.read(a.write("k.lkc", b"1")) == b"1" and b.size_of() == 0
    assert {name: os.environ.get(name) for name in CREDENTIALS} == before
    port = int(first["endpoint_url"].rsplit(":", 1)[1])
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass  # the server stopped: nothing listens there any more


def test_write_with_streams_what_fill_writes_and_reads_back_digest_checked(location):
    import io

    from labkit.checkpoints import read_snapshot, write_snapshot

    state = {"weights": np.arange(100_000, dtype=np.float64), "epoch": 3}
    ref = location.write_with(
        "trial-1/3.lkc", lambda fh: write_snapshot(state, fh, "checkpoint"), step=3
    )
    blob = location.read(ref)
    assert ref.step == 3 and ref.nbytes == len(blob)
    assert ref.digest == digest_of(blob)
    back = read_snapshot(io.BytesIO(blob), "here", root="checkpoint")
    assert back["epoch"] == 3 and np.array_equal(back["weights"], state["weights"])
    pieces = location.write_with(
        "trial-1/pieces.lkc",
        lambda fh: [fh.write(b"ab"), fh.write(memoryview(np.arange(3, dtype=np.int16)))],
    )
    assert location.read(pieces) == b"ab" + np.arange(3, dtype=np.int16).tobytes()


def test_write_with_leaves_nothing_when_fill_raises_and_its_error_goes_on(location):
    def half_then_fail(fh):
        fh.write(b"x" * 1000)
        raise ValueError("the encoder refused a field")

    with pytest.raises(ValueError, match="refused a field"):
        location.write_with("trial-2/0.lkc", half_then_fail)
    assert not location.exists("trial-2/0.lkc")
    assert location.size_of() == 0  # no temp file left either


def test_write_with_into_a_read_only_place_is_a_storage_error_naming_it(tmp_path):
    url = _read_only_folder(tmp_path)
    with pytest.raises(StorageError, match="writing a checkpoint") as info:
        CheckpointLocation(url).write_with("t/0.lkc", lambda fh: fh.write(b"abc"))
    assert f"{url}/t/0.lkc" in str(info.value)
    (tmp_path / "read-only").chmod(0o755)
