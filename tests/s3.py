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
import subprocess
import sys
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


#: The server run in a Python of its own: it prints its port, serves until stdin closes.
_SERVE = (
    "import sys; from moto.server import ThreadedMotoServer; "
    "server = ThreadedMotoServer('127.0.0.1', 0, verbose=False); server.start(); "
    "print(server.get_host_and_port()[1], flush=True); sys.stdin.read(); server.stop()"
)


@contextlib.contextmanager
def _in_this_process() -> Iterator[int]:
    """moto's server on a thread of this process; its port."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        yield server.get_host_and_port()[1]  # the port the system chose when binding 0
    finally:
        server.stop()


@contextlib.contextmanager
def _in_a_process_of_its_own() -> Iterator[int]:
    """moto's server in a child Python (its objects are not this process's memory); its port."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        port = proc.stdout.readline().decode().strip()  # type: ignore[union-attr]
        if not port.isdigit():
            raise RuntimeError(f"moto's server did not start (it printed {port!r})")
        yield int(port)
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def moto_s3(bucket: str = "labkit-tests", own_process: bool = False) -> Iterator[tuple[str, dict]]:
    """Start moto's S3 server, make ``bucket``; yield ``(url, storage_options)``; stop it all.

    ``own_process``: run the server in a child Python, for a test that measures this
    process's memory (moto keeps every object it is sent in memory).
    """
    import s3fs

    with contextlib.ExitStack() as stack:
        stack.enter_context(_environment(CREDENTIALS))
        stack.enter_context(_quiet("werkzeug"))  # the server logs every request to stderr
        port = stack.enter_context(
            _in_a_process_of_its_own() if own_process else _in_this_process()
        )
        # instances hold sessions to the server: none outlives it
        stack.callback(s3fs.S3FileSystem.clear_instance_cache)
        options = {
            "endpoint_url": f"http://127.0.0.1:{port}",
            "key": CREDENTIALS["AWS_ACCESS_KEY_ID"],
            "secret": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        }
        s3fs.S3FileSystem(**options, skip_instance_cache=True).mkdir(bucket)
        yield f"s3://{bucket}", options


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """Set ``values`` in os.environ; put back what was there after."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _quiet(logger: str) -> Iterator[None]:
    """Only warnings from ``logger`` while inside."""
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.WARNING)
    try:
        yield
    finally:
        log.setLevel(level)
