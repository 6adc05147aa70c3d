"""What copying the trained model back to the client costs at the end of a call (issue 44).

A ``DataParallelTrainer`` on ``lk.DaskScheduler(mode="processes", n_workers=2)``
copies rank 0's state (the model and the optimizer's, here SGD with momentum:
twice the parameters) into the user's model and optimizer whenever ``fit``,
``step`` or ``evaluate`` returns.  For an MLP of 1 M, 10 M and 100 M parameters
(``1000 -> H -> 10``, float32), medians of rounds, one trainer at a time:

* **fit, no copy**: a client-fed ``fit`` of ``--steps`` batches of 32 rows
  on a trainer made with ``sync_model=False``;
* **the copy**: ``trainer.sync_model()`` right after it, which is exactly what
  a trainer with the default ``sync_model=True`` does at the end of a call
  (rank 0's tensors sent as frames straight from its worker, loaded in place);
* **fit with the copy**: the same fit on a trainer made with the default;
* **step with the copy**: one ``trainer.step`` (the worst case: a copy a step);
* **state_dict()**: ``trainer.state_dict()``: the same read, then deep-copied on the
  client (a snapshot).  Before issue 44 it was cloned on the worker and gathered through
  the scheduler in 1 s slices, which a loaded machine or a big model never finished
  ("state_dict results were lost"); ``nan`` where it fails.

It never asserts on a timing.

    python benchmarks/bench_model_sync.py            # a few minutes on 2 cores, ~4 GB of memory
    python benchmarks/bench_model_sync.py --sizes 100 --steps 4   # one size
    python benchmarks/bench_model_sync.py --quick    # a smoke test (1 M parameters)
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import labkit as lk  # noqa: E402

SIZES = {"full": dict(params=(10**6, 10**7, 10**8), rounds=3, warm=True),
         "quick": dict(params=(10**6,), rounds=1, warm=False)}   # a smoke test: no warm-up fit
ROWS = 32  # a batch


def mlp(params: int) -> nn.Module:
    """``1000 -> H -> 10`` with about ``params`` parameters."""
    hidden = max(1, round(params / 1011))
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(1000, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def batches(steps: int) -> list:
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(ROWS, 1000, generator=g), torch.randint(0, 10, (ROWS,), generator=g))
            for _ in range(steps)]


def trainer(scheduler, params: int, sync: bool):
    model = mlp(params)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return lk.DataParallelTrainer(model, nn.functional.cross_entropy, opt, scheduler=scheduler,
                                  sync_model=sync)


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def timed_or_nan(fn) -> float:
    """``timed(fn)``, or NaN where it failed (the old path gives up on a slow gather)."""
    try:
        return timed(fn)
    except lk.LabkitError as exc:
        print(f"  ({type(exc).__name__}: {exc})", flush=True)
        return float("nan")


def measure(scheduler, params: int, steps: int, rounds: int, warm: bool = True) -> dict:
    """Medians of each figure over ``rounds`` rounds, one trainer at a time (memory)."""
    data = batches(steps)
    figures: dict = {k: [] for k in ("fit", "copy", "fit_sync", "step_sync", "state_dict")}
    for sync in (False, True):
        t = trainer(scheduler, params, sync)
        try:
            if warm:
                t.fit(data[:2])  # warm: the replicas' buffers, the first plan
            for _ in range(rounds):
                if sync:
                    figures["fit_sync"].append(timed(lambda: t.fit(data)))  # noqa: B023
                    figures["step_sync"].append(timed(lambda: t.step(*data[0])))  # noqa: B023
                    continue
                figures["fit"].append(timed(lambda: t.fit(data)))  # noqa: B023
                figures["copy"].append(timed(t.sync_model))
                figures["state_dict"].append(timed_or_nan(t.state_dict))
        finally:
            t.close()
    return {k: statistics.median(v) if v else float("nan") for k, v in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test of small sizes")
    parser.add_argument("--steps", type=int, default=10, help="batches of a fit")
    parser.add_argument("--sizes", type=float, nargs="*", help="parameters, in millions")
    args = parser.parse_args()
    size = SIZES["quick" if args.quick else "full"]
    steps = 3 if args.quick else args.steps
    print(f"labkit {lk.__version__}, torch {torch.__version__}, Python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs; 2 worker processes; fits of {steps} batches of {ROWS} rows; "
          f"medians of {size['rounds']} rounds")
    header = (f"{'parameters':>11} | {'fit, no copy':>12} | {'the copy':>9} | {'copy / fit':>10} | "
              f"{'fit + copy':>10} | {'step + copy':>11} | {'state_dict()':>12}")
    print(header)
    print("-" * len(header))
    with lk.DaskScheduler(mode="processes", n_workers=2, threads_per_worker=1) as scheduler:
        for params in [int(m * 1e6) for m in args.sizes] if args.sizes else size["params"]:
            f = measure(scheduler, params, steps, size["rounds"], size["warm"])
            print(f"{params / 1e6:>9.0f} M | {f['fit']:>10.3f} s | {f['copy']:>7.3f} s | "
                  f"{f['copy'] / f['fit']:>10.2f} | {f['fit_sync']:>8.3f} s | "
                  f"{f['step_sync']:>9.3f} s | {f['state_dict']:>10.3f} s", flush=True)
    print("the copy: trainer.sync_model() after a fit on a trainer with sync_model=False, what "
          "the default adds to every call; state_dict(): the same read, deep-copied")


if __name__ == "__main__":
    main()
