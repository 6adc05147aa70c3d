"""The sweep's live comparison board after real sweeps, seen through the messages its widgets send.

Real sweeps on a LocalScheduler and on a Dask LocalCluster (worker
processes): the table, curves and parallel coordinates grow while trials
report; the final table holds the result's numbers; "Stop trial" stops the
selected trial, "Add trials" adds some, a failed trial's error shows, the
sort dropdown sorts.  The dashboard's sweep plots are checked in Chromium.
"""

from __future__ import annotations

import re
import time

import pytest

import labkit as lk
from labkit.views.board import board
from labkit.views.sweep_board import SweepBoard
from tests.experiments import functions as F

pytestmark = pytest.mark.usefixtures("no_thread_leak")

ROW = re.compile(r'<tr data-trial="(\d+)" data-status="(\w+)" data-step="([^"]*)" '
                 r'data-value="([^"]*)" data-best="([^"]*)"( class="labkit-sweep-best")?')


def rows(table_html: str) -> list[tuple]:
    """The table's rows: (trial, status, step, value, best, highlighted), in order."""
    return [(int(m[0]), m[1], None if m[2] == "None" else float(m[2]), eval(m[3]), eval(m[4]),
             bool(m[5])) for m in ROW.findall(table_html)]


def wait_stopped(b: SweepBoard, timeout: float = 20.0) -> None:
    deadline = time.time() + timeout
    while b.live and time.time() < deadline:
        time.sleep(0.02)
    assert not b.live, "the board did not stop at the end of its sweep"


