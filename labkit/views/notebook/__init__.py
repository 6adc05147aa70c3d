"""The notebook's own views: the live board of a scheduler, a run or a trainer, HTML cards,
rich display, the program runner and the task lanes.

It may import :mod:`labkit.views.trackers`, :mod:`labkit.views.sweep` (a run's sweep board)
and the views' shared plumbing; :mod:`labkit.views.bokeh` only lazily, where a board opts in.
"""

__all__: list[str] = []
