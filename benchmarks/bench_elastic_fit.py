"""A fit on Dask arrays across retirements: does it finish and learn as uninterrupted fits do?

Run ``python benchmarks/bench_elastic_fit.py`` (a few minutes on 2 cores) or ``--quick``
(a smoke test: 4 epochs, its two fits on one cluster).  It prints losses and times and never
asserts.

A ``DataParallelTrainer`` (an MLP 8-16-1, MSE, SGD) fits 3000 rows of a Dask array held
on ``lk.DaskScheduler(mode="processes", n_workers=4)``, in global batches of 100 (30 steps
an epoch), 30 epochs, a commit every 5 steps:

1. **Uninterrupted**: ``--runs`` fits (shuffle seeds 0, 1, ...), each on a fresh cluster of 4.
2. **Retired**: the fit with seed 0, and ``client.retire_workers`` of one rank's worker in
   epoch 8 and another's in epoch 18 (the cluster goes 4 -> 3 -> 2 workers; the trainer's
   in-fit recovery goes on over the ranks left, from the last commit).
3. **Retired and joined**: the same, and ``cluster.scale`` one worker up in epochs 12 and
   22 (4 -> 3 -> 4 -> 3 -> 4): the fit takes each new worker in at its next epoch.

For each: the final loss over every row, the wall time, and for the retired fit its
recoveries (moved: nothing counted against ``max_failures``).  Target (issue 47): the
retired fit's final loss within the spread (min..max) of the uninterrupted ones.  With
seed 0 on both sides the retired fit trains every row once an epoch in the same order,
only split over fewer ranks after each retirement: it differs from seed 0's uninterrupted
fit by rounding (the gradients are summed over other groupings of the same rows).
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import time

import numpy as np
import torch
from torch import nn

import labkit as lk
from labkit.data_parallel import DataParallelTrainer

ROWS, BATCH, EVERY = 3000, 100, 5


def data():
    """The rows (numpy): ``y = sin(x @ w)`` plus a little noise."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((ROWS, 8))
    y = np.sin(x @ rng.standard_normal((8, 1))) + 0.05 * rng.standard_normal((ROWS, 1))
    return x, y


def model():
    """The MLP, from a generator of its own (the same start in every fit)."""
    net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)).double()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.3)
    return net


def final_loss(net, x, y) -> float:
    """MSE over every row, on the client."""
    with torch.no_grad():
        return float(nn.functional.mse_loss(net(torch.from_numpy(x)), torch.from_numpy(y)))


def cluster(shared=None):
    """A fresh cluster of 4 worker processes, or ``shared`` (the quick run's one) left open."""
    if shared is not None:
        return contextlib.nullcontext(shared)
    return lk.DaskScheduler(mode="processes", n_workers=4, threads_per_worker=1)


