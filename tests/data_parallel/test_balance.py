"""work_load="auto": shares follow measured speeds; the controller is bounded."""

from __future__ import annotations

import pytest
import torch

import labkit as lk
from labkit.data_parallel import Balancer, DataParallelTrainer

from .models import Slow, batch, mlp, sgd


def test_auto_moves_shares_toward_a_slowed_device():
    # Slow enough that the sleeps, not a step's fixed costs, set each replica's time: under
    # load those costs (the same on both) grow and pull the measured 2:1 toward 1:1, and at
    # 0.5 ms a row a run beside a second test run balanced 39 rows to 25 (issue 44).
    model = Slow(mlp(), per_row=0.002)
    trainer = DataParallelTrainer(model, torch.nn.functional.mse_loss, sgd(model),
                                  devices=["cpu:0", "cpu:1"], work_load="auto")
    try:
        trainer.replicas[1].per_row = 0.004  # device 1 runs at half the speed
        assert trainer.shares == [0.5, 0.5]
        for s in range(30):
            trainer.step(*batch(n=64, seed=s))
        fast, slow = trainer.shares
        assert 0.6 < fast < 0.74, trainer.shares
        rows = [sl.stop - sl.start for sl in trainer.last_split]
        assert rows[0] > 1.6 * rows[1]
    finally:
        trainer.close()


def test_the_controller_is_bounded_and_keeps_a_floor():
    b = Balancer(2, max_step=0.05, min_share=0.1)
    b.update([50, 50], [0.01, 1.0])  # device 1 a hundred times slower
    assert b.shares[0] == pytest.approx(0.55)  # moved by at most max_step
    for _ in range(100):
        rows = [100 * s for s in b.shares]
        b.update(rows, [rows[0] / 100.0, rows[1] / 1.0])
    assert b.shares[1] == pytest.approx(0.1)  # the floor holds after normalising
    assert sum(b.shares) == pytest.approx(1.0)


def test_zero_rows_or_time_leave_the_speed_unmeasured():
    b = Balancer(3)
    assert b.update([10, 0, 10], [0.1, 0.0, 0.1]) == [pytest.approx(1 / 3)] * 3
    assert b.updates == 0


@pytest.mark.parametrize("kw", [dict(gain=0), dict(max_step=2), dict(min_share=0.6),
                                dict(smoothing=0)])
def test_bad_settings(kw):
    with pytest.raises(lk.InputError, match="bad balancer settings"):
        Balancer(2, **kw)
