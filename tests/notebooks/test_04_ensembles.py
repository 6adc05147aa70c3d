"""Notebook 04 runs end to end: a stacked ensemble beats a floor and holds its own against
its best base estimator; the parallel evaluation table has a row per candidate; a
SuperLearner is tuned inside GridSearchCV."""

import re

import pytest

from .run import progress_bars, execute, figure, html_values, text


@pytest.mark.timeout(300)
def test_ensembles_notebook():
    nb = execute("04-ensembles.ipynb")
    bars = progress_bars(nb)
    # rows for the stack, the evaluation and the search (its 13 fits in one row), then the
    # newest run's two layers: every bar full
    assert bars[:3] == [(25, 25), (21, 21), (13, 13)] and len(bars) == 5, bars
    assert all(v == m for v, m in bars), bars
    rows = [re.sub(r"<[^>]+>", "", v) for v in html_values(nb, "labkit-run-label")]
    assert [r.split(" ")[0] for r in rows] == ["ensemble", "evaluate", "search"], rows
    assert rows[2].startswith("search over SuperLearner — 13 fits of 4 candidates · "
                              "13 finished"), rows
    [table] = [t for t in html_values(nb, "labkit-search-table") if t]
    assert table.count("<tr>") == 1 + 4 and "n_neighbors" in table and ">C<" in table, table
    out = text(nb)

    stacked = figure(nb, "stacked ensemble accuracy:")
    best = re.search(r"best single base estimator: (\S+) accuracy: ([0-9.]+)", out)
    assert best, out[-2000:]
    best_single = float(best.group(2))
    assert stacked > 0.95
    assert stacked >= best_single - 0.01, (stacked, best_single)
    assert "base layer fits kept for new data: ['forest', 'knn', 'logreg', 'naive_bayes']" in out

    # the evaluation table: 3 + 2 + 2 candidates, best first
    assert figure(nb, "evaluation rows:") == 7
    tables = [o["data"]["text/html"] for cell in nb.cells for o in cell.get("outputs", [])
              if "labkit-evaluation" in o.get("data", {}).get("text/html", "")]
    assert len(tables) == 1
    assert tables[0].count("<tr>") == 1 + 7  # header and one row per candidate
    means = [float(m) for m in re.findall(r"<td>([\d.]+)</td><td>[\d.]+</td><td>[\d.]+</td></tr>",
                                           tables[0])]
    assert len(means) == 7 and means == sorted(means, reverse=True), means
    assert figure(nb, "mean score:") > 0.95

    # a SuperLearner tuned by GridSearchCV: nested params reached, as good as the stack
    assert "grid search best params: {'layer-1__knn__n_neighbors': " in out
    assert figure(nb, "grid search cv accuracy:") > 0.95
    assert figure(nb, "SuperLearner held-out accuracy:") > 0.95

    # the scheduler board's last state, shut down: the stack, the evaluation, then
    # 2 x 2 candidates x 3 folds and the refit of the search
    [board_status] = html_values(nb, "labkit-status")
    assert f"{2 + 2 * 2 * 3 + 1} runs" in board_status, board_status
    assert "shut down" in board_status, board_status
    assert "scheduler closed: True" in out
