"""Data-parallel training on Dask workers against torch DDP, side by side in one command.

Run ``python benchmarks/bench_worker_loops.py`` (full size, a few minutes on
2 cores) or ``--quick`` (a smoke test).  It prints samples/s and ratios and
never asserts on timings.  Per model (MLP 784-256-256-10 at 256 rows a batch,
MLP 784-1024-1024-10 at 512), in alternating rounds (medians of 3):

* **plain**: one process, torch on 2 threads, a step per batch;
* **DDP**: ``torch.nn.parallel.DistributedDataParallel`` on 2 processes
  (``torch.multiprocessing`` spawn, gloo on 127.0.0.1, 1 torch thread each),
  each rank holding its half of every batch already;
* **labkit, data on the workers**: ``DataParallelTrainer`` on
  ``lk.DaskScheduler(mode="processes", n_workers=2)``,
  ``fit((X, y), batch_size=B)`` with X and y Dask arrays persisted on the
  workers (every row once an epoch, shuffled);
* **labkit, fed from the client**: the same trainer, ``fit(batches)`` over a
  list of ``(x, y)`` batches in the client.

Every figure is a whole call, as a user times it: DDP from its first step after
set-up (its processes started, its group formed, 5 steps warmed up), labkit
from the ``fit`` call to its return (the trainer built and one fit done before,
as in a notebook's second cell): a fit's fixed start-up (the plan shipped, the
ranks' tasks started, the first and last reports) counts, as it does for the
user.  Rows: the small MLP at 100 and 400 steps a fit, the large one at 100.
Then, on a 3-worker cluster: a worker SIGKILLed mid-fit, and the seconds from
the kill to the next completed step.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import statistics
import sys
import tempfile
import threading
import time

import torch
import torch.multiprocessing as mp

SIZES = {"full": dict(rounds=3, steps=(100, 400)),
         "quick": dict(rounds=1, steps=(10, 20))}
MODELS = [("MLP 784-256-256-10", 256, 256), ("MLP 784-1024-1024-10", 1024, 512)]
TARGET_ON_WORKERS = 0.95  # a 100-step fit, data on the workers, against DDP
TARGET_FED = 0.85  # the same fit fed from the client

def mlp(width: int, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(784, width), torch.nn.ReLU(),
                               torch.nn.Linear(width, width), torch.nn.ReLU(),
                               torch.nn.Linear(width, 10))


def data(rows: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, 784, generator=g), torch.randint(0, 10, (rows,), generator=g)


def plain(width: int, batch: int, steps: int) -> float:
    torch.set_num_threads(2)
    model = mlp(width)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = data(batch * 8)
    batches = [(x[i * batch:(i + 1) * batch], y[i * batch:(i + 1) * batch]) for i in range(8)]

    def step(i):
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(batches[i % 8][0]), batches[i % 8][1]).backward()
        opt.step()
    for i in range(5):
        step(i)
    started = time.perf_counter()
    for i in range(steps):
        step(i)
    return steps * batch / (time.perf_counter() - started)


def _ddp_rank(rank, width, batch, steps, path, out):
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + path, rank=rank, world_size=2)
    model = torch.nn.parallel.DistributedDataParallel(mlp(width))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    half = batch // 2
    x, y = data(half * 8, seed=rank)
    shares = [(x[i * half:(i + 1) * half], y[i * half:(i + 1) * half]) for i in range(8)]

    def step(i):
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(shares[i % 8][0]), shares[i % 8][1]).backward()
        opt.step()
    for i in range(5):
        step(i)
    dist.barrier()
    started = time.perf_counter()
    for i in range(steps):
        step(i)
    if rank == 0:
        out.put(steps * batch / (time.perf_counter() - started))
    dist.destroy_process_group()


def ddp(width: int, batch: int, steps: int) -> float:
    ctx = mp.get_context("spawn")
    out, path = ctx.Queue(), tempfile.mktemp(prefix="labkit-bench-ddp-")
    ranks = [ctx.Process(target=_ddp_rank, args=(r, width, batch, steps, path, out))
             for r in range(2)]
    for p in ranks:
        p.start()
    value = out.get(timeout=600)
    for p in ranks:
        p.join()
    if os.path.exists(path):
        os.unlink(path)
    return value


def labkit_fit(scheduler, width: int, batch: int, steps: int, on_workers: bool):
    """Samples/s of one whole ``fit`` call of ``steps`` steps (after one untimed call)."""
    import dask.array as da
    import labkit as lk
    model = mlp(width)
    trainer = lk.DataParallelTrainer(model, torch.nn.functional.cross_entropy,
                                     torch.optim.SGD(model.parameters(), lr=0.01),
                                     scheduler=scheduler)
    try:
        x, y = data(batch * steps)
        if on_workers:
            X = da.from_array(x.numpy(), chunks=(len(x) // 2, 784))
            Y = da.from_array(y.numpy(), chunks=len(y) // 2)
            X, Y = scheduler.client.persist([X, Y])

            def fit():
                return trainer.fit((X, Y), batch_size=batch)
        else:
            batches = [(x[i * batch:(i + 1) * batch], y[i * batch:(i + 1) * batch])
                       for i in range(steps)]

            def fit():
                return trainer.fit(batches)
        fit()  # the replicas warm, as after a notebook's first fit
        started = time.perf_counter()
        history = fit()
        seconds = time.perf_counter() - started
    finally:
        trainer.close()
    assert history[0]["steps"] == steps, history
    return steps * batch / seconds


def recovery(size: dict) -> tuple[float, dict]:
    """Seconds from a worker's SIGKILL to the next completed step, on 3 workers."""
    import dask.array as da
    import labkit as lk
    with lk.DaskScheduler(mode="processes", n_workers=3) as s:
        model = mlp(256)
        trainer = lk.DataParallelTrainer(model, torch.nn.functional.cross_entropy,
                                         torch.optim.SGD(model.parameters(), lr=0.01),
                                         scheduler=s)
        x, y = data(256 * 60)
        X = da.from_array(x.numpy(), chunks=(2560, 784))
        Y = da.from_array(y.numpy(), chunks=2560)
        steps, killed = [], {}
        trainer.subscribe(lambda e: steps.append(time.time())
                          if type(e).__name__ == "TaskFinished" else None)
        pids = s.client.run(os.getpid)
        victim = trainer.names[1]

        def kill():
            while len(steps) < 60:
                time.sleep(0.01)
            killed["at"] = time.time()
            os.kill(pids[victim], signal.SIGKILL)
        threading.Thread(target=kill, daemon=True).start()
        history = trainer.fit((X, Y), batch_size=256, epochs=2, commit_every=10)
        trainer.close()
    after = [t for t in steps if t > killed["at"]]
    recoveries = [r for h in history for r in h.get("recoveries", [])]
    return (after[0] - killed["at"] if after else float("nan")), (recoveries[0] if recoveries
                                                                   else {})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test")
    args = parser.parse_args(argv)
    size = SIZES["quick" if args.quick else "full"]
    import labkit as lk
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, torch {torch.__version__}")
    results = {}
    rows = [(name, width, batch, steps) for name, width, batch in MODELS
            for steps in (size["steps"] if width == 256 else size["steps"][:1])]
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        for name, width, batch, steps in rows:
            runs = {"plain": [], "DDP": [], "labkit, data on workers": [],
                    "labkit, fed from the client": []}
            for r in range(size["rounds"]):
                order = list(runs)
                order = order[r % len(order):] + order[:r % len(order)]
                for kind in order:
                    if kind == "plain":
                        runs[kind].append(plain(width, batch, steps))
                    elif kind == "DDP":
                        runs[kind].append(ddp(width, batch, steps))
                    else:
                        runs[kind].append(labkit_fit(s, width, batch, steps,
                                                     on_workers="workers" in kind))
            medians = {k: statistics.median(v) for k, v in runs.items()}
            results[(name, steps)] = medians
            print(f"\n{name}, {batch} rows a batch, a {steps}-step fit (samples/s of whole "
                  f"calls, median of {size['rounds']}):")
            for kind, value in medians.items():
                print(f"  {kind:28s} {value:10,.0f}  {value / medians['DDP']:.2f}x DDP")
            print(f"  targets (a 100-step fit): data on workers >= {TARGET_ON_WORKERS}x DDP, "
                  f"fed from the client >= {TARGET_FED}x DDP")
    seconds, record = recovery(size)
    print(f"\nA worker SIGKILLed mid-fit on 3 workers: next step {seconds:.2f} s after the kill; "
          f"{record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
