"""Notebook 06 runs end to end: random search against ASHA on digits, then the sweep read back
from its store and extended without running a finished trial again."""

import re

import pytest

from .run import execute, figure, html_values, text

ROW = re.compile(r'<tr data-trial="(\d+)" data-status="(\w+)" data-step="([^"]*)" '
                 r'data-value="([^"]*)" data-best="[^"]*"( class="labkit-sweep-best")?')


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
    check_board(nb, out)


def check_board(nb, out: str) -> None:
    """The ASHA sweep's board, as the notebook stored it, ends with the result's numbers."""
    printed = re.search(r"trials: ((?:\d+:\w+:\S+:\S+ ?)+)", out).group(1).split()
    result = {int(i): (status, step, value) for i, status, step, value in
              (item.split(":") for item in printed)}
    tables = [t for t in html_values(nb, "labkit-sweep-table") if "data-trial" in t]
    assert len(tables) == 1, len(tables)
    rows = {int(m[0]): (m[1], m[2], m[3]) for m in ROW.findall(tables[0])}
    assert rows == result
    best = re.search(r"best accuracy ([0-9.]+) \(trial (\d+)\)", out.split("ASHA:")[1])
    highlighted = [int(m[0]) for m in ROW.findall(tables[0]) if m[4]]
    assert highlighted == [int(best.group(2))]
    status = html_values(nb, "labkit-sweep-status")[0]
    assert "finished" in status and f"{len(result)} trials" in status
    stopped = sum(1 for s, _, _ in result.values() if s == "stopped")
    assert f"{stopped} stopped" in status
    curves = html_values(nb, "labkit-sweep-curves-widget")[0]
    parallel = html_values(nb, "labkit-sweep-parallel-widget")[0]
    assert curves.count("<polyline") == len(result) and parallel.count("<polyline") == len(result)
    assert ">log</text>" in parallel and ">256</text>" in parallel
