"""The one helper for system tools: a missing tool skips with how to install it, or fails in CI."""

from __future__ import annotations

import pytest

from tests import system


@pytest.fixture
def lacking(monkeypatch):
    """A tool this machine is made to lack."""
    tool = system.Tool("a tool for tests", "apt-get install lacking-tool", lambda: False)
    monkeypatch.setitem(system.TOOLS, "lacking", tool)
    monkeypatch.delitem(system.MISSING_SEEN, "lacking", raising=False)
    return "lacking"


@pytest.mark.parametrize("switch", [None, "LABKIT_REQUIRE_SYSTEM", "LABKIT_REQUIRE_MULTIHOST"])
def test_a_missing_tool_skips_with_its_install_command_or_fails_in_ci(monkeypatch, lacking,
                                                                     switch):
    for name in ("LABKIT_REQUIRE_SYSTEM", "LABKIT_REQUIRE_MULTIHOST"):
        monkeypatch.delenv(name, raising=False)
    if switch:
        monkeypatch.setenv(switch, "1")
    outcome = pytest.fail.Exception if switch else pytest.skip.Exception
    with pytest.raises(outcome, match=r"needs a tool for tests \[lacking\], not found; "
                                      r"install: apt-get install lacking-tool"):
        system.require(lacking)
    assert system.MISSING_SEEN["lacking"] == "apt-get install lacking-tool"
    system.MISSING_SEEN.pop("lacking")


def test_present_tools_pass_and_unknown_names_are_a_mistake(monkeypatch):
    monkeypatch.setitem(system.TOOLS, "here", system.Tool("x", "y", lambda: True))
    system.require("here")
    assert system.missing("here") == []
    with pytest.raises(KeyError, match="unknown system tool"):
        system.missing("no-such-tool")


def test_the_needs_mark_of_a_test_is_checked_before_it_runs(monkeypatch, lacking, request):
    """conftest's ``pytest_runtest_setup`` calls ``check_marks`` on every test."""
    monkeypatch.delenv("LABKIT_REQUIRE_SYSTEM", raising=False)
    monkeypatch.delenv("LABKIT_REQUIRE_MULTIHOST", raising=False)
    system.check_marks(request.node)   # no mark yet: nothing happens
    request.node.add_marker(pytest.mark.needs(lacking))
    with pytest.raises(pytest.skip.Exception, match="lacking"):
        system.check_marks(request.node)
    system.MISSING_SEEN.pop("lacking")
