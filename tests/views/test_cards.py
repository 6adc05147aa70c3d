"""Rich notebook display: HTML cards of schedulers, runs, flows and nodes."""

from __future__ import annotations

import numpy as np
import pytest

import labkit as lk
from labkit.views.notebook import cards
from labkit.views.bokeh.dashboard import dashboard, stop_dashboard

X = np.random.default_rng(3).normal(size=(300, 4))


def _rows(card: str) -> str:
    """The card's text without tags, for asserting on what a person reads."""
    import re
    return re.sub(r"<[^>]+>", " ", card)


def test_a_flow_card_lists_its_nodes_and_their_state():
    flow = lk.Flow([lk.nodes.PCA(output_dim=2), lk.nodes.QuadraticExpansion(),
                    lk.nodes.FDA(output_dim=1)])
    text = _rows(cards.flow_card(flow))
    assert "labkit Flow" in text and "3 · 1 trained" in text     # the expansion learns nothing
    assert text.count("not trained") == 2 and "nothing to train" in text
    labels = (X[:, 0] > 0).astype(int)
    flow.train([[X], None, [(X, labels)]])
    text = _rows(cards.flow_card(flow))
    assert "3 · 3 trained" in text and "4 → 2" in text and "2 → 5" in text


def test_a_node_card_shows_the_phase_while_training():
    node = lk.nodes.FDA(output_dim=1)
    labels = (X[:, 0] > 0).astype(int)
    node.train(X, labels)
    text = _rows(cards.node_card(node))
    assert "labkit node FDA" in text and "training phase 1/2" in text and "300" in text
    node.stop_training()
    assert "training phase 2/2" in _rows(cards.node_card(node))


def test_a_dask_scheduler_card_shows_workers_threads_memory_and_links(cluster):
    with lk.DaskScheduler(cluster.scheduler_address) as s:
        text = _rows(cards.scheduler_card(s))
        assert "labkit DaskScheduler" in text and cluster.scheduler_address in text
        assert "2 worker processes · 2 threads" in text and "GiB memory" in text
        assert "existing cluster" in text
        url = dashboard(s)
        assert url in cards.scheduler_card(s)
        stop_dashboard(s)
    assert "shut down" in _rows(cards.scheduler_card(s))


def test_the_card_says_an_in_process_worker_runs_in_this_process():
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        text = _rows(cards.scheduler_card(s))
    assert "1 worker in this process · 2 threads" in text, text
    assert "embedded cluster" in text


def test_a_local_scheduler_and_a_failed_run_have_cards():
    with lk.LocalScheduler() as s:
        assert "in this process" in _rows(cards.scheduler_card(s))
        flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
        run = flow.train([[X[:100], X[100:, :3]]], scheduler=s, wait=False)
        with pytest.raises(lk.LabkitError):
            run.result(timeout=30)
        text = _rows(cards.run_card(run))
        assert f"labkit run train {run.id}" in text and "failed" in text and "error" in text


def test_ipython_shows_the_cards_for_labkit_objects():
    pytest.importorskip("IPython")
    from IPython.testing.globalipapp import get_ipython
    from labkit.views.notebook.display import register
    shell = get_ipython()
    html = shell.display_formatter.formatters["text/html"]
    enabled, html.enabled = html.enabled, True   # a terminal shell has HTML off; a kernel on
    try:
        assert register()
        flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])  # a subclass of Flow
        assert "labkit ParallelFlow" in html(flow)
        assert "labkit node PCA" in html(flow[0])
        with lk.LocalScheduler() as s:
            assert "labkit LocalScheduler" in html(s)
        assert html(object()) is None                            # nobody else's objects
    finally:
        html.enabled = enabled
