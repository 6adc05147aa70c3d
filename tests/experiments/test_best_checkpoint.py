"""The best model back (issue 46): ``result.best.checkpoint()`` in any process reaching it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import labkit as lk
from tests.experiments import checkpoint_functions as cf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LOAD = """
import labkit as lk
best = lk.load_sweep({store!r}, "b").best
print(best.id, best.checkpoint()["x"], best.checkpoint()["w"].shape[0])
"""


def test_the_best_trial_s_model_loads_in_a_fresh_process(tmp_path):
    store = str(tmp_path / "s.db")
    configs = [{"x": x, "mb": 1, "epochs": 2} for x in (0.3, 0.1, 0.2)]
    result = lk.sweep(cf.big_state, configs, metric="loss", mode="min", store=store, name="b",
                      checkpoints=str(tmp_path / "elsewhere"), keep_best=1)
    assert result.best.id == 1 and os.path.isdir(tmp_path / "elsewhere" / "b")
    code = textwrap.dedent(LOAD.format(store=store))
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1", "0.1", str(1024 * 1024 // 8)]


def test_a_trial_that_never_checkpointed_says_so(tmp_path):
    lk.sweep(lambda config, trial: trial.report(0, loss=1.0), [{"a": 1}],
             metric="loss", mode="min", store=tmp_path / "s.db", name="none")
    with pytest.raises(lk.StorageError, match="never called trial.checkpoint"):
        lk.load_sweep(tmp_path / "s.db", "none").trials[0].checkpoint()


def test_a_checkpoint_changed_at_the_location_is_refused_not_loaded(tmp_path):
    store = tmp_path / "s.db"
    result = lk.sweep(cf.big_state, [{"x": 0.1, "mb": 1, "epochs": 1}], metric="loss",
                      mode="min", store=store, name="t")
    (path,) = [os.path.join(d, n) for d, _, ns in os.walk(f"{store}-checkpoints") for n in ns]
    with open(path, "r+b") as fh:   # one byte flipped
        fh.seek(-1, 2)
        last = fh.read(1)[0]
        fh.seek(-1, 2)
        fh.write(bytes([last ^ 0xFF]))
    with pytest.raises(lk.StorageError, match="changed or cut short"):
        result.best.checkpoint()


def test_a_store_moved_with_its_checkpoint_folder_still_loads_its_best_model(tmp_path):
    first = tmp_path / "a"
    first.mkdir()
    lk.sweep(cf.big_state, [{"x": 0.1, "mb": 1, "epochs": 1}], metric="loss", mode="min",
             store=first / "s.db", name="m")
    moved = tmp_path / "b"
    os.rename(first, moved)                  # the default folder is found beside the store
    assert lk.load_sweep(moved / "s.db", "m").best.checkpoint()["x"] == 0.1
