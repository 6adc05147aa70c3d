"""Trials that are data-parallel groups (issue 34): how well a sweep packs them, in one command.

Run ``python benchmarks/bench_groups.py`` (about two minutes on 2 cores) or
``--quick`` (a smoke test).  It prints times and ratios and never asserts.

1. **Packing** (``--only packing``): 8 trials of 2 workers each
   (``workers_per_trial=2``) on 4 worker processes
   (``lk.DaskScheduler(mode="processes", n_workers=4, threads_per_worker=1)``).
   Each trial trains a small torch MLP with ``lk.DataParallelTrainer`` on
   ``trial.scheduler`` for a fixed number of client-fed steps
   (``trainer.step``), 1 to 4 units of 24 steps by configuration (unequal
   but fixed lengths, in an order two groups can pack evenly).  Each trial measures its own wall time (a
   monotonic clock at its start and end; a trial's group-seconds are twice
   it).  The ideal packing is the trials' summed wall over 2 groups running
   at once; the target is the sweep's wall <= 1.1x it.  Idle worker-seconds:
   4 x wall - 2 x the summed trial walls.  Baseline, in the same command and
   on the same cluster: the same 8 trainings one after another on two of its
   workers (``s.restricted(...)``); the speed-up is its wall over the
   sweep's.  The per-trial wall in the sweep over the same trial's wall alone
   says what running two groups at once costs each (4 worker processes on a
   2-core machine share its cores).
2. **A killed worker** (``--only kill``): the seconds a worker SIGKILLed
   under a group trial costs it (to come: a section of its own beside
   :func:`packing`).

Timings are medians over ``--repeat`` rounds (3; 1 with ``--quick``); the sweep
and the baseline alternate which goes first.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import labkit as lk  # noqa: E402

SIZES = {"full": dict(unit=24, trials=8, width=256, rows=1024, repeat=3),
         "quick": dict(unit=1, trials=4, width=64, rows=128, repeat=1)}
# the warm-up only steadies the timings of the full run; the smoke test skips it
SIZES["full"]["warm_up"], SIZES["quick"]["warm_up"] = True, False
K = 2                           # workers a trial
N_WORKERS = 4
# trial id -> (start, end, workers): the trial fns run on client threads, so they write here
# (a dict's item set is atomic; a lock would not pickle, and lk.sweep pickles the fn to check it)
SPANS: dict = {}


# -- one training ---------------------------------------------------------------------------

def model_and_opt(seed: int, width: int):
    """The MLP from a generator of its own (trials on client threads share torch's global one)."""
    model = nn.Sequential(nn.Linear(32, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(),
                          nn.Linear(width, 1))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def batch(step: int, rows: int):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(rows, 32, generator=g)
    return x, x.sum(dim=1, keepdim=True) * 0.1


def training(scheduler, config: dict, report=None) -> float:
    """``config["steps"]`` client-fed steps on ``scheduler`` (a rank a worker); the last loss."""
    model, opt = model_and_opt(config["seed"], config["width"])
    trainer = lk.DataParallelTrainer(model, nn.functional.mse_loss, opt, scheduler=scheduler)
    try:
        for step in range(config["steps"]):
            loss = trainer.step(*batch(step, config["rows"]))
            if report is not None:
                report(step + 1, loss)
    finally:
        trainer.close()
    return loss


def group_trial(config, trial):
    """One training on the trial's group; its own span and workers kept in :data:`SPANS`."""
    start = time.monotonic()
    training(trial.scheduler, config, lambda step, loss: trial.report(step, loss=loss))
    SPANS[trial.id] = (start, time.monotonic(), tuple(trial.workers))


UNITS = (4, 1, 3, 2)   # a trial's steps, in units: started in this order, 2 groups pack them evenly


def configs(size: dict) -> list[dict]:
    """The trials: 4, 1, 3, 2, 4, 1, 3, 2 units of steps (deterministic, unequal).

    In this order two groups, each taking the next trial when it is free, both end at 10
    units (the summed 20 over 2): the ideal is reachable.  In the order 1, 2, 3, 4, ...
    they would end at 9 and 11 units, 1.1x the ideal before any overhead.
    """
    return [dict(seed=i, steps=size["unit"] * UNITS[i % len(UNITS)], width=size["width"],
                 rows=size["rows"]) for i in range(size["trials"])]


# -- (1) packing ------------------------------------------------------------------------------

def sweep_once(s, size: dict) -> dict:
    """The sweep of :func:`configs` as groups of K; its wall and each trial's span."""
    SPANS.clear()
    began = time.monotonic()
    result = lk.sweep(group_trial, configs(size), scheduler=s, workers_per_trial=K,
                      metric="loss", mode="min", store=None)
    wall = time.monotonic() - began
    assert result.counts() == {"completed": size["trials"]}, result.counts()
    spans = dict(SPANS)
    return dict(wall=wall, began=began, spans=spans,
                trial_walls={i: end - start for i, (start, end, _) in spans.items()},
                overlaps=shared_while_running(spans))


def alone_once(s, size: dict) -> dict:
    """The same trainings one after another on two workers of ``s``; the wall and each one's."""
    group = s.restricted(sorted(s.client.nthreads())[:K])
    walls = {}
    try:
        began = time.monotonic()
        for i, config in enumerate(configs(size)):
            t0 = time.monotonic()
            training(group, config)
            walls[i] = time.monotonic() - t0
        wall = time.monotonic() - began
    finally:
        group.shutdown()
    return dict(wall=wall, trial_walls=walls)


def shared_while_running(spans: dict) -> int:
    """Pairs of trials that ran at once on a shared worker (placement says: none)."""
    items = list(spans.values())
    return sum(1 for i, (a0, a1, wa) in enumerate(items) for b0, b1, wb in items[i + 1:]
               if set(wa) & set(wb) and a0 < b1 and b0 < a1)


def handovers(spans: dict) -> list[float]:
    """Seconds between a trial's end and the start of the next trial on any of its workers:
    what handing a group over costs (its scheduler shut down, a new one, the fn's thread)."""
    gaps = []
    for start, _, workers in spans.values():
        before = [end for s0, end, w in spans.values() if end <= start and set(w) & set(workers)]
        if before:
            gaps.append(start - max(before))
    return gaps


def list_packing(walls: list[float], groups: int = N_WORKERS // K) -> float:
    """The makespan of ``walls`` started in order on ``groups`` groups, each when one is free:
    the best these lengths allow in this order (the tail a sum / groups cannot see)."""
    free = [0.0] * groups
    for w in walls:
        free[free.index(min(free))] += w
    return max(free)


def packing_round(s, size: dict, r: int) -> tuple[dict, dict]:
    """One round: the sweep and the baseline, alternating which goes first."""
    if r % 2 == 0:
        swept = sweep_once(s, size)
        return swept, alone_once(s, size)
    alone = alone_once(s, size)
    return sweep_once(s, size), alone


def warm_up(s, size: dict) -> None:
    """Every worker imports torch and forms a process group once (3 s the first time)."""
    lk.sweep(group_trial, [dict(c, steps=1) for c in configs(size)[:N_WORKERS // K]],
             scheduler=s, workers_per_trial=K, metric="loss", mode="min", store=None)
    alone_once(s, dict(size, trials=1, unit=1))


def packing(size: dict) -> None:
    """Benchmark (1)."""
    rounds = []
    with lk.DaskScheduler(mode="processes", n_workers=N_WORKERS, threads_per_worker=1) as s:
        if size["warm_up"]:
            warm_up(s, size)
        for r in range(size["repeat"]):
            rounds.append(packing_round(s, size, r))
    steps = [c["steps"] for c in configs(size)]
    print(f"\n[1] {size['trials']} trials of {K} workers on {N_WORKERS} worker processes "
          f"(1 thread each); {sum(steps)} client-fed steps in all ({steps}), MLP width "
          f"{size['width']}, {size['rows']} rows a batch; {size['repeat']} round(s)")
    figures = [packing_figures(swept, alone) for swept, alone in rounds]
    for r, f in enumerate(figures):
        print_round(r, f)
    print_medians(figures)


def packing_figures(swept: dict, alone: dict) -> dict:
    """The round's figures: walls, ideal, ratios, idle worker-seconds, per-trial slowdown."""
    walls = swept["trial_walls"]
    order = sorted(walls, key=lambda i: swept["spans"][i][0])
    summed = sum(walls.values())
    ideal = summed / (N_WORKERS // K)
    first = min(start for start, _, _ in swept["spans"].values()) - swept["began"]
    last = swept["began"] + swept["wall"] - max(end for _, end, _ in swept["spans"].values())
    gaps = handovers(swept["spans"])
    return dict(wall=swept["wall"], summed=summed, gap=statistics.median(gaps),
                gaps=sum(gaps), ideal=ideal, ratio=swept["wall"] / ideal,
                listed=list_packing([walls[i] for i in order]),
                idle=N_WORKERS * swept["wall"] - K * summed, first=first, last=last,
                trials=len(walls), overlaps=swept["overlaps"], alone=alone["wall"],
                alone_summed=sum(alone["trial_walls"].values()),
                slowdown=summed / sum(alone["trial_walls"].values()),
                speedup=alone["wall"] / swept["wall"])


def print_round(r: int, f: dict) -> None:
    print(f"    round {r}: sweep {f['wall']:.2f} s; trials' summed wall {f['summed']:.2f} s, "
          f"ideal {f['ideal']:.2f} s -> {f['ratio']:.3f}x ideal (packed in start order "
          f"{f['listed']:.2f} s); idle {f['idle']:.1f} worker-s; first trial after "
          f"{f['first']:.2f} s, sweep ended {f['last']:.2f} s after the last; group handed over "
          f"in {f['gap'] * 1e3:.0f} ms (median; {f['gaps']:.2f} s in all); one after "
          f"another {f['alone']:.2f} s; each trial in the sweep {f['slowdown']:.2f}x "
          f"its wall alone; shared-worker overlaps {f['overlaps']}")


def print_medians(figures: list[dict]) -> None:
    m = {key: statistics.median(f[key] for f in figures) for key in figures[0]}
    n = round(m["trials"])
    rows = [(f"sweep wall ({n} group trials, 2 at once)", f"{m['wall']:.2f} s"),
            ("trials' summed wall / 2 groups (ideal)", f"{m['ideal']:.2f} s"),
            ("sweep / ideal", f"{m['ratio']:.3f}x (target <= 1.1)"),
            ("sweep / packed in start order", f"{m['wall'] / m['listed']:.3f}x"),
            ("a group handed over (trial end -> next start)",
             f"{m['gap'] * 1e3:.0f} ms (median; {m['gaps']:.2f} s a sweep)"),
            ("idle worker-seconds (4 x wall - 2 x summed)",
             f"{m['idle']:.1f} worker-s of {N_WORKERS * m['wall']:.1f} "
             f"({m['idle'] / (N_WORKERS * m['wall']):.1%})"),
            (f"the same {n} trainings one after another", f"{m['alone']:.2f} s on 2 workers"),
            ("speed-up (one after another / sweep)", f"{m['speedup']:.2f}x"),
            ("a trial's wall in the sweep / alone", f"{m['slowdown']:.2f}x (the ceiling on "
                                                    f"speed-up: 2 / this = "
                                                    f"{2 / m['slowdown']:.2f}x)"),
            ("shared-worker overlaps", f"{m['overlaps']:.0f} (placement: 0)")]
    print("    medians:")
    for label, value in rows:
        print(f"    {label:46s} {value}")


SECTIONS = {"packing": packing}   # (2) "kill" comes beside it


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    parser.add_argument("--repeat", type=int, help="rounds (medians are printed)")
    parser.add_argument("--only", choices=list(SECTIONS), help="one part only")
    args = parser.parse_args()
    size = dict(SIZES["quick" if args.quick else "full"])
    if args.repeat:
        size["repeat"] = args.repeat
    print(f"labkit group trials: {platform.node()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, torch {torch.__version__}")
    for name, section in SECTIONS.items():
        if args.only in (None, name):
            section(size)


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    main()
