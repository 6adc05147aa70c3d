"""What a killed worker costs a group trial (issue 34), in one command.

A sweep of one trial holding 2 of 4 worker processes (``workers_per_trial=2``)
trains a small MLP for ``--steps`` client-fed steps, checkpointing every
``--every`` steps.  In the killed run, the trial SIGKILLs one worker of its
group just before the last step of a checkpoint interval (the worst case:
every step since the checkpoint is lost).  The same trial without a kill is
the baseline, alternated with it ``--repeat`` times.

Printed: the trial's wall time both ways and their difference (what the kill
cost); the steps redone; the seconds from the kill until the trial ran again
on a new group with its checkpoint restored (detecting the loss, forming the
group); and what the redone steps cost at the measured step time.  The issue
asks that the cost be at most the steps since the checkpoint plus the time
to form a new group.  It never asserts.

    python benchmarks/bench_group_kill.py            # about two minutes on 2 cores
    python benchmarks/bench_group_kill.py --quick    # a smoke test
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import labkit as lk  # noqa: E402

MARKS: dict = {}  # what the trial saw, by attempt: it runs on a client thread


def model_and_opt():
    """The MLP from its own generator (trials share the client's global one)."""
    model = nn.Sequential(nn.Linear(32, 256), nn.Tanh(), nn.Linear(256, 1))
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def batch(step: int):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(256, 32, generator=g)
    return x, x.sum(dim=1, keepdim=True)


def kill_one(scheduler) -> None:
    """SIGKILL the first worker of the trial's group."""
    pids = scheduler.run_on_workers(os.getpid)
    os.kill(pids[sorted(pids)[0]], signal.SIGKILL)


def trial_fn(config, trial):
    """``steps`` steps, a checkpoint every ``every``; kills a worker at ``kill_at`` once."""
    marks = MARKS.setdefault(trial.attempt, {})
    marks["began"] = time.monotonic()
    model, opt = model_and_opt()
    saved = trial.restore()
    if saved is not None:
        model.load_state_dict(saved["model"])
    trainer = lk.DataParallelTrainer(model, nn.functional.mse_loss, opt, scheduler=trial.scheduler)
    start = 0 if saved is None else saved["step"]
    marks.update(ready=time.monotonic(), start=start, steps=[])
    try:
        for step in range(start, config["steps"]):
            if step == config["kill_at"] and trial.attempt == 0:
                marks["killed"] = time.monotonic()
                kill_one(trial.scheduler)
            t0 = time.monotonic()
            loss = trainer.step(*batch(step))
            marks["steps"].append(time.monotonic() - t0)
            trial.report(step + 1, loss=loss)
            if (step + 1) % config["every"] == 0:
                trial.checkpoint({"model": trainer.sync_model().state_dict(), "step": step + 1})
    finally:
        trainer.close()


def one_run(s, steps: int, every: int, kill: bool) -> dict:
    """One sweep of the trial; its wall time and marks."""
    MARKS.clear()
    kill_at = (steps // every // 2) * every + every - 1 if kill else -1
    t0 = time.monotonic()
    result = lk.sweep(trial_fn, [{"steps": steps, "every": every, "kill_at": kill_at}],
                      scheduler=s, workers_per_trial=2, metric="loss", mode="min", store=None)
    wall = time.monotonic() - t0
    record = result.trials[0]
    assert record.status.value == "completed", record.error
    return {"wall": wall, "marks": {k: dict(v) for k, v in MARKS.items()}, "kill_at": kill_at}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--every", type=int, default=20)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args(argv)
    if a.quick:   # a smoke test: the kill lands past the first checkpoint, no warm-up
        a.steps, a.every, a.repeat = 10, 5, 1
    print(f"# {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"torch {torch.__version__}; {a.steps} steps, a checkpoint every {a.every}")
    plain, killed = [], []
    for _ in range(a.repeat):  # a fresh cluster a round: a nanny does not always restart
        with lk.DaskScheduler(mode="processes", n_workers=4, threads_per_worker=1) as s:
            if not a.quick:
                one_run(s, a.every, a.every, kill=False)  # warm-up: imports on the workers
            plain.append(one_run(s, a.steps, a.every, kill=False))
            killed.append(one_run(s, a.steps, a.every, kill=True))
        print(f"  round: {plain[-1]['wall']:.2f} s plain, {killed[-1]['wall']:.2f} s killed",
              flush=True)
    report(plain, killed, a.every)


def report(plain: list, killed: list, every: int) -> None:
    """The cost of a kill against the run without one on the same cluster (a round).

    The cost is split into the regroup (kill → the new trainer ready), the redone steps at
    the warm step time, the new group's first steps beyond that time ("cold": ranks on
    workers that had not trained yet), and what is left (the lost try's checkpoints read,
    the trial's other bookkeeping).
    """
    step = statistics.median(t for r in plain for t in r["marks"][0]["steps"])
    rows = []
    for base, r in zip(plain, killed, strict=True):
        first, again = r["marks"][0], r["marks"][1]
        redone = r["kill_at"] - again["start"]
        regroup = again["ready"] - first["killed"]
        # the new group's steps against warm ones (the same number of steps in all)
        cold = sum(again["steps"][:COLD]) - COLD * step
        rows.append((base["wall"], r["wall"], redone, regroup, redone * step, cold))
    print(f"a step {step * 1000:.1f} ms (median, runs without a kill)")
    print("| without (s) | with a kill (s) | cost (s) | steps redone | kill → new group ready (s) "
          f"| redone steps (s) | new group's first {COLD} steps over warm ones (s) | left (s) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for base, wall, redone, regroup, redo, cold in rows:
        left = wall - base - regroup - redo - cold
        print(f"| {base:.2f} | {wall:.2f} | {wall - base:.2f} | {redone} | {regroup:.2f} "
              f"| {redo:.2f} | {cold:.2f} | {left:.2f} |")
    cost = statistics.median(wall - base for base, wall, *_ in rows)
    bound = statistics.median(g + d for *_, g, d, _ in rows)
    print(f"median cost {cost:.2f} s; bound (redone steps + regroup) {bound:.2f} s; "
          f"at most {every} steps since a checkpoint")
    for _, r in zip(plain, killed, strict=True):
        first = [round(t * 1000, 1) for t in r["marks"][1]["steps"][:COLD]]
        print(f"  the new group's first steps (ms): {first}")


#: The new group's first steps whose time is compared with warm steps.
COLD = 5


if __name__ == "__main__":
    main()
