"""One decision protocol at report time: ASHA, Median, PBT and rules of one's own are Deciders."""

from __future__ import annotations

import ast
from pathlib import Path

import labkit as lk
from labkit.experiments.search.decision import CONTINUE, Decider, Pause, Stop
from labkit.experiments.search.judge import Judge
from labkit.experiments.search.space import Space
from tests.experiments import functions as F

EXPERIMENTS = Path(lk.__file__).parent / "experiments"


class Below:
    """A rule of one's own as the guide writes one: ``decide`` only, no base class."""

    def decide(self, trial, step, value, history):
        return f"below 0.5 at step {step}" if value < 0.5 else None


class EndsOnly:
    """A rule of one's own with one lifecycle hook of three (class-level notes: a sweep copies it)."""

    ENDED: list = []

    def decide(self, trial, step, value, history):
        return None

    def on_trial_end(self, trial, status):
        self.ENDED.append((trial, str(status)))


class Population:
    """Two members, one of them waiting for a slot (what a sweep tells PBT)."""

    def config(self, trial):
        return {"lr": 0.5}

    def checkpoint_step(self, trial):
        return None  # no checkpoint yet: no donor, so no exploit

    def active(self, trial):
        return True

    def waiting(self):
        return True

    def size(self):
        return 2


def test_asha_median_and_a_rule_of_ones_own_decide_as_deciders():
    asha = Judge(lk.ASHA(min_steps=1, reduction=2), "max", "acc")
    assert isinstance(asha, Decider) and not asha.pauses and not asha.exploits
    assert asha.on_report(0, 1, 0.9, stopping=False) is CONTINUE
    assert asha.on_report(1, 1, 0.5, stopping=False) == Stop(
        "ASHA: at step 1 not in the top 1/2 (2nd of 2)"
    )
    median = Judge(lk.Median(min_steps=1, min_trials=1), "max", "acc")
    median.on_report(0, 1, 0.9, stopping=False)
    assert isinstance(median.on_report(1, 1, 0.1, stopping=False), Stop)
    own = Judge(Below(), "max", "acc")
    assert own.on_report(0, 2, 0.4, stopping=False) == Stop("below 0.5 at step 2")
    # a trial already stopping: the value is learned, nothing is decided
    assert own.on_report(1, 2, 0.4, stopping=True) is CONTINUE
    assert own.history.last_step(1) == 2


def test_pbt_is_a_decider_that_declares_it_pauses_and_exploits():
    space = Space.of({"lr": lk.uniform(0.0, 1.0)})
    pbt = lk.PBT(interval=1, mutations={"lr": lk.uniform(0.0, 1.0)}).bound(space, "max")
    assert isinstance(pbt, Decider) and pbt.pauses and pbt.exploits
    pbt.start(Population(), seed=0)
    assert pbt.on_report(0, 1, 0.9, stopping=False) == Pause()  # another member waits
    assert pbt.on_report(1, 1, 0.1, stopping=True) is CONTINUE  # stopping: it goes on


def test_a_rule_of_ones_own_has_the_hooks_it_offers_called(tmp_path):
    EndsOnly.ENDED.clear()
    result = lk.sweep(F.curve, {"q": lk.uniform(0.5, 1.0), "steps": 3}, trials=3, metric="acc",
                      mode="max", seed=3, early_stop=EndsOnly(), store=tmp_path / "s.db")
    assert sorted(EndsOnly.ENDED) == sorted((t.id, str(t.status)) for t in result.trials)


def _probes(tree: ast.AST) -> list[str]:
    """``hasattr(x, ...)`` / ``getattr(x, "...", ...)`` calls whose ``x`` is a search or rule."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id not in ("hasattr", "getattr") or not node.args:
            continue
        target = ast.unparse(node.args[0]).lower()
        if "search" in target or "rule" in target:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_experiments_hold_no_hasattr_probe_of_a_search_or_rule():
    probes = {
        str(path.relative_to(EXPERIMENTS)): found
        for path in sorted(EXPERIMENTS.rglob("*.py"))
        if (found := _probes(ast.parse(path.read_text())))
    }
    assert probes == {}
