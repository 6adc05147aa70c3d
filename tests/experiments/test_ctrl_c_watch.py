"""One Ctrl-C watch a sweep, not one a trial (issue 48, the cost of a trial).

A sweep on the ``LocalScheduler`` runs its trials in the main thread; it tells a real Ctrl-C
(which stops the sweep) from a trial's own KeyboardInterrupt (which fails that trial) by a SIGINT
handler of its own.  It used to swap it in and out around every trial; it now does once a sweep.
The real Ctrl-C itself is tested in ``test_trust.py``.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import labkit as lk

pytestmark = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                                reason="signals reach the main thread only")


def quick(config, trial):
    return {"loss": config["x"]}


def test_a_local_sweep_sets_its_sigint_handler_once_and_puts_the_old_one_back(monkeypatch):
    swaps = []
    real = signal.signal

    def counted(signum, handler):
        if signum == signal.SIGINT:
            swaps.append(handler)
        return real(signum, handler)

    monkeypatch.setattr(signal, "signal", counted)
    before = signal.getsignal(signal.SIGINT)
    result = lk.sweep(quick, {"x": lk.uniform(0, 1)}, trials=25, metric="loss", mode="min",
                      seed=0, store=None)
    assert result.counts() == {"completed": 25}
    assert len(swaps) == 2                     # in, and back out (today: 2 a trial, 50)
    assert swaps[-1] is before and signal.getsignal(signal.SIGINT) is before


def swallows_then_interrupts(config, trial):
    if config["do"] == "swallow":              # a real Ctrl-C that the trial's own code catches
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)
        except KeyboardInterrupt:
            pass
    elif config["do"] == "raise":              # the trial's own KeyboardInterrupt: it fails
        raise KeyboardInterrupt("not a Ctrl-C")
    return {"loss": 1.0}


def test_a_ctrl_c_a_trial_swallowed_does_not_make_a_later_trial_s_interrupt_a_stop():
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        result = lk.sweep(swallows_then_interrupts,
                          [{"do": "swallow"}, {"do": "raise"}, {"do": "end"}],
                          metric="loss", mode="min", store=None)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert [str(t.status) for t in result.trials] == ["completed", "failed", "completed"]
    assert "KeyboardInterrupt" in result.trials[1].error
