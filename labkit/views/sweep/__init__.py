"""The sweep board in the notebook: one anywidget whose frames carry only what changed, the
front-end's ES modules joined for it, and the words, axes, brushes and curves its frames hold.

It may import :mod:`labkit.views.trackers` and the views' shared loop; never Bokeh's folder.
"""

__all__: list[str] = []
