"""The dashboard of a sweep store: every sweep's board, live while another process writes it.

``labkit dashboard --store STORE`` serves, on 127.0.0.1, what
:func:`store_dashboard` makes: a Bokeh app (:mod:`.bokeh_server`) whose
every browser session shows a picker of the store's sweeps and the picked
one's board (:mod:`.sweep_plots`: status line, table, curves, parallel
coordinates), drawn from a :class:`~.store_shelf.StoreShelf` that looks at
the store about once a second and folds in only what changed.  The store is
opened read-only: a sweep may be writing it meanwhile (WAL lets readers
in), and an archived store on a read-only disk serves too.  ``reference`` is
the Pareto view's hypervolume reference point (``--reference``), for the
sweeps with as many objectives.

Examples
--------
Not a doctest (it serves a port)::

    board = store_dashboard("experiments.db")
    print(board.url)          # http://127.0.0.1:PORT/labkit
    board.stop()
"""

from __future__ import annotations

import os

from bokeh.layouts import column
from bokeh.models import Div  # type: ignore[attr-defined]  # bokeh's stubs miss lazy exports

from ..trackers.store_shelf import StoreShelf
from .node_panel import named
from .server import BokehServer
from .sweep_pareto import check_reference
from .sweep_plots import attach

__all__ = ["store_dashboard", "StoreDashboard"]


def store_dashboard(
    path, port: int = 0, origins=(), interval: float = 1.0, reference=None
) -> StoreDashboard:
    """Serve the boards of the sweeps in the store at ``path``; stop it with ``.stop()``.

    A path with no file is an InputError naming it; a file that is not a sweep
    store a StorageError; a port that cannot be served an InputError; a
    ``reference`` that is not 2 to 4 finite numbers an InputError naming it.
    """
    reference = check_reference(reference, "store_dashboard")
    return StoreDashboard(path, port, list(origins), interval, reference)


class StoreDashboard:
    """A store's shelf of sweeps, served; :attr:`url`, :meth:`stop`."""

    def __init__(self, path, port: int, origins: list[str], interval: float, reference=None):
        self.reference = reference
        self.shelf = StoreShelf(path, interval)
        self.title = f"labkit · {os.path.basename(self.shelf.path)}"
        self.server = BokehServer(self._make_document, port, origins)
        try:
            self.server.start()
        except BaseException:
            self.shelf.stop()
            raise
        self.shelf.start()
        self.url, self.port = self.server.url, self.server.port

    def _make_document(self, doc) -> None:
        """A browser session: the store's name, then its sweeps' picker and board."""
        doc.title = self.title
        head = Div(
            text=f"<b>sweep store</b> {_escape(self.shelf.path)}", sizing_mode="stretch_width"
        )
        doc.add_root(column(named(head, "labkit-store-path"), sizing_mode="stretch_width"))
        attach(doc, self.shelf, names=self.shelf.names, reference=self.reference)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and looking; close the store."""
        self.server.stop(timeout)
        self.shelf.stop(timeout)


def _escape(text: str) -> str:
    import html

    return html.escape(text)
