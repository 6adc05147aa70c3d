"""Views for terminals and logs: progress bars, one per phase.

It may import :mod:`labkit.views.trackers`.
"""

__all__: list[str] = []
