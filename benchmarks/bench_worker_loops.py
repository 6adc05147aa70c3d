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

SIZES = {"full": dict(rounds=7, steps=(100, 400)),
         "quick": dict(rounds=1, steps=(10, 20))}
MODELS = [("MLP 784-256-256-10", 256, 256), ("MLP 784-1024-1024-10", 1024, 512)]
TARGET_ON_WORKERS = 0.975  # a fit with data on the workers, against DDP's whole call
TARGET_FED = 0.975  # the same fit fed from the client
LABKIT_KINDS = ("labkit, data on workers", "labkit, fed from the client")

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


def _ddp_rank(rank, width, batch, rows, path, conn):
    """A DDP rank that stays up between fits, as labkit's workers do: it holds its half of
    the rows and runs one fit for each ``steps`` its pipe sends (None ends it)."""
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + path, rank=rank, world_size=2)
    model = torch.nn.parallel.DistributedDataParallel(mlp(width))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = data(rows)
    x, y = x[rank * rows // 2:(rank + 1) * rows // 2], y[rank * rows // 2:(rank + 1) * rows // 2]
    half, g = batch // 2, torch.Generator().manual_seed(rank)
    while (steps := conn.recv()) is not None:
        # every row once an epoch, shuffled, each rank taking its share of a step from the
        # rows it holds (index_select, as a labkit rank takes its rows)
        order = torch.randperm(len(x), generator=g)
        dist.barrier()
        started = time.perf_counter()
        for i in range(steps):
            rows_i = order[i * half:(i + 1) * half]
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(x.index_select(0, rows_i)),
                                                     y.index_select(0, rows_i))
            loss.backward()
            opt.step()
            loss.item()
        conn.send(time.perf_counter() - started)
    dist.destroy_process_group()


class DDPPool:
    """Two DDP ranks (spawned, gloo on 127.0.0.1, 1 torch thread each) kept up between fits.

    :meth:`fit` times a whole call as :func:`labkit_fit` does: from the command sent to
    both ranks until both answered, with the steps in between; ``steps_only`` is rank 0's
    own loop (what the benchmark timed before issue 44).
    """

    def __init__(self, width: int, batch: int, rows: int):
        ctx = mp.get_context("spawn")
        self.path = tempfile.mktemp(prefix="labkit-bench-ddp-")
        self.batch, self.pipes, self.ranks = batch, [], []
        for r in range(2):
            mine, theirs = ctx.Pipe()
            p = ctx.Process(target=_ddp_rank, args=(r, width, batch, rows, self.path, theirs))
            p.start()
            self.pipes.append(mine)
            self.ranks.append(p)
        self.steps_only: float | None = None

    def fit(self, steps: int) -> float:
        """Samples/s of one whole fit of ``steps`` steps."""
        started = time.perf_counter()
        for pipe in self.pipes:
            pipe.send(steps)
        loops = [pipe.recv() for pipe in self.pipes]
        seconds = time.perf_counter() - started
        self.steps_only = steps * self.batch / loops[0]
        return steps * self.batch / seconds

    def close(self) -> None:
        for pipe in self.pipes:
            pipe.send(None)
        for p in self.ranks:
            p.join()
        if os.path.exists(self.path):
            os.unlink(self.path)


