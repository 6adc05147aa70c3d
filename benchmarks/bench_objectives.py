"""Several objectives (issue 48): what early stopping by dominance saves, what NSGA-II costs.

Run ``python benchmarks/bench_objectives.py`` (about a minute on 2 cores) or
``--quick`` (a smoke test).  It prints and never asserts.

**Problem** (synthetic, ZDT1-style, both objectives minimised): a
configuration ``x0..x3`` in ``[0, 1]`` has the final values ``f1 = x0``,
``f2 = g (1 - sqrt(f1 / g))`` with ``g = 1 + 9 mean(x1..x3)``.  A trial
reports 30 steps; at step ``t`` each objective is ``final + h exp(-t / 6)``,
``h`` in ``[0.3, 1.5]`` drawn from the configuration (each trial learns at its
own pace: early values order the trials only roughly).  No sleeping: the
figures are counts, not times.

(a) **Savings**: ``lk.sweep(..., metric=("f1", "f2"), mode=("min", "min"),
    search="random", seed=s)`` on a ``LocalScheduler`` (one trial at a time:
    the same order each run), with ``early_stop=lk.ASHA(min_steps=3,
    reduction=3, max_steps=30)`` (rungs at 3, 9, 27; by dominance) and
    without; the same configurations (the same seed).  The hypervolume of
    each sweep's front (every trial's last reported values, reference point
    ``(1.1, 11)``) and the steps run, ASHA's over the full sweep's, mean over
    3 seeds.  Targets: hypervolume >= 95%, steps <= 50%.
(b) **Cost of a trial**: trivial trials (they return ``f1, f2`` at once)
    searched by ``optuna.samplers.NSGAIISampler(seed=0)``: labkit
    (``LocalScheduler``, ``store=None``; and with ``search="random"``, so the
    difference is what asking and telling cost inside the sweep) against
    Optuna's own ``study.optimize`` with ``directions=["minimize",
    "minimize"]`` and the same sampler, milliseconds a trial, the fastest of
    7 runs in alternating order (on a machine that others load, the fastest
    run is the one least disturbed; the medians are printed too, and the
    median CPU time of the process, which others' load disturbs less).
    Target: labkit NSGA-II <= 1.1x Optuna alone.  The sweep runs one trial at a
    time (``max_concurrent=1``), as ``study.optimize`` does.

``--only cost --cost-trials 2000 --rounds 9`` runs part (b) alone, at other
sizes.  On a machine others load, read the CPU figures: the medians, and the
median of each round's ratio (the two runs of a round are side by side, so
they share the load of that moment).

``--only cost --instructions`` counts (b)'s instructions a trial instead, which
others' load does not change: each of labkit NSGA-II, labkit random and Optuna
alone runs in a process of its own under valgrind (``cachegrind``, no cache
simulation) at ``N/2`` and ``N`` trials (``--cost-trials``, 600 by default), and
a trial's count is ``(Ir(N) - Ir(N/2)) / (N/2)``: the start, the imports and
the first trials cancel out.  ``--rounds R`` (1 by default here) does it R times
and gives the median of each round's ratio.  Needs ``valgrind``; a few minutes a round.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import labkit as lk  # noqa: E402
from labkit.experiments.objectives import hypervolume  # noqa: E402

SPACE = {f"x{i}": lk.uniform(0, 1) for i in range(4)}
MODES = ("min", "min")
REFERENCE = (1.1, 11.0)
STEPS = 30
SIZES = {
    "full": dict(trials=81, seeds=3, cost_trials=500, cost_repeat=7),
    "quick": dict(trials=18, seeds=1, cost_trials=30, cost_repeat=1),
}


def zdt1(config) -> tuple[float, float]:
    """The final values ``(f1, f2)`` of a configuration (ZDT1 on 4 variables)."""
    f1 = config["x0"]
    g = 1.0 + 9.0 * (config["x1"] + config["x2"] + config["x3"]) / 3.0
    return f1, g * (1.0 - math.sqrt(f1 / g))


def pace(config) -> float:
    """How far above its final values a trial starts, in ``[0.3, 1.5]`` (from its config)."""
    u = math.sin(12.9898 * config["x1"] + 78.233 * config["x3"]) * 43758.5453
    return 0.3 + 1.2 * (u - math.floor(u))


def curve(config, trial):
    """30 steps approaching the final values as ``exp(-t / 6)``."""
    f1, f2 = zdt1(config)
    h = pace(config)
    for t in range(1, STEPS + 1):
        late = h * math.exp(-t / 6.0)
        trial.report(t, f1=f1 + late, f2=f2 + late)
    return {"f1": f1, "f2": f2}


def front_volume(result) -> tuple[float, int, int]:
    """``(hypervolume, steps run, trials stopped)`` of a sweep, from every trial's last values."""
    last = [r.history[-1][1] for r in result.trials if r.history]
    volume = hypervolume([(m["f1"], m["f2"]) for m in last], MODES, REFERENCE)
    steps = sum(len(r.history) for r in result.trials)
    stopped = sum(r.status == "stopped" for r in result.trials)
    return volume, steps, stopped


