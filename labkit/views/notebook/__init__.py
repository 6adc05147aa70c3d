"""The notebook's own views: the live board of a scheduler, a run or a trainer, HTML cards,
rich display, the program runner, and widgets that answer while the kernel is busy.

It may import :mod:`labkit.views.trackers`; the sweep board is :mod:`labkit.views.sweep`.
"""

__all__: list[str] = []
