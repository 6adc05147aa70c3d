"""The Bokeh views: the dashboard's server in a thread, its components (tasks, devices, nodes,
runs, sweeps, stores) and Bokeh layouts as notebook widgets.

It may import :mod:`labkit.views.trackers`, the sweep board's palette and words
(:mod:`labkit.views.sweep.style`) and the views' shared plumbing; never the notebook's widgets.
"""

__all__: list[str] = []
