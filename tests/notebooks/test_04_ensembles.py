"""Notebook 04 runs end to end: a stacked ensemble beats a floor and holds its own against
its best base estimator; the parallel evaluation table has a row per candidate."""

import re

import pytest

from .run import progress_bars, execute, figure, html_values, text


@pytest.mark.timeout(300)
def test_ensembles_notebook():
    nb = execute("04-ensembles.ipynb")
    bars = progress_bars(nb)
    assert bars and all(v == m for v, m in bars), bars  # every layer's and the evaluation's bar full
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

    # the scheduler board's last state: two layers and the evaluation, shut down
    [board_status] = html_values(nb, "labkit-status")
    assert "3 phase(s)" in board_status and "shut down" in board_status, board_status
    assert "scheduler closed: True" in out