def wait_until(what: str, check, timeout: float = 20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def assert_matches_result(table_html: str, result) -> None:
    """The table holds exactly the result's numbers; the best row is the result's best."""
    by_id = {r[0]: r for r in rows(table_html)}
    assert sorted(by_id) == [t.id for t in result.trials]
    for t in result.trials:
        _, status, step, value, best, highlighted = by_id[t.id]
        assert (status, step, value, best) == (t.status, t.step, t.value, t.best), (by_id[t.id], t)
        assert highlighted == (result.best is not None and t.id == result.best.id)


@pytest.fixture
def boards():
    made = []
    yield made
    for b in made:
        b.close()


def test_the_board_grows_while_trials_report_and_ends_as_the_result(comms, local_scheduler,
                                                                     boards):
    space = {"q": lk.uniform(0.5, 1.0), "lr": lk.loguniform(1e-4, 1e-1),
             "width": lk.choice([64, 128, 256]), "pause": 0.04}
    run = lk.sweep(F.curve, space, trials=4, metric="acc", mode="max", scheduler=local_scheduler,
                   seed=1, store=None, wait=False)
    b = board(run)                                    # lk.board gives a sweep its own board
    boards.append(b)
    assert isinstance(b, SweepBoard)
    assert "labkit-sweep-board" in comms.state(b.widget)["_dom_classes"]
    seen = []
    while not run.done():
        state = tuple(comms.state(w).get("value", "") for w in (b.table, b.curves, b.parallel))
        if not seen or seen[-1] != state:
            seen.append(state)
        time.sleep(0.03)
    result = run.result()
    wait_stopped(b)
    # grew: several distinct frames while running, each with more points than the one before
    points = [(s[1].count(","), s[2].count("<polyline")) for s in seen]
    assert len(set(points)) >= 3, points
    assert points == sorted(points), points
    table = comms.state(b.table)["value"]
    assert_matches_result(table, result)
    assert [r[0] for r in rows(table)][0] == result.best.id          # best first by default
    curves, parallel = comms.state(b.curves)["value"], comms.state(b.parallel)["value"]
    assert curves.count('<polyline') == 4 and curves.count("labkit-sweep-best") == 1
    assert f'data-trial="{result.best.id}" points' in curves.split("labkit-sweep-best")[1][:40]
    assert ">step</text>" in curves and ">acc</text>" in curves      # axes labelled
    for name in ("q", "lr", "width", "acc"):                         # a parameter's axis each
        assert 'labkit-sweep-axis" x="' in parallel and f">{name}</text>" in parallel
    assert ">log</text>" in parallel and ">256</text>" in parallel   # log and categorical axes
    assert parallel.count('class="labkit-sweep-line') == 4
    status = comms.state(b.status)["value"]
    assert "finished" in status and "4 completed" in status
    assert f"(trial {result.best.id}:" in status and f"{result.best.value:.4g}" in status
    for button in (b.stop_button, b.add_button, b.cancel_button):    # nothing left to act on
        assert comms.state(button)["disabled"] is True
    assert "<th" in table and "trial</th>" in table                   # headers over columns


def test_stop_and_add_trials_from_the_board_on_a_dask_cluster(comms, dask_scheduler, boards):
    run = lk.sweep(F.slow_steps, {"x": lk.uniform(0, 1), "steps": 150}, trials=3,
                   metric="loss", mode="min", scheduler=dask_scheduler, seed=0, store=None,
                   wait=False)
    b = SweepBoard(run)
    boards.append(b)
    running = wait_until("a trial reporting", lambda: [
        r for r in rows(comms.state(b.table)["value"]) if r[1] == "running" and r[2] is not None])
    victim = running[0][0]
    b.trial.value = victim                              # the user picks it in the dropdown...
    b.stop_button.click()                               # ... and clicks "Stop trial"
    assert "stop requested" in comms.state(b.message)["value"]
    b.add_n.value = 2
    b.add_button.click()                                # "Add trials" with 2 in the box
    assert "added trials 3–4" in comms.state(b.message)["value"]
    workers = wait_until("the workers' load", lambda: comms.state(b.workers).get("value"))
    assert "trials running" in workers and "tcp://" in workers
    result = run.result(timeout=120)
    wait_stopped(b)
    stopped = next(t for t in result.trials if t.id == victim)
    assert stopped.status == "stopped" and stopped.reason == "stopped by hand"
    assert stopped.step < 149
    assert len(result.trials) == 5 and result.counts() == {"completed": 4, "stopped": 1}
    assert_matches_result(comms.state(b.table)["value"], result)
    curves = comms.state(b.curves)["value"]
    faded = re.search(rf'data-trial="{victim}" points="[^"]*" fill="none" stroke="[^"]*" '
                      rf'stroke-width="[^"]*" opacity="([^"]*)"', curves)
    assert faded and float(faded.group(1)) < 0.5 or result.best.id == victim


def test_a_failed_trial_shows_its_error_and_sorting_sorts(comms, local_scheduler, boards):
    run = lk.sweep(F.failing, {"x": lk.uniform(0, 1)}, trials=6, metric="loss", mode="min",
                   scheduler=local_scheduler, seed=3, store=None, wait=False)
    b = SweepBoard(run)
    boards.append(b)
    result = run.result()
    wait_stopped(b)
    failed = result.by_status("failed")
    assert failed and result.by_status("completed")
    assert f"{len(failed)} failed" in comms.state(b.status)["value"]
    b.trial.value = failed[0].id
    b.show_button.click()                             # still works after the end
    detail = comms.state(b.detail)["value"]
    assert "is too large" in detail and "ValueError" in detail and "Traceback" in detail
    assert f"trial {failed[0].id}</b> · failed" in detail
    # sorting through the widgets a user has: the dropdown and the reverse box
    b.sort_by.value = "x"
    xs = [result.trials[r[0]].config["x"] for r in rows(comms.state(b.table)["value"])]
    assert xs == sorted(xs)
    b.descending.value = True
    xs = [result.trials[r[0]].config["x"] for r in rows(comms.state(b.table)["value"])]
    assert xs == sorted(xs, reverse=True)
    b.descending.value = False
    b.sort_by.value = "rank"                          # best first, failed ones (no rank) last
    order = [r[0] for r in rows(comms.state(b.table)["value"])]
    assert order[0] == result.best.id
    assert set(order[-len(failed):]) == {t.id for t in failed}
    assert_matches_result(comms.state(b.table)["value"], result)


def test_the_dashboard_shows_the_sweeps_curves_and_table(local_scheduler):
    from labkit.views.dashboard import dashboard
    from tests.browser import chromium, screenshot
    url = dashboard(local_scheduler)
    lines_js = """() => {
        const doc = window.Bokeh && Bokeh.documents[0];
        const m = doc && doc.get_model_by_name("labkit-sweep-lines");
        if (!m) return -1;
        const xs = m.data instanceof Map ? m.data.get("xs") : m.data.xs;
        return xs ? JSON.stringify(xs).split(",").length : 0;
    }"""
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1100, "height": 1200})
        page.goto(url)
        page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0", timeout=30000)
        run = lk.sweep(F.curve, {"q": lk.uniform(0.5, 1.0), "pause": 0.1}, trials=3,
                       metric="acc", mode="max", scheduler=local_scheduler, seed=0, store=None,
                       wait=False)
        seen = []
        while not run.done():
            seen.append(page.evaluate(lines_js))
            time.sleep(0.2)
        result = run.result()
        total = sum(len(t.history) for t in result.trials)
        wait_until("every point on the page", lambda: page.evaluate(lines_js) == total, 10)
        table = page.locator(".labkit-sweep-table tr[data-trial]")
        wait_until("the table's final rows", lambda: table.count() == 3 and all(
            s == "completed" for s in table.evaluate_all(
                "rows => rows.map(r => r.dataset.status)")), 10)
        best = page.locator(".labkit-sweep-table tr.labkit-sweep-best")
        assert best.get_attribute("data-trial") == str(result.best.id)
        assert float(best.get_attribute("data-value")) == result.best.value
        page.locator(".labkit-sweep-sort select").select_option("q")   # sort by the parameter
        order = lambda: [int(t) for t in table.evaluate_all(
            "rows => rows.map(r => r.dataset.trial)")]
        by_q = sorted(range(3), key=lambda i: result.trials[i].config["q"])
        wait_until("the table sorted by q", lambda: order() == by_q, 10)
        screenshot(page, "dashboard-sweep")
    growing = [n for n in seen if n > 0]
    assert len(set(growing)) >= 3, seen
