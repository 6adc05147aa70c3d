"""Checkpoint locations to test on: a local folder and a bucket behind a real S3 API (moto)."""

import uuid

import pytest

from labkit.checkpoints.location import CheckpointLocation
from tests.s3 import moto_s3


@pytest.fixture(scope="module")
def s3():
    """``(url, storage_options)`` of a bucket on moto's S3 server, stopped after the module."""
    with moto_s3() as bucket:
        yield bucket


@pytest.fixture(params=["local", "s3"])
def location(request, tmp_path):
    """A fresh CheckpointLocation: a folder of tmp_path, or a prefix of the moto bucket."""
    if request.param == "local":
        yield CheckpointLocation(str(tmp_path / "checkpoints"))
        return
    url, options = request.getfixturevalue("s3")
    where = CheckpointLocation(f"{url}/run-{uuid.uuid4().hex[:8]}", options)
    yield where
    where.remove_all()
