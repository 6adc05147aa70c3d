"""Notebook 01 runs end to end: a board at 100%, an accuracy above a floor, a plot."""

import pytest

from .run import execute, figure, html_values, progress_bars, text


@pytest.mark.timeout(300)
def test_parallel_flows_notebook():
    nb = execute("01-parallel-flows.ipynb")
    assert figure(nb, "test accuracy:") > 0.9
    assert "run status: finished" in text(nb)
    bars = progress_bars(nb)
    assert bars and all(value == maximum for value, maximum in bars), bars  # every phase done
    assert any("finished" in v for v in html_values(nb, "labkit-status"))
    plot = nb.cells[8].outputs
    assert any("application/vnd.bokehjs_exec.v0+json" in o.get("data", {}) for o in plot)
    assert "scheduler closed: True" in text(nb)