def savings(size: dict) -> None:
    """(a) ASHA by dominance against the same sweep run to the end."""
    n, seeds = size["trials"], range(size["seeds"])
    print(f"(a) savings: ZDT1-style, 2 objectives (min, min), {STEPS} steps a trial, {n} trials, "
          f"random search, LocalScheduler, seeds {list(seeds)}")
    volume_ratios, step_ratios = [], []
    for s in seeds:
        common = dict(metric=("f1", "f2"), mode=MODES, trials=n, seed=s, store=None,
                      search="random")
        full = front_volume(lk.sweep(curve, SPACE, **common))
        asha = front_volume(lk.sweep(curve, SPACE, early_stop=lk.ASHA(
            min_steps=3, reduction=3, max_steps=STEPS), **common))
        volume_ratios.append(asha[0] / full[0])
        step_ratios.append(asha[1] / full[1])
        print(f"    seed {s}: no early stopping  hypervolume {full[0]:.4f}, {full[1]} steps; "
              f"ASHA by dominance  hypervolume {asha[0]:.4f}, {asha[1]} steps, "
              f"{asha[2]} of {n} stopped")
    print(f"    ASHA / no early stopping, hypervolume: {statistics.mean(volume_ratios):.1%} "
          f"(target >= 95%)")
    print(f"    ASHA / no early stopping, steps run:   {statistics.mean(step_ratios):.1%} "
          f"(target <= 50%)")


def instant(config, trial):
    """(b): a trivial trial, both objectives at once."""
    f1, f2 = zdt1(config)
    return {"f1": f1, "f2": f2}


def optuna_objective(trial):
    """(b): the same for Optuna's study.optimize."""
    return zdt1({f"x{i}": trial.suggest_float(f"x{i}", 0, 1) for i in range(4)})


def labkit_cost(search, n: int) -> tuple[float, float]:
    """(wall, CPU) seconds a trial of a labkit sweep of ``n`` trivial trials."""
    began, cpu = time.perf_counter(), time.process_time()
    lk.sweep(instant, SPACE, trials=n, metric=("f1", "f2"), mode=MODES, seed=0, store=None,
             search=search, max_concurrent=1)
    return (time.perf_counter() - began) / n, (time.process_time() - cpu) / n


def optuna_cost(n: int) -> tuple[float, float]:
    """(wall, CPU) seconds a trial of Optuna's own study.optimize, NSGA-II."""
    import optuna

    study = optuna.create_study(sampler=optuna.samplers.NSGAIISampler(seed=0),
                                directions=["minimize", "minimize"])
    began, cpu = time.perf_counter(), time.process_time()
    study.optimize(optuna_objective, n_trials=n)
    return (time.perf_counter() - began) / n, (time.process_time() - cpu) / n


def cost(size: dict) -> None:
    """(b) NSGA-II through labkit against Optuna's own loop."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    n = size["cost_trials"]
    print(f"(b) cost of a trial: {n} trivial trials, NSGAIISampler(seed=0), LocalScheduler, "
          f"store=None (fastest of {size['cost_repeat']}, orders alternating; optuna "
          f"{optuna.__version__})")
    runs = {
        "random": lambda: labkit_cost("random", n),
        "nsga2": lambda: labkit_cost(optuna.samplers.NSGAIISampler(seed=0), n),
        "optuna": lambda: optuna_cost(n),
    }
    times: dict[str, list] = {key: [] for key in runs}
    labkit_cost("random", 20), labkit_cost(optuna.samplers.NSGAIISampler(seed=0), 20)
    optuna_cost(20)  # untimed: the first sweep of a process pays its imports
    for r in range(size["cost_repeat"]):
        for key in (runs if r % 2 == 0 else list(reversed(runs))):
            times[key].append(runs[key]())
    random, nsga2, alone = (min(w for w, _ in times[k]) * 1e3
                            for k in ("random", "nsga2", "optuna"))
    medians = {k: statistics.median(w for w, _ in v) * 1e3 for k, v in times.items()}
    cpus = {k: statistics.median(c for _, c in v) * 1e3 for k, v in times.items()}
    print(f"    labkit, search='random'                    {random:7.3f} ms a trial")
    print(f"    labkit, search=NSGAIISampler(seed=0)       {nsga2:7.3f} ms a trial "
          f"(asking and telling: {nsga2 - random:.3f} ms)")
    print(f"    Optuna alone, NSGA-II, study.optimize      {alone:7.3f} ms a trial")
    print(f"    labkit NSGA-II / Optuna alone: {nsga2 / alone:.2f}x (target <= 1.1x)")
    print(f"    asking and telling in labkit / Optuna alone: {(nsga2 - random) / alone:.2f}x")
    print(f"    medians: labkit random {medians['random']:.3f}, labkit NSGA-II "
          f"{medians['nsga2']:.3f}, Optuna alone {medians['optuna']:.3f} ms a trial "
          f"({medians['nsga2'] / medians['optuna']:.2f}x)")
    # CPU time: what the process itself spent, less sensitive to others loading the machine
    print(f"    CPU medians: labkit random {cpus['random']:.3f}, labkit NSGA-II "
          f"{cpus['nsga2']:.3f}, Optuna alone {cpus['optuna']:.3f} ms a trial "
          f"({cpus['nsga2'] / cpus['optuna']:.2f}x; asking and telling "
          f"{(cpus['nsga2'] - cpus['random']) / cpus['optuna']:.2f}x)")
    rounds = sorted(a[1] / o[1] for a, o in zip(times["nsga2"], times["optuna"], strict=True))
    print(f"    CPU, labkit NSGA-II / Optuna alone by round: median "
          f"{statistics.median(rounds):.2f}x (rounds: {', '.join(f'{r:.2f}' for r in rounds)}); "
          f"load average {os.getloadavg()[0]:.1f}")


def one_run(mode: str, n: int) -> None:
    """A single run of (b) in this process (what ``--instructions`` counts under valgrind)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if mode == "optuna":
        optuna_cost(n)
    else:
        labkit_cost(optuna.samplers.NSGAIISampler(seed=0) if mode == "nsga2" else "random", n)


