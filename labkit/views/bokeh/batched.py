"""A Bokeh layout as a notebook widget whose document changes go out as one patch.

jupyter_bokeh's ``BokehModel`` sends every document change as its own patch
(three comm messages each): a stream, a patch and a property change of one
redraw would be nine.  :class:`BatchedBokehModel` collects the changes made
inside :meth:`~BatchedBokehModel.batch` and sends them as one, and gives a
view that appears late the whole document (:meth:`~BatchedBokehModel.resync`).
Importing this module imports jupyter_bokeh (:mod:`.bokeh_widget` does so only
when it is installed).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

from bokeh.protocol import Protocol
from jupyter_bokeh import BokehModel

__all__ = ["BatchedBokehModel"]


class BatchedBokehModel(BokehModel):
    """A BokehModel that can send many document changes as one PATCH-DOC.

    jupyter_bokeh sends every document change as its own patch (three comm
    messages each); a stream, a patch and a property change of one redraw
    would be nine.  Inside :meth:`batch` they are collected and sent as one.
    """

    _pending: list | None = None
    needs_resync = False  # a new view appeared: it needs the whole document once
    on_new_view: Callable[[], None] | None = None  # called (kernel's thread) when a view appears
    #: Whether the front-end's count of views reaches us even while a cell runs (the
    #: comm is served by a kernel subshell).  Then nothing is sent before the first view
    #: is counted: a view made meanwhile rendered the first document and would apply
    #: patches to rows it never got (BokehJS: columns of uneven lengths).  It gets the
    #: whole document when it is counted.
    hears_views = False
    _views_known = 0  # views counted, set only after needs_resync (the writer reads both)

    def __init__(self, layout: Any, **kwargs: Any):
        # With a number here the front-end counts its views back to us: patches sent
        # before a view existed are lost to it, so a new view gets the whole state.
        self._resync_lock = threading.Lock()
        super().__init__(layout, _view_count=0, **kwargs)
        self.observe(self._views_changed, names="_view_count")

    def _views_changed(self, change) -> None:
        new = change["new"] or 0
        grew = new > (change["old"] or 0)
        if grew:
            self.needs_resync = True  # before the count: a patch is never sent in between
        self._views_known = new
        if grew and self.on_new_view is not None:
            self.on_new_view()

    def _may_send(self) -> bool:
        """Whether a patch now fits every view (none waits for the whole document)."""
        if self.needs_resync:
            return False
        return not self.hears_views or self._views_known > 0

    def resync(self) -> None:
        """Send the whole document again (once per new view; every view re-renders)."""
        with self._resync_lock:  # the writer and the kernel's thread may both ask
            self.needs_resync = False
            self.render_bundle = self._model_to_traits(self._model)

    @contextlib.contextmanager
    def batch(self) -> Iterator[BatchedBokehModel]:
        """Collect the document changes made inside; send them as one patch at the end."""
        self._pending = []
        try:
            yield self
        finally:
            events, self._pending = self._pending, None
            # A view that appeared meanwhile rendered an older document: patches
            # of this one would not fit it (BokehJS: "inconsistent lengths"). It
            # gets the whole document instead (resync), which holds these changes.
            if events:
                self._send_if_fits(events)

    def _document_patched(self, event) -> None:
        if event.setter is self:  # came from the front-end
            return
        if self._pending is not None:
            self._pending.append(event)
        else:
            self._send_if_fits([event])

    def _send_if_fits(self, events) -> None:
        """Send ``events`` unless a view waits for the whole document (which holds them)."""
        with self._resync_lock:  # not between a resync's check and its document
            if self._may_send():
                self._send_patch(events)

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
