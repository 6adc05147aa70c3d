"""Notebook 06 runs end to end: random search against ASHA on digits, then the sweep read back
from its store and extended without running a finished trial again."""

import re

import pytest

from .run import execute, figure, text


@pytest.mark.timeout(300)
def test_experiments_notebook():
    nb = execute("06-experiments.ipynb")
    out = text(nb)
    best = re.search(r"best: +random search ([0-9.]+), ASHA ([0-9.]+)", out)
    random_best, asha_best = float(best.group(1)), float(best.group(2))
    assert random_best > 0.95
    assert asha_best > random_best - 0.02          # early stopping kept a good trial
    epochs = re.search(r"epochs: random search (\d+), ASHA (\d+)", out)
    assert int(epochs.group(1)) == 16 * 15 and int(epochs.group(2)) < int(epochs.group(1)) / 2
    assert re.search(r"ASHA: [0-9.]+ s, \d+ epochs, ([1-9]\d*) trials stopped early", out)
    ratio = float(re.search(r"ASHA [0-9.]+ s \(([0-9.]+) of it\)", out).group(1))
    assert ratio < 0.8
    assert re.search(r"trial \d+ +(completed|stopped) +epochs +\d+ +accuracy", out)
    read = re.search(r"read back: 16 trials, \{[^}]*\}, best trial (\d+) \(same: (\w+)\)", out)
    assert read and read.group(2) == "True"
    assert "extended: 24 trials, 8 new, 0 of the first 16 run again" in out
    assert figure(nb, "best after extending:") >= asha_best
