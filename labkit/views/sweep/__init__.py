"""The sweep board in the notebook: one anywidget whose frames carry only what changed, the
front-end's ES modules joined for it (and every front-end file read), the words, brushes and
HTML its frames hold.

It may import :mod:`labkit.views.trackers` and the views' shared plumbing (this folder's
parent); never :mod:`labkit.views.notebook` or :mod:`labkit.views.bokeh`, which import it.
"""

__all__: list[str] = []
