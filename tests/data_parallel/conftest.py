"""Fixtures of the data-parallel tests."""

from __future__ import annotations

import threading

import pytest


@pytest.fixture
def trainers():
    """Trainers made by a test, closed at its end (their replica threads stop)."""
    made = []
    yield made
    for t in made:
        t.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("labkit-replica")]
