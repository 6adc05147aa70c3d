"""Object storage through a real S3 API for tests: moto's server over HTTP, a bucket made by s3fs.

The server binds port 0 and reads back the port the system gave it, so two test
runs on the machine never race for a port (picking a free port, then binding it
later, once failed in CI).  Nothing here is a mock: s3fs and botocore speak HTTP
to moto's server as they would to S3.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

__all__ = ["CREDENTIALS", "moto_s3"]

#: What botocore reads from the environment while the server runs: fake keys, a region,
#: and no look-up of an instance's metadata (there is no cloud here to ask).
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "labkit-testing",
    "AWS_SECRET_ACCESS_KEY": "labkit-testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


@contextlib.contextmanager
def moto_s3(bucket: str = "labkit-tests") -> Iterator[tuple[str, dict]]:
    """Start moto's S3 server, make ``bucket``; yield ``(url, storage_options)``; stop it all."""
    import s3fs
    from moto.server import ThreadedMotoServer

    saved = {name: os.environ.get(name) for name in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    requests_log = logging.getLogger("werkzeug")  # the server logs every request to stderr
    level = requests_log.level
    requests_log.setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()  # the port the system chose when binding 0
        options = {
            "endpoint_url": f"http://{host}:{port}",
            "key": CREDENTIALS["AWS_ACCESS_KEY_ID"],
            "secret": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        }
        s3fs.S3FileSystem(**options, skip_instance_cache=True).mkdir(bucket)
        yield f"s3://{bucket}", options
    finally:
        server.stop()
        s3fs.S3FileSystem.clear_instance_cache()  # instances hold sessions to the stopped server
        requests_log.setLevel(level)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
