"""An axis whose every value is equal: centred on the value, never showing one it cannot have.

The notebook board's parallel coordinates gave such an axis ±0.5: six trials that
all reported an accuracy of 0.0101 read -0.49 at the axis's foot.  Now it spans
the value ± 5% (0..0.5 for zeros): real sweeps' frames, drawn on the harness page
in headless Chromium; what each axis reads is the canvas's ``data-axes``.
"""

from __future__ import annotations

import json

import pytest

import labkit as lk
from labkit.views.sweep.board import SweepBoard
from tests.browser import chromium
from tests.conftest import ROOT
from tests.views.frames_page import frames_of
from tests.views.sweep_page_harness import Board, served_harness
from tests.views.test_sweep_board import wait_stopped


def flat(config, trial):
    """Every trial reports the same accuracy (``config["acc"]``), twice."""
    for step in range(2):
        trial.report(step, acc=config["acc"])
    return {"acc": config["acc"]}


def _frames(comms, scheduler, acc: float) -> list[dict]:
    """A real sweep's frames: 4 trials of one value of ``x`` and one accuracy each."""
    run = lk.sweep(flat, {"x": lk.choice([0.25]), "acc": acc, "w": lk.uniform(1.0, 2.0)},
                   trials=4, metric="acc", mode="max", scheduler=scheduler, seed=0, store=None,
                   wait=False)
    b = SweepBoard(run)
    try:
        run.result(timeout=60)
        wait_stopped(b)
        return frames_of(comms, b.widget)
    finally:
        b.close()


@pytest.mark.needs("chromium")
@pytest.mark.parametrize("acc", [0.0101, 0.0, -3.0])
def test_an_axis_of_equal_values_is_centred_on_them_and_shows_none_they_cannot_have(
        comms, local_scheduler, acc):
    frames = _frames(comms, local_scheduler, acc)
    with served_harness(ROOT, "equal-axes-http") as url, chromium() as browser:
        page = Board(browser.new_page(viewport={"width": 900, "height": 1200}))
        page.load(url)
        page.deliver(*frames)
        page.wait_seq(frames[-1]["seq"])
        axes = {a["name"]: a for a in json.loads(page.data(".labkit-sweep-parallel")["axes"])}
        assert page.errors == []
    lo, hi = (float(t) for t in axes["value"]["ticks"])
    if acc == 0:
        assert (lo, hi) == (0.0, 0.5)                      # zeros: no negative value shown
    else:
        assert lo == pytest.approx(acc - abs(acc) * 0.05, rel=1e-3)
        assert hi == pytest.approx(acc + abs(acc) * 0.05, rel=1e-3)
        assert (lo > 0) == (acc > 0)                       # 0.0101 never reads -0.49
    w_lo, w_hi = (float(t) for t in axes["w"]["ticks"])  # a spread parameter keeps its range
    assert w_lo < w_hi