def instructions_of(mode: str, n: int) -> int:
    """Instructions (valgrind's ``I refs``) of a process running ``one_run(mode, n)``."""
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no",
               "--cachegrind-out-file=/dev/null", sys.executable, os.path.abspath(__file__),
               "--one-run", mode, "--cost-trials", str(n)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from valgrind: {done.stderr[-500:]}")
    return int(found.group(1).replace(",", ""))


def instructions(n: int, rounds: int = 1) -> None:
    """(b) by instructions a trial, ``(Ir(n) - Ir(n/2)) / (n/2)``, each mode in its own process;
    ``rounds`` times over (a process's count varies by about 0.3% with its memory's layout)."""
    if shutil.which("valgrind") is None:
        print("(b) by instructions skipped: valgrind is not on the PATH")
        return
    half = n // 2
    print(f"(b) cost of a trial by instructions (valgrind cachegrind): (Ir({n}) - Ir({half})) / "
          f"{n - half}, NSGAIISampler(seed=0), LocalScheduler, store=None, max_concurrent=1, "
          f"{rounds} round(s)")
    per: dict[str, list] = {"optuna": [], "nsga2": [], "random": []}
    for _ in range(rounds):
        for mode, counts in per.items():
            counts.append((instructions_of(mode, n) - instructions_of(mode, half)) / (n - half))
    ratios = [a / o for a, o in zip(per["nsga2"], per["optuna"], strict=True)]
    mid = {mode: statistics.median(counts) / 1e6 for mode, counts in per.items()}
    print(f"    Optuna alone, NSGA-II, study.optimize      {mid['optuna']:7.3f} M a trial")
    print(f"    labkit, search=NSGAIISampler(seed=0)       {mid['nsga2']:7.3f} M a trial")
    print(f"    labkit, search='random'                    {mid['random']:7.3f} M a trial")
    print(f"    labkit NSGA-II over Optuna alone:          {mid['nsga2'] - mid['optuna']:7.3f} M "
          "a trial (medians)")
    print(f"    labkit NSGA-II / Optuna alone: median {statistics.median(ratios):.3f}x by round "
          f"(rounds: {', '.join(f'{r:.3f}' for r in ratios)}; target <= 1.1x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    parser.add_argument("--only", choices=("savings", "cost"), help="one part only")
    parser.add_argument("--cost-trials", type=int, help="(b)'s trials a run (default 500)")
    parser.add_argument("--rounds", type=int, help="(b)'s runs of each (default 7)")
    parser.add_argument("--instructions", action="store_true",
                        help="(b) by instructions a trial under valgrind (needs valgrind)")
    parser.add_argument("--one-run", choices=("optuna", "nsga2", "random"),
                        help=argparse.SUPPRESS)  # one run, counted by --instructions
    args = parser.parse_args()
    if args.one_run:
        one_run(args.one_run, args.cost_trials or SIZES["full"]["cost_trials"])
        return
    print(f"labkit objectives: {platform.node()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}")
    size = dict(SIZES["quick" if args.quick else "full"])
    size["cost_trials"] = args.cost_trials or size["cost_trials"]
    size["cost_repeat"] = args.rounds or size["cost_repeat"]
    if args.only != "cost":
        savings(size)
    if args.only == "savings":
        return
    try:
        import optuna  # noqa: F401
    except ImportError:
        print("(b) skipped (optuna not installed: pip install labkit[search])")
        return
    if args.instructions:
        instructions(args.cost_trials or 600, args.rounds or 1)
        return
    cost(size)


if __name__ == "__main__":
    main()
