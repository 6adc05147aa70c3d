"""Data-parallel torch: the trainer beside a plain loop, and "auto" beside an even split.

Run ``python benchmarks/bench_data_parallel.py`` (full size, about a minute on
2 cores) or ``--quick`` (a smoke test).  It prints timings and ratios; it
never asserts on timings.

1. **One device.**  ``DataParallelTrainer(devices=[device]).step`` against the
   plain loop (``zero_grad``, forward, loss, ``backward``, ``step``,
   ``loss.item()``) on the same MLP, optimizer and batches.  Ratio: trainer
   samples/s over plain samples/s, target at least 0.97 (0.95 on a GPU).
2. **Two devices, one twice as slow.**  Two CPU "devices" whose replicas
   sleep 1 and 2 time units a row before their forward (standing for a fast
   and a slow device; sleeping releases the CPU, so the two really overlap).
   ``work_load="auto"`` (after a warm-up of steps to converge) against the
   even split: speed-up target at least 1.3 (ideal 1.5).

``--device cuda:0`` runs benchmark 1 on a GPU.  Variants alternate their
order on each repetition; medians are compared.
"""

from __future__ import annotations

import argparse
import copy
import platform
import statistics
import sys
import time

import torch

from labkit.data_parallel import DataParallelTrainer

SIZES = {"full": dict(width=512, batch=256, steps=150, reps=5, slow_steps=40, per_row=2e-4),
         "quick": dict(width=64, batch=64, steps=20, reps=1, slow_steps=10, per_row=2e-4)}
TARGET_ONE = 0.97
TARGET_ONE_GPU = 0.95
TARGET_AUTO = 1.3


def mlp(width: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, width), torch.nn.ReLU(),
                               torch.nn.Linear(width, width), torch.nn.ReLU(),
                               torch.nn.Linear(width, 10))


def batches(n: int, rows: int, device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(rows, 64, generator=g).to(device),
             torch.randint(0, 10, (rows,), generator=g).to(device)) for _ in range(n)]


def plain_loop(model, data) -> float:
    """The baseline; returns seconds."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.functional.cross_entropy
    start = time.perf_counter()
    for x, y in data:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
    return time.perf_counter() - start


def trainer_loop(model, data, device) -> float:
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    trainer = DataParallelTrainer(model, torch.nn.functional.cross_entropy, opt,
                                  devices=[device])
    start = time.perf_counter()
    for x, y in data:
        trainer.step(x, y)
    seconds = time.perf_counter() - start
    trainer.close()
    return seconds


def bench_one_device(size: dict, device: str) -> None:
    data = batches(size["steps"], size["batch"], device)
    base = mlp(size["width"]).to(device)
    times = {"plain": [], "trainer": []}
    for rep in range(size["reps"] + 1):
        for name in (["plain", "trainer"] if rep % 2 else ["trainer", "plain"]):
            model = copy.deepcopy(base)
            t = plain_loop(model, data) if name == "plain" else trainer_loop(model, data, device)
            if rep:  # the first repetition warms up
                times[name].append(t)
    plain, lab = statistics.median(times["plain"]), statistics.median(times["trainer"])
    rows = size["steps"] * size["batch"]
    target = TARGET_ONE_GPU if device.startswith("cuda") else TARGET_ONE
    print(f"1. one device ({device}), MLP 64-{size['width']}-{size['width']}-10, "
          f"{size['steps']} steps of {size['batch']} rows")
    print(f"   plain torch loop      : {rows / plain:10,.0f} samples/s ({plain:.3f} s)")
    print(f"   DataParallelTrainer   : {rows / lab:10,.0f} samples/s ({lab:.3f} s)")
    print(f"   trainer / plain (samples/s): {plain / lab:.3f}  (target >= {target})")


class Sleepy(torch.nn.Module):
    """Sleeps ``per_row`` seconds a row, then runs the inner module."""

    def __init__(self, inner, per_row):
        super().__init__()
        self.inner, self.per_row = inner, per_row

    def forward(self, x):
        time.sleep(self.per_row * len(x))
        return self.inner(x)


def two_devices(size: dict, work_load) -> tuple[float, list[float]]:
    model = Sleepy(mlp(64), size["per_row"])
    trainer = DataParallelTrainer(model, torch.nn.functional.cross_entropy,
                                  torch.optim.SGD(model.parameters(), lr=0.01),
                                  devices=["cpu:0", "cpu:1"], work_load=work_load)
    trainer.replicas[1].per_row = 2 * size["per_row"]  # device 1: half the speed
    data = batches(size["slow_steps"], size["batch"], "cpu")
    if work_load == "auto":
        for x, y in data:  # warm-up: let the shares converge
            trainer.step(x, y)
    start = time.perf_counter()
    for x, y in data:
        trainer.step(x, y)
    seconds = time.perf_counter() - start
    shares = trainer.shares
    trainer.close()
    return seconds, shares


def bench_auto(size: dict) -> None:
    times, shares = {"even": [], "auto": []}, {}
    for rep in range(size["reps"]):
        for name in (["even", "auto"] if rep % 2 else ["auto", "even"]):
            t, shares[name] = two_devices(size, None if name == "even" else "auto")
            times[name].append(t)
    even, auto = statistics.median(times["even"]), statistics.median(times["auto"])
    rows = size["slow_steps"] * size["batch"]
    print(f"2. two CPU devices, device 1 twice as slow ({size['per_row'] * 1e3:.1f} and "
          f"{2 * size['per_row'] * 1e3:.1f} ms a row), {size['slow_steps']} steps of "
          f"{size['batch']} rows")
    print(f"   even split   : {rows / even:8,.0f} samples/s ({even:.3f} s)")
    print(f"   auto         : {rows / auto:8,.0f} samples/s ({auto:.3f} s), shares "
          f"{[round(s, 3) for s in shares['auto']]}")
    print(f"   auto / even (samples/s): {even / auto:.2f}x  (target >= {TARGET_AUTO}; ideal 1.5)")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke test")
    parser.add_argument("--device", default="cpu", help="device of benchmark 1")
    parser.add_argument("--only", type=int, nargs="*", help="run only these benchmarks")
    args = parser.parse_args(argv)
    size = SIZES["quick" if args.quick else "full"]
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} torch threads, {platform.machine()}")
    if not args.only or 1 in args.only:
        bench_one_device(size, args.device)
    if not args.only or 2 in args.only:
        bench_auto(size)


if __name__ == "__main__":
    main()
