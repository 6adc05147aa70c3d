"""The Bokeh views: the dashboard's server in a thread, its components (tasks, devices, nodes,
runs, sweeps, stores) and Bokeh layouts as notebook widgets.

It may import :mod:`labkit.views.trackers` and :mod:`labkit.views.sweep` (the data of a sweep's plots).
"""

__all__: list[str] = []