class LabkitFits:
    """A trainer on ``scheduler`` whose :meth:`fit` times one whole ``fit`` call.

    Built, and one fit done untimed, before the first timed call: the replicas warm,
    as after a notebook's first fit (the DDP ranks get the same, see :class:`DDPPool`).
    """

    def __init__(self, scheduler, width: int, batch: int, steps: int, on_workers: bool):
        import dask.array as da
        import labkit as lk
        model = mlp(width)
        self.trainer = lk.DataParallelTrainer(model, torch.nn.functional.cross_entropy,
                                              torch.optim.SGD(model.parameters(), lr=0.01),
                                              scheduler=scheduler)
        self.batch, self.steps = batch, steps
        x, y = data(batch * steps)
        if on_workers:
            X = da.from_array(x.numpy(), chunks=(len(x) // 2, 784))
            Y = da.from_array(y.numpy(), chunks=len(y) // 2)
            X, Y = scheduler.client.persist([X, Y])
            self._fit = lambda: self.trainer.fit((X, Y), batch_size=batch)
        else:
            batches = [(x[i * batch:(i + 1) * batch], y[i * batch:(i + 1) * batch])
                       for i in range(steps)]
            self._fit = lambda: self.trainer.fit(batches)
        self._fit()

    def fit(self) -> float:
        """Samples/s of one whole ``fit`` call."""
        started = time.perf_counter()
        history = self._fit()
        seconds = time.perf_counter() - started
        assert history[0]["steps"] == self.steps, history
        return self.steps * self.batch / seconds

    def close(self) -> None:
        self.trainer.close()


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


def one_row(s, rounds: int, name: str, width: int, batch: int, steps: int) -> dict:
    """Interleaved rounds of every kind on one model and fit length: medians, printed."""
    ddp_pool = DDPPool(width, batch, batch * steps)
    fits = {kind: LabkitFits(s, width, batch, steps, on_workers="workers" in kind)
            for kind in LABKIT_KINDS}
    ddp_pool.fit(steps)  # warm, as the labkit trainers are
    runs: dict = {"plain": [], "DDP": [], "DDP, its steps only": [],
                  **{kind: [] for kind in LABKIT_KINDS}}
    try:
        for r in range(rounds):
            order = ["plain", "DDP", *LABKIT_KINDS]
            for kind in order[r % len(order):] + order[:r % len(order)]:
                if kind == "plain":
                    runs[kind].append(plain(width, batch, steps))
                elif kind == "DDP":
                    runs[kind].append(ddp_pool.fit(steps))
                    runs["DDP, its steps only"].append(ddp_pool.steps_only)
                else:
                    runs[kind].append(fits[kind].fit())
    finally:
        ddp_pool.close()
        for f in fits.values():
            f.close()
    medians = {k: statistics.median(v) for k, v in runs.items()}
    print(f"\n{name}, {batch} rows a batch, a {steps}-step fit (samples/s of whole calls: "
          f"median [min-max] of {rounds} interleaved rounds; ratio: median of the rounds' "
          "ratios to DDP's call in the same round):")
    for kind, values in runs.items():
        paired = statistics.median(v / d for v, d in zip(values, runs["DDP"], strict=True))
        print(f"  {kind:28s} {medians[kind]:10,.0f} [{min(values):,.0f}-{max(values):,.0f}]"
              f"  {paired:.3f}x DDP")
    print(f"  targets: data on workers >= {TARGET_ON_WORKERS}x DDP, fed from the client >= "
          f"{TARGET_FED}x DDP")
    return medians


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test")
    parser.add_argument("--rounds", type=int, help="interleaved rounds a row (7 by default)")
    parser.add_argument("--steps", type=int, nargs="+", help="fit lengths of the small MLP")
    parser.add_argument("--small-only", action="store_true", help="only the small MLP")
    parser.add_argument("--no-recovery", action="store_true", help="skip the kill at the end")
    args = parser.parse_args(argv)
    size = dict(SIZES["quick" if args.quick else "full"])
    size.update({k: v for k, v in (("rounds", args.rounds), ("steps", args.steps)) if v})
    import labkit as lk
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, torch {torch.__version__}")
    results = {}
    rows = [(name, width, batch, steps) for name, width, batch in MODELS
            for steps in (size["steps"] if width == 256 else size["steps"][:1])
            if width == 256 or not args.small_only]
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        for name, width, batch, steps in rows:
            results[(name, steps)] = one_row(s, size["rounds"], name, width, batch, steps)
    if args.no_recovery:
        return 0
    seconds, record = recovery(size)
    print(f"\nA worker SIGKILLed mid-fit on 3 workers: next step {seconds:.2f} s after the kill; "
          f"{record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
