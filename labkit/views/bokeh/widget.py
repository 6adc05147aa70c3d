"""Bokeh inside the notebook: BokehJS loaded inline once, layouts as batching widgets.

:func:`bokeh_widget` wraps a Bokeh layout as a ``jupyter_bokeh`` widget whose
document changes can be batched into one patch, and :func:`load_bokehjs_once`
puts BokehJS into the page inline (the machines are offline: no CDN).

Examples
--------
>>> from IPython import get_ipython
>>> load_bokehjs_once() or get_ipython() is None   # loaded in a kernel; a script has none
True
"""

from __future__ import annotations

import importlib.util
import logging
from typing import Any

__all__ = ["bokeh_widget", "load_bokehjs_once"]

logger = logging.getLogger("labkit.views")

#: Whether jupyter_bokeh is installed; without it a board goes without its Bokeh components.
HAS_JUPYTER_BOKEH = importlib.util.find_spec("jupyter_bokeh") is not None
if HAS_JUPYTER_BOKEH:
    from .batched import BatchedBokehModel

_bokehjs_loaded = False  # BokehJS goes into the page once per kernel (this process)


def load_bokehjs_once() -> bool:
    """Load BokehJS inline into the notebook, once per kernel; returns whether it is loaded."""
    global _bokehjs_loaded
    if _bokehjs_loaded:
        return True
    try:
        from IPython import get_ipython

        if get_ipython() is None:
            return False
        from bokeh.io import output_notebook
        from bokeh.resources import INLINE

        output_notebook(INLINE, hide_banner=True)
        _bokehjs_loaded = True
    except Exception:  # no BokehJS: the rest of a board still works
        logger.exception("labkit: could not load BokehJS")
    return _bokehjs_loaded


def bokeh_widget(layout: Any) -> BatchedBokehModel | None:
    """``layout`` as a jupyter_bokeh widget with a ``batch()`` context, or None without it."""
    return BatchedBokehModel(layout) if HAS_JUPYTER_BOKEH else None
