"""Fixtures for multi-host tests: clusters whose hosts are network namespaces.

They need root (or CAP_NET_ADMIN + CAP_SYS_ADMIN) and ``ip netns``.  Where
that is missing the tests are skipped with the reason, unless
``LABKIT_REQUIRE_MULTIHOST=1`` (set by CI), which turns the skip into a failure
so that CI cannot silently stop running them.
"""

from __future__ import annotations


import pytest

from tests.multihost.iproute import skip_or_fail
from tests.multihost.netns import NetnsCluster, available


def _require_multihost() -> None:
    """Skip (or fail, under LABKIT_REQUIRE_MULTIHOST=1) where namespaces cannot be made."""
    ok, why = available()
    if not ok:
        skip_or_fail(f"multi-host tests need root and network namespaces (ip netns): {why}")


@pytest.fixture(scope="session")
def multihost():
    """A started cluster shared by the session: scheduler on host 0, workers on hosts 1 and 2."""
    _require_multihost()
    with NetnsCluster(n_workers=2) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def multihost_client(multihost):
    """A ``distributed.Client`` on ``multihost`` from the root namespace."""
    with multihost.client() as client:
        yield client


@pytest.fixture
def make_multihost():
    """Factory ``make_multihost(n_workers=2, **kwargs) -> NetnsCluster`` (started).

    For tests that damage their cluster (kill a worker); every cluster made is
    closed after the test.
    """
    _require_multihost()
    made = []

    def make(n_workers: int = 2, **kwargs) -> NetnsCluster:
        cluster = NetnsCluster(n_workers=n_workers, **kwargs)
        made.append(cluster)
        return cluster.start()

    yield make
    for cluster in made:
        cluster.close()


@pytest.fixture
def shaping_rights():
    """Nothing started: the skip (or failure) where namespaces or link shaping cannot be made."""
    _require_multihost()
    from tests.multihost.shaping import missing_tools
    if missing_tools():
        skip_or_fail("link shaping needs " + ", ".join(missing_tools()))
