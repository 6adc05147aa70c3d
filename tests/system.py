"""What a test needs of the machine beyond Python packages: one helper for every such need.

A test that needs a system tool says so once, with the mark
``@pytest.mark.needs("chromium")`` (or :func:`require` inside a fixture or a
helper such as :func:`tests.browser.chromium`).  Where the tool is missing the
test is skipped, and the reason names the tool and the command that installs
it; the end of the run lists every missing tool once.  CI sets
``LABKIT_REQUIRE_SYSTEM=1`` (``LABKIT_REQUIRE_MULTIHOST=1``, its older name,
still counts), which turns each such skip into a failure, so that nothing
silently stops running there.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from typing import Callable

import pytest

__all__ = ["TOOLS", "Tool", "missing", "require", "required_here", "skip_or_fail",
           "check_marks", "MISSING_SEEN"]

#: Tools found missing during this run (name -> install command), for the summary.
MISSING_SEEN: dict[str, str] = {}


@dataclasses.dataclass(frozen=True)
class Tool:
    """A system tool: how to find it and how to install it."""

    what: str
    install: str
    find: Callable[[], bool]


def _which(command: str) -> Callable[[], bool]:
    return lambda: shutil.which(command) is not None


def _chromium() -> bool:
    from tests.browser import CHROMIUM
    return os.path.exists(CHROMIUM)


def _can_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


def _jupyter() -> bool:
    return os.path.exists(os.path.join(os.path.dirname(sys.executable), "jupyter"))


TOOLS = {
    "chromium": Tool("Debian's Chromium (browser tests)", "apt-get install chromium", _chromium),
    "jupyter": Tool("JupyterLab in this environment", "pip install -e '.[test]'", _jupyter),
    "node": Tool("Node.js (the widgets' front-end tests)", "apt-get install nodejs",
                 _which("node")),
    "ip": Tool("iproute2's `ip` (multi-host tests)", "apt-get install iproute2", _which("ip")),
    "tc": Tool("iproute2's `tc` (link shaping)", "apt-get install iproute2", _which("tc")),
    "iptables-legacy": Tool("iptables-legacy (link delay)", "apt-get install iptables",
                            _which("iptables-legacy")),
    "mount": Tool("root and mount(8), for a small tmpfs (full-disk tests)",
                  "run the tests as root (CI does)", _can_mount),
}


def required_here() -> bool:
    """Whether missing tools fail tests instead of skipping them (CI)."""
    return any(os.environ.get(name) == "1"
               for name in ("LABKIT_REQUIRE_SYSTEM", "LABKIT_REQUIRE_MULTIHOST"))


def missing(*names: str) -> list[str]:
    """The tools of ``names`` that this machine lacks."""
    unknown = [n for n in names if n not in TOOLS]
    if unknown:
        raise KeyError(f"unknown system tool(s) {unknown}; known: {sorted(TOOLS)}")
    return [n for n in names if not TOOLS[n].find()]


def skip_or_fail(reason: str, install: str | None = None) -> None:
    """Skip the test for ``reason`` (saying how to install what lacks), or fail it in CI."""
    text = f"{reason}; install: {install}" if install else reason
    if required_here():
        pytest.fail(f"{text} (LABKIT_REQUIRE_SYSTEM=1: nothing may skip)", pytrace=False)
    pytest.skip(text)


def require(*names: str) -> None:
    """Skip (or fail in CI) unless every tool of ``names`` is here."""
    lacking = missing(*names)
    if not lacking:
        return
    for name in lacking:
        MISSING_SEEN[name] = TOOLS[name].install
    what = ", ".join(f"{TOOLS[n].what} [{n}]" for n in lacking)
    install = "; ".join(dict.fromkeys(TOOLS[n].install for n in lacking))
    skip_or_fail(f"needs {what}, not found", install)


def check_marks(item) -> None:
    """Skip (or fail in CI) the test ``item`` if its ``needs`` marks name a missing tool."""
    for mark in item.iter_markers("needs"):
        require(*mark.args)
