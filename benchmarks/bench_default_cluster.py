"""Which replicas suit the default cluster: the notebooks' model on threads and on processes.

Run ``python benchmarks/bench_default_cluster.py`` (a few seconds a row) or
``--quick``.  It prints samples/s and never asserts on timings.  The model and
data of ``notebooks/02-data-parallel-torch.ipynb`` (MLP 64-128-10 on the
1,400 training digits, 100 rows a batch, Adam), six epochs a fit, timed as a
whole ``fit`` call after one untimed epoch, the trainer's set-up timed apart:

* **thread replicas**: ``DataParallelTrainer(..., scheduler=lk.DaskScheduler())``,
  one replica per thread of the in-process worker (what the default cluster
  trains on since issue 38), and ``mode="threads"``;
* **one replica**: ``devices=["cpu"]``, torch's own threads;
* **worker processes**: ``lk.DaskScheduler(mode="processes", n_workers=2)``,
  one ``torch.distributed`` rank a worker, the data on the workers and fed.

Each kind of data the trainer takes is tried: batches, ``(X, y)`` numpy arrays
and Dask arrays.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

import torch

EPOCHS = {"full": 6, "quick": 1}


def digits():
    from sklearn.datasets import load_digits
    d = load_digits()
    x = torch.tensor(d.data / 16.0, dtype=torch.float32)[:1400]
    y = torch.tensor(d.target)[:1400]
    return x, y


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                               torch.nn.Linear(128, 10))


def trial(label, scheduler, devices, data, epochs, rounds, warm=True, **fit):
    """Set-up seconds and the median samples/s of whole fit calls (after a warm-up fit)."""
    import labkit as lk
    started = time.perf_counter()
    m = model()
    trainer = lk.DataParallelTrainer(m, torch.nn.functional.cross_entropy,
                                     torch.optim.Adam(m.parameters(), lr=3e-3),
                                     scheduler=scheduler, devices=devices)
    setup = time.perf_counter() - started
    try:
        if warm:
            trainer.fit(data, epochs=1, **fit)
        rates = []
        for _ in range(rounds):
            started = time.perf_counter()
            history = trainer.fit(data, epochs=epochs, **fit)
            rows = sum(h["samples_per_s"] * h["seconds"] for h in history)
            rates.append(rows / (time.perf_counter() - started))
        names = trainer.names
    finally:
        trainer.close()
    rate = statistics.median(rates)
    print(f"  {label:52s} {rate:10,.0f} samples/s   set-up {setup:5.2f} s   ({', '.join(names)})",
          flush=True)
    return rate


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test")
    args = parser.parse_args(argv)
    epochs, rounds = EPOCHS["quick" if args.quick else "full"], 1 if args.quick else 3
    warm = not args.quick   # the warm-up fit only steadies the full run's figures
    import dask.array as da
    import labkit as lk
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, torch {torch.__version__}")
    x, y = digits()
    batches = [(x[i:i + 100], y[i:i + 100]) for i in range(0, 1400, 100)]
    arrays = (x.numpy(), y.numpy())
    dask_arrays = (da.from_array(arrays[0], chunks=(350, 64)), da.from_array(arrays[1], chunks=350))
    kinds = [("batches", batches, {}), ("numpy (x, y)", arrays, dict(batch_size=100, seed=0)),
             ("Dask arrays (X, Y)", dask_arrays, dict(batch_size=100, seed=0))]
    print(f"\nnotebook 02's MLP 64-128-10, 100 rows a batch, {epochs}-epoch fits "
          "(samples/s of whole calls):")
    for mode in ("auto", "threads"):
        with lk.DaskScheduler(mode=mode) as s:
            for name, data, fit in kinds:
                trial(f"thread replicas, mode={mode!r}, {name}", s, None, data, epochs, rounds,
                      warm, **fit)
    with lk.DaskScheduler() as s:
        trial("one replica (devices=['cpu']), batches", s, ["cpu"], batches, epochs, rounds,
              warm)
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        for name, data, fit in kinds:
            trial(f"worker processes (2 ranks), {name}", s, None, data, epochs, rounds, warm,
                  **fit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
