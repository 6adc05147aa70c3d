"""Issue 38 on the sweep's views: odd values on the board, boards of stored sweeps, dashboards
of finished ones."""

from __future__ import annotations

import logging
import math
import re
import threading

import pytest

import labkit as lk
from labkit.experiments.sweep import finished_run
from labkit.views.board import board
from labkit.views.dashboard import running_url, stop_dashboard
from labkit.views.sweep_board import SweepBoard
from labkit.views import sweep_draw
from labkit.views.sweep_tracker import SweepSnapshot, TrialView
from tests.experiments import functions as F
from tests.views.test_sweep_board import ROW, assert_matches_result, wait_stopped

pytestmark = pytest.mark.usefixtures("no_thread_leak")

INF, NAN = float("inf"), float("nan")
ODD = [INF, -INF, NAN, 1e308, -1e308, 0.25]


@pytest.fixture
def boards():
    made = []
    yield made
    for b in made:
        b.close()


def odd_reports(config, trial):
    """Reports the odd value ``v`` among ordinary ones."""
    trial.report(0, loss=1.0)
    trial.report(1, loss=config["v"])
    trial.report(2, loss=0.5)
    return {"loss": config["v"]}


def _number(text: str):
    return eval(text, {"inf": INF, "nan": NAN})


def _table(table_html: str) -> list[tuple]:
    """The table's rows: (trial, status, step, value, best, highlighted), odd values too."""
    return [(int(m[0]), m[1], None if m[2] == "None" else float(m[2]), _number(m[3]),
             _number(m[4]), bool(m[5])) for m in ROW.findall(table_html)]


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)


def _coordinates(svg: str) -> list[str]:
    """Every number an SVG places something at."""
    found = re.findall(r'points="([^"]*)"', svg) + re.findall(r' [xy]="([^"]*)"', svg)
    return [n for text in found for n in re.split(r"[ ,]", text) if n]


# -- 12. infinite, NaN and huge values ------------------------------------------------------------


def test_a_trial_reporting_inf_leaves_every_frame_drawn(comms, boards, caplog):
    configs = [{"v": v, "w": w} for v, w in zip(ODD, [INF, 1e308, NAN, -1e308, 2**80, 1.0])]
    caplog.set_level(logging.ERROR, logger="labkit")
    run = lk.sweep(odd_reports, configs, metric="loss", mode="min", store=None, wait=False)
    b = board(run)
    boards.append(b)
    result = run.result(timeout=60)
    wait_stopped(b)
    assert not [r for r in caplog.records if r.name.startswith("labkit")], caplog.text
    curves, parallel = comms.state(b.curves)["value"], comms.state(b.parallel)["value"]
    assert curves.count("<polyline") == len(configs)          # every trial's finite points
    assert parallel.count('class="labkit-sweep-line') == len(configs)
    for number in _coordinates(curves) + _coordinates(parallel):
        assert math.isfinite(float(number)), number             # nothing placed at nan or inf
    shown = {r[0]: r for r in _table(comms.state(b.table)["value"])}
    assert sorted(shown) == [t.id for t in result.trials]
    for t in result.trials:
        _, status, step, value, best, highlighted = shown[t.id]
        assert status == t.status and step == t.step, (shown[t.id], t)
        assert _same(value, t.value) and _same(best, t.best), (shown[t.id], t)
        assert highlighted == (t.id == result.best.id)
    assert result.best.config["v"] == -INF                    # as the result ranks it
    assert _table(comms.state(b.table)["value"])[0][0] == result.best.id   # best first


@pytest.mark.parametrize("values", [
    [INF, 1.0], [-INF, 1.0], [NAN, NAN], [1e308, -1e308], [1e-320, 5e-324], [INF, -INF],
    [2**2000, 1.0],
])
def test_the_drawings_place_any_values_without_overflow(values):
    trials = tuple(
        TrialView(i, {"x": v, "c": v}, "completed", 1, v, v, ((0, v), (1, 1.0), (1e300, v)))
        for i, v in enumerate(values))
    space = {"x": {"type": "uniform", "lo": "-inf", "hi": "inf"}}
    snap = SweepSnapshot(0.0, 1, "s", "loss", "min", space, None, 1, trials,
                         {"completed": len(trials)}, trials[0])
    for draw in (sweep_draw.curves, sweep_draw.parallel, sweep_draw.table):
        html = draw(snap)
        assert html
    for number in _coordinates(sweep_draw.curves(snap)) + _coordinates(sweep_draw.parallel(snap)):
        assert math.isfinite(float(number)), number


