"""``labkit sweeps STORE`` of a sweep of several objectives: its objectives and its front's size."""

from __future__ import annotations

import json

import labkit as lk
from tests.experiments import objective_functions as F
from tests.test_cli_sweeps import sweeps

XY = {"x": lk.uniform(0, 1), "y": lk.uniform(0, 1)}


def test_labkit_sweeps_prints_the_front_size_of_several_objectives(tmp_path):
    path = tmp_path / "experiments.db"
    two = lk.sweep(F.two_objectives, XY, trials=16, seed=3, store=path, name="two",
                   metric=("loss", "latency_ms"), mode=("min", "max"),
                   constraints=F.loss_at_most_half)
    one = lk.sweep(F.returns_both, XY, trials=3, seed=3, store=path, name="one",
                   metric="loss", mode="min")
    size = len(two.pareto)
    assert 0 < size < 16
    listed = json.loads(sweeps(path, "--json").stdout)
    by_name = {r["name"]: r for r in listed}
    assert by_name["two"]["front"] == size and by_name["two"]["best"] is None
    assert by_name["two"]["metric"] == ["loss", "latency_ms"]
    assert by_name["two"]["mode"] == ["min", "max"]
    assert by_name["one"]["front"] is None and by_name["one"]["best"]["trial"] == one.best.id
    table = sweeps(path)
    assert table.returncode == 0, table.stderr
    head, *lines = table.stdout.splitlines()
    assert "FRONT" in head.split()
    row = next(line for line in lines if line.startswith("two "))
    assert "loss (min), latency_ms (max)" in row
    front_at = head.index("FRONT")
    assert row[:front_at + len("FRONT")].split()[-1] == str(size)
