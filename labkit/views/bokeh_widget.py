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

import contextlib
import json
import logging
import threading

__all__ = ["bokeh_widget", "load_bokehjs_once"]

logger = logging.getLogger("labkit.views")

_bokehjs_loaded = False  # BokehJS goes into the page once per kernel (this process)
_widget_class = None


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


def bokeh_widget(layout):
    """``layout`` as a jupyter_bokeh widget with a ``batch()`` context, or None without it."""
    cls = _bokeh_widget_class()
    return cls(layout) if cls is not None else None


def _bokeh_widget_class():
    """The batching BokehModel subclass, made on first use (jupyter_bokeh is imported lazily)."""
    global _widget_class
    if _widget_class is not None:
        return _widget_class
    try:
        from bokeh.protocol import Protocol
        from jupyter_bokeh import BokehModel
    except ImportError:
        return None

    class BatchedBokehModel(BokehModel):
        """A BokehModel that can send many document changes as one PATCH-DOC.

        jupyter_bokeh sends every document change as its own patch (three comm
        messages each); a stream, a patch and a property change of one redraw
        would be nine.  Inside :meth:`batch` they are collected and sent as one.
        """

        _pending = None
        needs_resync = False  # a new view appeared: it needs the whole document once
        on_new_view = None  # called (from the kernel's thread) when a view appears

        def __init__(self, layout, **kwargs):
            # With a number here the front-end counts its views back to us: patches sent
            # before a view existed are lost to it, so a new view gets the whole state.
            self._resync_lock = threading.Lock()
            super().__init__(layout, _view_count=0, **kwargs)
            self.observe(self._views_changed, names="_view_count")

        def _views_changed(self, change) -> None:
            if (change["new"] or 0) > (change["old"] or 0):
                self.needs_resync = True
                if self.on_new_view is not None:
                    self.on_new_view()

        def resync(self) -> None:
            """Send the whole document again (once per new view; every view re-renders)."""
            with self._resync_lock:  # the writer and the kernel's thread may both ask
                self.needs_resync = False
                self.render_bundle = self._model_to_traits(self._model)

        @contextlib.contextmanager
        def batch(self):
            """Collect the document changes made inside; send them as one patch at the end."""
            self._pending = []
            try:
                yield self
            finally:
                events, self._pending = self._pending, None
                # A view that appeared meanwhile rendered an older document: patches
                # of this one would not fit it (BokehJS: "inconsistent lengths"). It
                # gets the whole document instead (resync), which holds these changes.
                if events and not self.needs_resync:
                    self._send_patch(events)

        def _document_patched(self, event) -> None:
            if event.setter is self:  # came from the front-end
                return
            if self._pending is not None:
                self._pending.append(event)
            else:
                self._send_patch([event])

        def _send_patch(self, events) -> None:
            """Send events as one PATCH-DOC, framed as jupyter_bokeh's front-end expects."""
            msg = Protocol().create("PATCH-DOC", events)
            for part in (msg.header_json, msg.metadata_json, msg.content_json):
                self.send({"msg": "patch", "payload": part})
            for buffer in msg.buffers:
                self.send({"msg": "patch", "payload": json.dumps(buffer.ref)})
                self.send({"msg": "patch"}, [buffer.to_bytes()])

        def close(self) -> None:
            if self.comm is None:  # closed already (jupyter_bokeh fails on a second close)
                return
            super().close()

    _widget_class = BatchedBokehModel
    return _widget_class
