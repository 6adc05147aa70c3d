"""Trackers: events (or a store's rows) in, frozen snapshots and what changed out.

No widget, no Bokeh, no HTML here: renderers read what a tracker hands out. It may import
labkit's events, records, errors and the experiments' store and sweeps, and the views' shared
plumbing (this folder's parent); never another folder of :mod:`labkit.views`.
"""

__all__: list[str] = []
