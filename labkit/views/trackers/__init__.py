"""Trackers: events (or a store's rows) in, frozen snapshots and what changed out.

No widget, no Bokeh, no HTML here: renderers read what a tracker hands out. It may import
labkit's events, records and errors; never another folder of :mod:`labkit.views`.
"""

__all__: list[str] = []
