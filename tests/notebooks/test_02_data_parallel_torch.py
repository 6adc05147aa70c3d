"""Notebook 02 runs end to end: accuracy above a floor, auto shares favour the fast device."""

import re

import pytest

from .run import execute, figure, html_values, progress_bars, text


@pytest.mark.timeout(300)
def test_data_parallel_torch_notebook():
    nb = execute("02-data-parallel-torch.ipynb")
    assert figure(nb, "test accuracy:") > 0.9
    shares = [float(v) for v in re.search(r"shares: \[([^\]]+)\]", text(nb)).group(1).split(",")]
    assert shares[0] > 1.3 * shares[1], shares  # device 1 was slowed: it gets fewer rows
    losses = [float(v) for v in re.findall(r"loss ([0-9.]+), ", text(nb))]
    assert len(losses) == 6 and losses[-1] < losses[0] / 2
    bars = progress_bars(nb)
    assert len(bars) == 6 and all(v == m for v, m in bars), bars  # every epoch's bar full
    assert any("DataParallelTrainer" in v for v in html_values(nb, "labkit-status"))
    assert "trainer closed: True" in text(nb)
