"""Notebook 02 runs end to end: accuracy above a floor, auto shares favour the fast device,
and the bucketed recurrent classifier learns while its board counts the steps of each bucket."""

import re

import pytest

from .run import execute, figure, html_values, progress_bars, text


@pytest.mark.timeout(300)
def test_data_parallel_torch_notebook():
    nb = execute("02-data-parallel-torch.ipynb")
    _bucketing_shown(nb)
    assert figure(nb, "test accuracy:") > 0.9
    shares = [float(v) for v in re.search(r"shares: \[([^\]]+)\]", text(nb)).group(1).split(",")]
    assert shares[0] > 1.3 * shares[1], shares  # device 1 was slowed: it gets fewer rows
    printed = re.findall(r"epoch (\d): loss ([0-9.]+), ([0-9,]+) samples/s", text(nb))
    losses = [float(loss) for _, loss, _ in printed]
    assert len(losses) == 6 and losses[-1] < losses[0] / 2
    bars = progress_bars(nb)
    # three fits (6, 6 and 4 epochs): each an outer bar for the fit and an inner one for
    # the last epoch's batches, all full
    assert [m for v, m in bars[::2]] == [6, 6, 4] and all(v == m for v, m in bars), bars
    outer = [_plain(v) for v in html_values(nb, "labkit-fit-outer-label")]
    assert [o.split(" · ")[0] for o in outer] == ["epoch 6/6", "epoch 6/6", "epoch 4/4"], outer
    assert all(o.endswith("finished") for o in outer), outer
    # the first board's table of epochs reads what fit returned, with the same rounding
    table = html_values(nb, "labkit-epochs")[0]
    rows = re.findall(r"<tr><td class='name'[^>]*>(\d+)</td><td class='num'[^>]*>([^<]+)</td>"
                      r"<td class='num'[^>]*>([^<]+)</td>", table)
    assert rows == printed, (rows, printed)
    _workers_shown(nb)
    assert any("DataParallelTrainer" in v for v in html_values(nb, "labkit-status"))
    assert "trainer closed: True" in text(nb)


def _plain(value: str) -> str:
    return re.sub(r"<[^>]+>", "", value)


def _bucketing_shown(nb):
    """The bucketed section: it learns, and its board shows the steps of each bucket."""
    assert figure(nb, "sequence test accuracy:") > 0.8
    losses = [float(v) for v in re.findall(r"bucketed epoch \d: loss ([0-9.]+)", text(nb))]
    assert len(losses) == 4 and losses[-1] < losses[0]
    steps = dict(re.findall(r"(\d+): (\d+)", re.search(r"steps per bucket: \{([^}]+)\}",
                                                       text(nb)).group(1)))
    assert sorted(int(k) for k in steps) == [10, 20, 40]
    shown = " · ".join(f"{k}: {v}" for k, v in steps.items())
    assert any(f"Recurrent</b> steps per bucket: {shown}" in v
               for v in html_values(nb, "labkit-buckets")), html_values(nb, "labkit-buckets")
    padded = re.search(r"time steps a pass: (\d+) bucketed, (\d+) padded", text(nb))
    assert int(padded.group(1)) < int(padded.group(2))


def _workers_shown(nb):
    """The section on Dask workers: the loop ran there, learnt, and every row once an epoch."""
    found = re.findall(r"on the workers, epoch (\d): loss=([0-9.]+) in (\d+) steps", text(nb))
    assert [int(e) for e, _, _ in found] == list(range(1, 7)), found
    assert all(int(steps) == 14 for _, _, steps in found)   # 1400 rows, batches of 100
    losses = [float(loss) for _, loss, _ in found]
    assert losses[-1] < losses[0] / 2
    assert figure(nb, "test accuracy on the workers:") > 0.9
