"""Notebook 03 runs end to end: pipes feed a flow (their stages reach the board), a program
steps under its runner panel to DONE and matches direct training."""

import ast
import re

import pytest

from .run import progress_bars, execute, figure, html_values, text


@pytest.mark.timeout(300)
def test_pipelines_and_programs_notebook():
    nb = execute("03-pipelines-and-programs.ipynb")
    bars = progress_bars(nb)
    assert bars and all(v == m for v, m in bars), bars  # every phase's bar full
    [table] = html_values(nb, "labkit-stages")
    assert all(name in table for name in ("decode (PCA)", "features", "decode (classifier)"))
    out = text(nb)

    # (a) pipes feeding a flow on the Dask cluster
    assert figure(nb, "test accuracy:") > 0.9
    assert "stage features: 24 records" in out and "stage decode (classifier): 24 records" in out
    stages = ast.literal_eval(re.search(r"stages on the board: (\{.*\})", out).group(1))
    assert stages == {"decode (PCA)": (24, "done"), "features": (24, "done"),
                      "decode (classifier)": (24, "done"), "decode (test)": (4, "done")}, stages
    # the scheduler board's last state: a row for the training and one for the execute
    # (the newest, whose phase is the detail), all finished, shut down
    [board_status] = html_values(nb, "labkit-status")
    assert "2 runs" in board_status and "shut down" in board_status, board_status
    rows = [re.sub(r"<[^>]+>", "", v) for v in html_values(nb, "labkit-run-label")]
    assert len(rows) == 2 and rows[0].startswith("train ") and rows[1].startswith("execute ")
    assert "node 2/2 GaussianClassifier — 48 tasks" in rows[0], rows
    assert all(r.endswith("finished") for r in rows), rows

    # (b) the program: steps, hook, equality with direct training, copy part-way
    n_chunks = int(figure(nb, "chunks:"))
    steps = int(figure(nb, "program steps:"))
    assert steps == 3 * n_chunks + 1  # fetch, train, hook per chunk; then stop_training
    assert "program status: DONE" in out
    assert f"hook calls: {n_chunks} rows seen: 1440" in out
    assert figure(nb, "max difference to direct training:") < 1e-8
    assert "Call(count_rows, reg('x'))" in out  # print(program) shows the inserted hook
    assert "copy resumed to the same result: True" in out

    # the runner panel's stored state: the final step count and DONE
    [status] = html_values(nb, "labkit-runner-status")
    assert f"<b>{steps}</b> steps" in status and ">finished<" in status, status

    assert "scheduler closed: True" in out
