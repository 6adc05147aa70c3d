"""Fixtures of the experiment tests: an in-process cluster (threads, GIL-holding trials in processes),
and four worker processes a module shares (group trials)."""

from __future__ import annotations

import pytest

import labkit as lk


@pytest.fixture
def threads_scheduler():
    """``mode="auto"`` with two worker threads of this process (and an offload pool)."""
    with lk.DaskScheduler(mode="auto", n_workers=1, threads_per_worker=2) as s:
        yield s


@pytest.fixture(scope="module")
def four():
    """Four worker processes, one thread each, shared by a module's tests."""
    with lk.DaskScheduler(mode="processes", n_workers=4, threads_per_worker=1) as s:
        yield s
