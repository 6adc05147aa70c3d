"""The tiers (tests/tiers.py) keep a plain test in the quick tier."""

from __future__ import annotations


def test_a_plain_test_is_in_the_quick_tier(request):
    """Every test uses the session's autouse fixtures (tests/conftest.py): one whose source
    named a word of ``STARTS_PROCESSES`` marked the whole suite slow, and ``make check``
    ran 188 tests, not 1,656."""
    assert request.node.get_closest_marker("slow") is None
    assert request.node.get_closest_marker("browser") is None
    assert request.node.get_closest_marker("serial") is None