def fit(
    x, y, epochs: int, seed: int, retire_at: tuple = (), join_at: tuple = (), shared=None
) -> dict:
    """One fit on a fresh cluster of 4 (or on ``shared``); ``retire_at``/``join_at``: epochs
    (from 1) in which a worker retires, or one joins."""
    import dask.array as da

    with cluster(shared) as s:
        X, Y = da.from_array(x, chunks=(ROWS // 4, 8)), da.from_array(y, chunks=(ROWS // 4, 1))
        net = model()
        trainer = DataParallelTrainer(
            net, nn.functional.mse_loss, torch.optim.SGD(net.parameters(), lr=0.05), scheduler=s
        )
        done: list = []  # rows trained, a step's at a time
        trainer.subscribe(
            lambda e: done.append(e.n_samples) if type(e).__name__ == "TaskFinished" else None
        )
        retired: list = []

        def retire() -> None:
            for epoch in sorted(retire_at + join_at):
                while sum(done) < (epoch - 0.5) * ROWS:  # the middle of that epoch
                    time.sleep(0.005)
                if epoch in join_at:  # the retired workers stay in the cluster's spec
                    now = len(s.client.nthreads())
                    s.cluster.scale(len(s.cluster.worker_spec) + 1)
                    s.client.wait_for_workers(now + 1, timeout=120)
                    continue
                leaving = trainer.names[-1]
                retired.append(leaving)
                s.client.retire_workers([leaving])

        retirer = threading.Thread(target=retire, daemon=True)
        retirer.start()
        start = time.perf_counter()
        try:
            history = trainer.fit(
                (X, Y),
                batch_size=BATCH,
                epochs=epochs,
                seed=seed,
                commit_every=EVERY,
                max_failures=0,
            )
        finally:
            retirer.join(60)
            trainer.close()
        seconds = time.perf_counter() - start
        workers_after = len(s.client.nthreads())
    recoveries = [r for h in history for r in h.get("recoveries", [])]
    joined = [j for h in history for j in h.get("joined", [])]
    return {
        "joined": joined,
        "loss": final_loss(net, x, y),
        "seconds": seconds,
        "recoveries": recoveries,
        "retired": retired,
        "workers_after": workers_after,
        "epochs": len(history),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test: 4 epochs, 1 run")
    parser.add_argument("--runs", type=int, default=3, help="uninterrupted fits (seeds 0..)")
    args = parser.parse_args()
    epochs, runs = (4, 1) if args.quick else (30, args.runs)
    retire_at = (2,) if args.quick else (8, 18)
    join_at = (3,) if args.quick else (12, 22)
    x, y = data()
    print(
        f"fit of {ROWS} rows x {epochs} epochs, batches of {BATCH}, commit every {EVERY}; "
        f"4 worker processes; first loss {final_loss(model(), x, y):.6f}"
    )
    with contextlib.ExitStack() as stack:
        # the smoke test's two fits share one cluster (the retiring one last); the full run's
        # each start on a fresh one
        shared = stack.enter_context(cluster()) if args.quick else None
        plain = []
        for seed in range(runs):
            r = fit(x, y, epochs, seed, shared=shared)
            plain.append(r)
            print(f"  uninterrupted seed {seed}: final loss {r['loss']:.6f}  {r['seconds']:.1f} s")
        r = fit(x, y, epochs, 0, retire_at, shared=shared)
    # the quick fit ends before a worker starts: joining is timed in the full run alone
    both = None if args.quick else fit(x, y, epochs, 0, retire_at, join_at)
    print(
        f"  retired in epochs {retire_at} (seed 0): final loss {r['loss']:.6f}  "
        f"{r['seconds']:.1f} s, {r['epochs']} epochs, {r['workers_after']} workers after"
    )
    for rec in r["recoveries"]:
        print(
            f"    recovery: epoch {rec['epoch']} batch {rec['batch']} -> from batch "
            f"{rec['resumed_from']}, redone {rec['redone']}, {rec['ranks']} ranks, "
            f"moved={rec['moved']}, {rec['seconds']} s"
        )
    losses = [p["loss"] for p in plain]
    inside = min(losses) - 1e-9 <= r["loss"] <= max(losses) + 1e-9
    print(
        f"uninterrupted spread {min(losses):.6f} .. {max(losses):.6f}; retired "
        f"{r['loss']:.6f}: {'within' if inside else 'OUTSIDE'} the spread; "
        f"|retired - seed 0| = {abs(r['loss'] - losses[0]):.2e}; "
        f"time retired / uninterrupted seed 0 = {r['seconds'] / plain[0]['seconds']:.2f}x"
    )
    if both is None:
        return
    print(
        f"  retired in epochs {retire_at}, joined in {join_at} (seed 0): final loss "
        f"{both['loss']:.6f}  {both['seconds']:.1f} s, {both['epochs']} epochs, "
        f"{both['workers_after']} workers after"
    )
    for j in both["joined"]:
        print(f"    joined: epoch {j['epoch']}, {j['ranks']} ranks, {j['seconds']} s")
    print(
        f"retired and joined {both['loss']:.6f}: |joined - seed 0| = "
        f"{abs(both['loss'] - losses[0]):.2e}; time joined / uninterrupted seed 0 = "
        f"{both['seconds'] / plain[0]['seconds']:.2f}x"
    )


if __name__ == "__main__":
    main()
