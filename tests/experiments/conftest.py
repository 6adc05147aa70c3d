"""Fixtures of the experiment tests: an in-process cluster (threads, GIL-holding trials in processes),
and four worker processes a module shares (group trials); the SQL statements labkit's store runs."""

from __future__ import annotations

import sqlite3

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


@pytest.fixture
def statements(monkeypatch):
    """Every SQL statement run on labkit's SQLite connections opened from now on."""
    seen: list[str] = []
    connect = sqlite3.connect

    def traced(*args, **kwargs):
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(seen.append)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)
    return seen
