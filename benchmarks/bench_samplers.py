"""Optuna's samplers driving lk.sweep (issue 35): how well TPE searches, what asking and telling cost.

Run as ``python benchmarks/bench_sweep.py --only samplers`` (``--quick``: a
smoke test), or this file alone with the same options.  It prints and never asserts.

(a) **Best value**: ``f = sum (x_i - 0.7)^2`` over ``[0, 1]^4``, 40 trials,
    seeds 0, 1, 2, serial: labkit's random search (``search="random"``)
    against ``search=optuna.samplers.TPESampler(seed=s)``, and Optuna alone
    (``study.optimize``, TPE and random samplers of the same seeds).  The mean
    of the three best values of each, and TPE's over random's.  Target
    (issue 35): labkit's TPE <= 1/2 of random; Optuna alone about 1/10.
(b) **Cost of a trial**: 1,000 trivial trials (they return at once) on the
    same space, ``LocalScheduler``, ``store=None``: milliseconds a trial of
    labkit with random search, of labkit with TPE (the difference is what
    asking and telling cost inside the sweep) and of Optuna's own
    ``study.optimize`` with TPE on the same objective (target: about 2-8 ms a
    trial at 1,000 trials, as Optuna's own).
(c) **Population-based training** (``search=lk.PBT(...)``): a score over
    ``T = 40`` steps that a step raises by ``lr`` in the first half and by
    ``1 - lr`` in the second (``lr`` in [0, 1]): every fixed configuration
    scores exactly ``T / 2 = 20``.  PBT (population 8, ``interval=5,
    quantile=0.25, mutations={"lr": lk.uniform(0, 1)},
    resample_probability=0.5``; the population outnumbers the slots: 1 on a
    ``LocalScheduler``, 2 on a threads cluster) against the best fixed
    configuration of the same population, and against random search and TPE
    given the same budget of steps (the steps PBT ran, re-run ones included,
    over ``T``: that many trials): on the same space ``{"lr"}``, and on a
    space that knows the schedule's shape (``lr`` for each half), which PBT is
    not told.  Target (issue 35): PBT's best beats every fixed configuration by
    a wide margin (>= 1.3x of ``T / 2``).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import labkit as lk  # noqa: E402

CUBE = {f"x{i}": lk.uniform(0, 1) for i in range(4)}
SIZES = {"full": dict(best_trials=40, seeds=3, cost_trials=1000, cost_repeat=2, pbt_seeds=5),
         "quick": dict(best_trials=20, seeds=1, cost_trials=60, cost_repeat=1, pbt_seeds=1)}


def bowl(config) -> float:
    return sum((config[f"x{i}"] - 0.7) ** 2 for i in range(4))


def trial_fn(config, trial):
    """The bowl as a trial: returns its value at once."""
    return {"loss": bowl(config)}


def objective(trial) -> float:
    """The bowl as Optuna's objective."""
    return bowl({f"x{i}": trial.suggest_float(f"x{i}", 0, 1) for i in range(4)})


def labkit_best(search, n: int, seed: int) -> float:
    result = lk.sweep(trial_fn, CUBE, trials=n, metric="loss", mode="min", seed=seed,
                      store=None, search=search, max_concurrent=1)
    return result.best.value


def optuna_best(sampler, n: int) -> float:
    import optuna

    study = optuna.create_study(sampler=sampler, direction="minimize")
    study.optimize(objective, n_trials=n)
    return study.best_value


def best_values(size: dict) -> None:
    import optuna

    n, seeds = size["best_trials"], range(size["seeds"])
    print(f"(a) best value of f = sum (x_i - 0.7)^2 on [0,1]^4, {n} trials, "
          f"mean over seeds {list(seeds)}")
    rows = {
        "labkit search='random'": [labkit_best("random", n, s) for s in seeds],
        "labkit search=TPESampler(seed=s)": [
            labkit_best(optuna.samplers.TPESampler(seed=s), n, s) for s in seeds],
        "Optuna alone, RandomSampler(seed=s)": [
            optuna_best(optuna.samplers.RandomSampler(seed=s), n) for s in seeds],
        "Optuna alone, TPESampler(seed=s)": [
            optuna_best(optuna.samplers.TPESampler(seed=s), n) for s in seeds],
    }
    for label, values in rows.items():
        print(f"    {label:40s} mean best {statistics.mean(values):.4f}  "
              f"({', '.join(f'{v:.4f}' for v in values)})")
    ratio = statistics.mean(rows["labkit search=TPESampler(seed=s)"]) / statistics.mean(
        rows["labkit search='random'"])
    alone = statistics.mean(rows["Optuna alone, TPESampler(seed=s)"]) / statistics.mean(
        rows["labkit search='random'"])
    print(f"    labkit TPE / labkit random: {ratio:.3f} (target <= 0.5); "
          f"Optuna's TPE alone / labkit random: {alone:.3f}")


def labkit_cost(search, n: int) -> float:
    began = time.perf_counter()
    lk.sweep(trial_fn, CUBE, trials=n, metric="loss", mode="min", seed=0, store=None,
             search=search)
    return (time.perf_counter() - began) / n


def optuna_cost(n: int) -> float:
    import optuna

    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
    began = time.perf_counter()
    study.optimize(objective, n_trials=n)
    return (time.perf_counter() - began) / n


