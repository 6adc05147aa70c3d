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
3. **Bucketing.**  A recurrent classifier (an RNN cell unrolled over the
   steps, padding masked) on sequences of uniform length in 5..100, batches
   from ``lk.bucket_batches`` with buckets every 10 steps, trained with
   ``bucket_model``, against the same trainer on batches padded to the longest
   bucket (one bucket of 100).  Target at least 1.5x samples/s.
4. **Bucketed trainer on one device** against a plain torch loop doing the
   same bucketed steps (one unrolled module per key, built once, around the
   same parameters).  Target at least 0.97.

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
from labkit.data_parallel.bucketing import bucket_batches

SIZES = {"full": dict(width=512, batch=256, steps=150, reps=5, slow_steps=40, per_row=2e-4,
                     sequences=2048, hidden=64, seq_batch=64),
         "quick": dict(width=64, batch=64, steps=20, reps=1, slow_steps=10, per_row=2e-4,
                       sequences=128, hidden=16, seq_batch=32)}
TARGET_ONE = 0.97
TARGET_ONE_GPU = 0.95
TARGET_AUTO = 1.3
TARGET_BUCKETS = 1.5
TARGET_BUCKET_TRAINER = 0.97
BUCKETS = list(range(10, 101, 10))


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


class Recurrent(torch.nn.Module):
    """Embedding, an RNN cell and a linear head: the parameters every bucket shares."""

    def __init__(self, hidden: int):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(21, hidden, padding_idx=0)
        self.cell = torch.nn.RNNCell(hidden, hidden)
        self.head = torch.nn.Linear(hidden, 4)


class Unrolled(torch.nn.Module):
    """The network of one bucket: the cell unrolled over ``steps`` steps, padding masked."""

    def __init__(self, model: Recurrent, steps: int):
        super().__init__()
        self.model, self.steps = model, steps

    def forward(self, x):
        m, e = self.model, self.model.embed(x)
        h = e.new_zeros(len(x), m.cell.hidden_size)
        for t in range(self.steps):
            h = torch.where((x[:, t] > 0)[:, None], m.cell(e[:, t], h), h)
        return m.head(h)


def sequence_data(size: dict, buckets: list[int]):
    """Batches of sequences of uniform length in 5..100 (tokens 1..20), padded by bucket."""
    g = torch.Generator().manual_seed(2)
    lengths = torch.randint(5, 101, (size["sequences"],), generator=g)
    seqs = [torch.randint(1, 21, (int(n),), generator=g) for n in lengths]
    labels = torch.tensor([int(s[0]) % 4 for s in seqs])
    return list(bucket_batches(seqs, labels, buckets, size["seq_batch"], shuffle=True, seed=0))


def bucketed_trainer(model, data) -> float:
    """One pass of ``data`` through a one-device trainer with ``bucket_model``; seconds."""
    trainer = DataParallelTrainer(model, torch.nn.functional.cross_entropy,
                                  torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
                                  devices=["cpu"], bucket_model=Unrolled)
    start = time.perf_counter()
    for b in data:
        trainer.step(b.x, b.y, bucket_key=b.key)
    seconds = time.perf_counter() - start
    trainer.close()
    return seconds


def bucketed_plain(model, data) -> float:
    """The same bucketed steps in a plain torch loop (modules built once per key); seconds."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    modules: dict = {}
    start = time.perf_counter()
    for b in data:
        module = modules.get(b.key)
        if module is None:
            module = modules[b.key] = Unrolled(model, b.key)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(module(b.x), b.y)
        loss.backward()
        opt.step()
        loss.item()
    return time.perf_counter() - start


def compare(size: dict, runs: dict) -> dict:
    """Median seconds of each of ``runs`` (name: (fn, data)), alternating their order."""
    times = {name: [] for name in runs}
    base = Recurrent(size["hidden"])
    for rep in range(size["reps"] + 1):
        for name in (list(runs) if rep % 2 else list(runs)[::-1]):
            fn, data = runs[name]
            t = fn(copy.deepcopy(base), data)
            if rep:  # the first repetition warms up
                times[name].append(t)
    return {name: statistics.median(t) for name, t in times.items()}


def bench_buckets(size: dict) -> None:
    bucketed, padded = sequence_data(size, BUCKETS), sequence_data(size, [max(BUCKETS)])
    t = compare(size, {"padded": (bucketed_trainer, padded),
                       "bucketed": (bucketed_trainer, bucketed)})
    rows = size["sequences"]
    steps = sum(len(b) * b.key for b in bucketed) / rows
    print(f"3. bucketing: RNN cell (hidden {size['hidden']}) unrolled, {rows} sequences of "
          f"5..100 steps, batches of {size['seq_batch']}, one device")
    print(f"   padded to {max(BUCKETS)}      : {rows / t['padded']:8,.0f} samples/s "
          f"({t['padded']:.3f} s, {max(BUCKETS)} steps a sequence)")
    print(f"   buckets {BUCKETS[0]}..{BUCKETS[-1]}  : {rows / t['bucketed']:8,.0f} samples/s "
          f"({t['bucketed']:.3f} s, {steps:.1f} steps a sequence)")
    print(f"   bucketed / padded (samples/s): {t['padded'] / t['bucketed']:.2f}x  "
          f"(target >= {TARGET_BUCKETS})")


def bench_bucket_trainer(size: dict) -> None:
    data = sequence_data(size, BUCKETS)
    t = compare(size, {"plain": (bucketed_plain, data), "trainer": (bucketed_trainer, data)})
    rows = size["sequences"]
    print(f"4. bucketed steps on one device, {len(data)} steps over {len(BUCKETS)} buckets")
    print(f"   plain torch loop      : {rows / t['plain']:8,.0f} samples/s ({t['plain']:.3f} s)")
    print(f"   DataParallelTrainer   : {rows / t['trainer']:8,.0f} samples/s "
          f"({t['trainer']:.3f} s)")
    print(f"   bucketed trainer / plain (samples/s): {t['plain'] / t['trainer']:.3f}  "
          f"(target >= {TARGET_BUCKET_TRAINER})")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke test")
    parser.add_argument("--device", default="cpu", help="device of benchmark 1")
    parser.add_argument("--only", type=int, nargs="*", help="run only these benchmarks")
    args = parser.parse_args(argv)
    size = SIZES["quick" if args.quick else "full"]
    if args.quick:
        # a smoke test on a busy machine: two intra-op threads on these tiny ops spend most of
        # their CPU waiting on each other (14 s of CPU for the quick run against 4 s on one)
        torch.set_num_threads(1)
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} torch threads, {platform.machine()}")
    if not args.only or 1 in args.only:
        bench_one_device(size, args.device)
    if not args.only or 2 in args.only:
        bench_auto(size)
    if not args.only or 3 in args.only:
        bench_buckets(size)
    if not args.only or 4 in args.only:
        bench_bucket_trainer(size)


if __name__ == "__main__":
    main()
