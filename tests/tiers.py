"""The two tiers of tests: which tests are ``slow``, ``browser`` or ``serial``, said once.

``make check`` runs the tests marked neither ``slow`` nor ``browser`` (a few minutes);
``make test`` runs them all, on pytest-xdist workers, then the ``serial`` ones alone.
The marks are given here at collection (``tests/conftest.py`` calls :func:`mark_tiers`),
by rules rather than by a mark in each file, so that a test moved or added is placed by
what it uses:

- ``browser``: a test whose ``needs`` mark names Chromium or JupyterLab (tests/system.py).
- ``slow``: a test that uses a fixture of :data:`SLOW_FIXTURES` (worker processes, a
  cluster of network namespaces), or lies in a file or folder of :data:`SLOW_PATHS`, or
  is marked ``soak`` (the worker-loss and stress tests); a ``slow`` mark in a file stays.
- ``serial``: a test of :data:`SERIAL_PATHS`: it measures time or load, so it must not
  share the two cores with other tests; ``make test`` runs these after the others, alone.
"""

from __future__ import annotations

import pytest

__all__ = ["BROWSER_TOOLS", "SERIAL_PATHS", "SLOW_FIXTURES", "SLOW_PATHS", "mark_tiers"]

#: Tools of a ``needs`` mark that make a test a browser test.
BROWSER_TOOLS = frozenset({"chromium", "jupyter"})

#: Fixtures that start worker processes or whole clusters: a test using one is slow.
SLOW_FIXTURES = frozenset({"cluster", "four", "multihost", "make_multihost"})

#: Files or folders (relative to the repository root, '/'-separated) whose tests are slow.
SLOW_PATHS: tuple[str, ...] = ("tests/multihost/", "tests/notebooks/")

#: Files or test ids (a prefix of the node id) that must run alone (see the module's doc).
SERIAL_PATHS: tuple[str, ...] = ()


def mark_tiers(items: list[pytest.Item]) -> None:
    """Add the ``browser``, ``slow`` and ``serial`` marks to the collected ``items``."""
    for item in items:
        if _is_browser(item):
            item.add_marker(pytest.mark.browser)
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)
        if item.nodeid.startswith(SERIAL_PATHS):
            item.add_marker(pytest.mark.serial)


def _is_browser(item: pytest.Item) -> bool:
    """Whether a ``needs`` mark of the test names a browser tool."""
    return any(BROWSER_TOOLS.intersection(m.args) for m in item.iter_markers("needs"))


def _is_slow(item: pytest.Item) -> bool:
    """Whether the test starts processes or clusters, lies in a slow path, or is a soak."""
    if item.get_closest_marker("soak") is not None:
        return True
    if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    return item.nodeid.startswith(SLOW_PATHS)
