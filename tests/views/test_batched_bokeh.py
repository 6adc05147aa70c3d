"""A batched Bokeh widget sends no patch a view could misapply.

A view made from the widget's first document and then sent patches of rows it
never got holds columns of uneven lengths (CI saw ``name`` with 0 rows and
``busy`` with 2 in notebook 01's board).  A widget whose views are counted back
to the kernel while a cell runs (``hears_views``) therefore sends nothing before
its first view is counted, then the whole document, then patches.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("jupyter_bokeh")

from bokeh.models import ColumnDataSource  # noqa: E402
from bokeh.plotting import figure  # noqa: E402

from labkit.views.bokeh.batched import BatchedBokehModel  # noqa: E402


def _model():
    """A widget over one figure whose source starts empty; returns (model, source)."""
    source = ColumnDataSource({"name": [], "busy": []}, name="rows")
    plot = figure(y_range=["a", "b"], height=100)
    plot.hbar(y="name", right="busy", source=source, height=0.5)
    return BatchedBokehModel(plot), source


def _count_view(model, views: int) -> None:
    """What the kernel does when the front-end says how many views it shows."""
    model._handle_msg({"content": {"data": {
        "method": "update", "state": {"_view_count": views}, "buffer_paths": []}},
        "buffers": []})


def _patches(comms, model, since: int) -> list:
    """The patch messages ``model`` sent from message ``since`` on."""
    return comms.of(model, "custom", since)


def _bundle_names(bundle) -> list:
    """The ``rows`` source's ``name`` column in a render bundle (as sent: JSON text)."""
    found: list = []

    def walk(node):
        if isinstance(node, dict):
            attributes = node.get("attributes", {})
            if node.get("name") == "ColumnDataSource" and attributes.get("name") == "rows":
                found.append(dict(attributes["data"]["entries"])["name"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(bundle)["docs_json"] if isinstance(bundle, str) else bundle["docs_json"])
    (names,) = found
    return names


def _change(model, source) -> None:
    """The rows appear, then one cell changes: what a board's first two draws send."""
    with model.batch():
        source.data = {"name": ["a", "b"], "busy": [0.0, 0.0]}
    with model.batch():
        source.patch({"busy": [(0, 0.5), (1, 0.25)]})


def test_a_widget_that_hears_its_views_sends_nothing_before_the_first(comms):
    model, source = _model()
    model.hears_views = True
    mark = len(comms)
    _change(model, source)
    source.patch({"busy": [(0, 0.75)]})            # outside a batch: held too
    assert _patches(comms, model, mark) == []      # no view: nothing it could misapply


def test_its_first_view_gets_the_whole_document_then_patches(comms):
    model, source = _model()
    model.hears_views = True
    _change(model, source)
    mark = len(comms)
    _count_view(model, 1)
    assert model.needs_resync
    with model.batch():                             # a draw while the view waits: held
        source.patch({"busy": [(1, 0.5)]})
    assert _patches(comms, model, mark) == []
    model.resync()                                  # the writer's next draw
    (update,) = comms.updates(model, since=mark)
    assert _bundle_names(update["render_bundle"]) == ["a", "b"]  # rows it got no patch for
    after = len(comms)
    with model.batch():
        source.patch({"busy": [(0, 1.0)]})
    assert len(_patches(comms, model, after)) == 3  # header, metadata, content


def test_a_widget_that_cannot_hear_its_views_sends_at_once(comms):
    model, source = _model()
    assert model.hears_views is False               # no kernel subshell: counts come late
    mark = len(comms)
    _change(model, source)
    assert len(_patches(comms, model, mark)) == 6   # two batches of three messages


def test_a_view_gone_and_a_new_one_get_the_whole_document_again(comms):
    model, source = _model()
    model.hears_views = True
    _count_view(model, 1)
    model.resync()
    _count_view(model, 0)                           # the output was cleared
    mark = len(comms)
    _change(model, source)
    assert _patches(comms, model, mark) == []       # no view to patch
    _count_view(model, 1)
    assert model.needs_resync