# -- 15. a stored sweep, and a finished run, have a board -------------------------------------------


def _check_finished_board(comms, b, result):
    wait_stopped(b)
    assert isinstance(b, SweepBoard)
    assert_matches_result(comms.state(b.table)["value"], result)
    status = comms.state(b.status)["value"]
    assert f"sweep {result.name}" in status and "finished" in status
    counts = result.counts()
    for name, n in counts.items():
        assert f"{n} {name}" in status
    if result.best is not None:
        assert f"(trial {result.best.id}:" in status
    curves = comms.state(b.curves)["value"]
    assert curves.count("<polyline") == sum(1 for t in result.trials if t.curve(result.metric)[0])
    for button in (b.stop_button, b.add_button, b.cancel_button):
        assert comms.state(button)["disabled"] is True
    b.trial.value = result.trials[-1].id
    b.show_button.click()                                   # a stored history reads too
    assert f"trial {result.trials[-1].id}</b>" in comms.state(b.detail)["value"]


def test_a_stored_sweep_has_a_board_with_the_result_s_numbers(comms, boards, tmp_path):
    result = lk.sweep(F.failing, {"x": lk.uniform(0, 1)}, trials=6, metric="loss", mode="min",
                      seed=3, store=tmp_path / "s.db", name="kept",
                      early_stop=lk.ASHA(min_steps=1, reduction=2))
    loaded = lk.load_sweep(tmp_path / "s.db", "kept")
    for shown in (loaded, result):
        b = board(shown)
        boards.append(b)
        _check_finished_board(comms, b, shown)
    assert "ASHA" in comms.state(boards[0].status)["value"]
    boards[0].add_button.click()                            # disabled, and does nothing
    assert len(lk.load_sweep(tmp_path / "s.db", "kept").trials) == 6


def test_a_finished_sweep_run_has_a_board(comms, boards, local_scheduler):
    run = lk.sweep(F.curve, {"q": lk.uniform(0, 1), "steps": 4}, trials=4, metric="acc",
                   mode="max", scheduler=local_scheduler, store=None, wait=False)
    result = run.result(timeout=60)
    b = board(run)
    boards.append(b)
    _check_finished_board(comms, b, result)


# -- 9. a dashboard of a finished sweep does not listen forever -------------------------------------


def _dashboard_threads() -> list:
    return [t for t in threading.enumerate() if t.name == "labkit-dashboard-bokeh"]


def test_a_dashboard_of_a_finished_sweep_whose_scheduler_shut_down_is_refused(tmp_path):
    run = lk.sweep(F.quadratic, {"x": lk.uniform(0, 1)}, trials=2, metric="loss", mode="min",
                   store=None, wait=False)                  # its own LocalScheduler, shut down
    result = run.result(timeout=60)
    before = len(_dashboard_threads())
    for source in (run, finished_run(result)):
        with pytest.raises(lk.SchedulerError) as info:
            lk.dashboard(source)
        assert "lk.board(run)" in str(info.value)
        assert running_url(source) is None
    assert len(_dashboard_threads()) == before               # nothing left listening


def test_a_dashboard_of_a_sweep_run_stops_with_stop_dashboard(local_scheduler):
    run = lk.sweep(F.quadratic, {"x": lk.uniform(0, 1)}, trials=2, metric="loss", mode="min",
                   scheduler=local_scheduler, store=None, wait=False)
    run.result(timeout=60)
    before = len(_dashboard_threads())
    url = lk.dashboard(run)
    assert url and running_url(run) == url
    assert stop_dashboard(run) is True
    assert running_url(run) is None and len(_dashboard_threads()) == before