def trial_cost(size: dict) -> None:
    import optuna

    n = size["cost_trials"]
    print(f"(b) cost of a trial: {n} trivial trials, LocalScheduler, store=None "
          f"(median of {size['cost_repeat']}, orders alternating)")
    times: dict[str, list] = {"random": [], "tpe": [], "optuna": []}
    runs = {
        "random": lambda: labkit_cost("random", n),
        "tpe": lambda: labkit_cost(optuna.samplers.TPESampler(seed=0), n),
        "optuna": lambda: optuna_cost(n),
    }
    for r in range(size["cost_repeat"]):
        for key in (runs if r % 2 == 0 else list(reversed(runs))):
            times[key].append(runs[key]())
    random, tpe, alone = (statistics.median(times[k]) * 1e3 for k in ("random", "tpe", "optuna"))
    print(f"    labkit, search='random'                  {random:7.2f} ms a trial")
    print(f"    labkit, search=TPESampler(seed=0)        {tpe:7.2f} ms a trial "
          f"(asking and telling: {tpe - random:.2f} ms)")
    print(f"    Optuna alone, TPE, study.optimize        {alone:7.2f} ms a trial")
    print(f"    labkit TPE / Optuna alone: {tpe / alone:.2f}")


T = 40  # (c): steps of the task
STEPS: list = []  # (c): one entry a step run, by any trial (they run in this process)


def climb(config, trial):
    """(c): the task, from the latest checkpoint; ``lr`` or ``lr_first``/``lr_second``."""
    saved = trial.restore() or {"step": 0, "score": 0.0}
    score = saved["score"]
    for step in range(saved["step"] + 1, T + 1):
        first = trial.config.get("lr", trial.config.get("lr_first"))
        second = trial.config.get("lr", trial.config.get("lr_second"))
        score += first if step <= T // 2 else 1.0 - second
        STEPS.append(1)
        trial.report(step, score=score)
        trial.checkpoint({"step": step, "score": score})


def climb_sweep(space, search, trials: int, seed: int, scheduler=None):
    """The task's sweep; ``(best score, steps run)``."""
    STEPS.clear()
    result = lk.sweep(climb, space, trials=trials, metric="score", mode="max", seed=seed,
                      store=None, search=search, scheduler=scheduler)
    return result.best.value, len(STEPS)


def pbt_figure(size: dict) -> None:
    """(c) PBT against the best fixed configuration, random search and TPE, same budget."""
    import optuna

    seeds, members = range(size["pbt_seeds"]), 8
    lr, schedule = {"lr": lk.uniform(0, 1)}, {"lr_first": lk.uniform(0, 1),
                                               "lr_second": lk.uniform(0, 1)}
    print(f"(c) PBT on the schedule task (T={T}, every fixed lr scores {T // 2}), population "
          f"{members}, seeds {list(seeds)}")
    rows: dict[str, list] = {}
    budgets = []
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as two:
        for s in seeds:
            pbt = lk.PBT(interval=5, quantile=0.25, mutations={"lr": lk.uniform(0, 1)},
                         resample_probability=0.5, seed=s)
            best, steps = climb_sweep(lr, pbt, members, s)
            budgets.append(steps)
            rows.setdefault("PBT, LocalScheduler (1 slot)", []).append(best)
            rows.setdefault("PBT, threads cluster (2 slots)", []).append(
                climb_sweep(lr, pbt, members, s, scheduler=two)[0])
            rows.setdefault("the population's 8 configurations, fixed", []).append(
                climb_sweep(lr, "random", members, s)[0])
            n = math.ceil(steps / T)  # the same budget of steps
            rows.setdefault("random search, same budget, {lr}", []).append(
                climb_sweep(lr, "random", n, s)[0])
            rows.setdefault("TPE, same budget, {lr}", []).append(
                climb_sweep(lr, optuna.samplers.TPESampler(seed=s), n, s)[0])
            rows.setdefault("random search, same budget, {lr_first, lr_second}", []).append(
                climb_sweep(schedule, "random", n, s)[0])
            rows.setdefault("TPE, same budget, {lr_first, lr_second}", []).append(
                climb_sweep(schedule, optuna.samplers.TPESampler(seed=s), n, s)[0])
    print(f"    PBT's budget: {', '.join(map(str, budgets))} steps "
          f"({', '.join(f'{b / T:.1f}' for b in budgets)} trials of {T} steps)")
    for label, values in rows.items():
        print(f"    {label:52s} mean best {statistics.mean(values):6.2f}  "
              f"({', '.join(f'{v:.2f}' for v in values)})")
    pbt_mean = statistics.mean(rows["PBT, LocalScheduler (1 slot)"])
    print(f"    PBT (1 slot) / best fixed: {pbt_mean / (T / 2):.2f}x (target >= 1.3x)")


def samplers(size: dict) -> None:
    """Both parts; skipped where optuna does not import."""
    try:
        import optuna
    except ImportError:
        print("samplers: skipped (optuna not installed: pip install labkit[search])")
        return
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # this script's own studies
    print(f"samplers (issue 35): optuna {optuna.__version__}")
    best_values(size)
    trial_cost(size)
    pbt_figure(size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    parser.add_argument("--only-pbt", action="store_true", help="(c) alone")
    args = parser.parse_args()
    print(f"labkit samplers: {platform.node()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}")
    size = SIZES["quick" if args.quick else "full"]
    if args.only_pbt:
        pbt_figure(size)
    else:
        samplers(size)


if __name__ == "__main__":
    main()
