"""ParallelFlow training on a cluster whose workers retire, against raw Dask's client.map.

Run ``python benchmarks/bench_elastic_flow.py`` (about three minutes on 2 cores) or
``--quick`` (a smoke test).  It prints times and exactness and never asserts.

One ``lk.DaskScheduler(mode="processes", n_workers=4, lifetime="15s",
lifetime_stagger="3.75s", lifetime_restart=True)`` (the lifetime cluster of
``bench_elastic.py --lifetimes``) serves both sides, interleaved round by round
(the order reversed every round), so that both meet the same retirements:

1. **labkit**: ``lk.ParallelFlow([PCA(output_dim=20)]).train`` on a Dask array whose
   ``n`` blocks are generated on the workers (each block: a sleep of ``pause`` s,
   then a seeded ``rows x dim`` normal chunk), ``join="auto"`` (and ``--join`` to pick).
2. **raw Dask**: ``client.map`` of the same ``n`` blocks (sleep, generate, moments:
   ``n, sum x, x.T @ x``), summed on the client as they complete.

Exactness: labkit's last ``NodeJoined`` counts every sample once (``state["samples"]
== n * rows``) and its eigenvalues equal those of the exact moments ("trained again":
chunks whose fork left with a retired worker, trained again after the phase); raw Dask's
results come back once per block (``n`` of them, each index once).  Worker
retirements ("Restarting worker" of the nannies) are counted by the workers that
left during each round.  Target (issue 47): labkit <= 1.1x raw Dask (median).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time

import numpy as np

import labkit as lk

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_elastic import WorkerCount  # noqa: E402

SEED = 20240601
OUTPUT_DIM = 20


def make_chunk(i: int, rows: int, dim: int, pause: float) -> np.ndarray:
    """Block ``i``: ``pause`` s of waiting, then seeded normal data with a graded spectrum."""
    time.sleep(pause)
    x = np.random.default_rng(SEED + i).standard_normal((rows, dim))
    x *= np.linspace(0.5, 2.0, dim)
    return x


def moments(x: np.ndarray):
    """What a raw Dask task returns for one block: (n, sum x, x.T @ x)."""
    return x.shape[0], x.sum(axis=0), x.T @ x


def block_moments(i: int, rows: int, dim: int, pause: float):
    """One raw Dask task: generate block ``i`` and return ``(i, moments)``."""
    return i, moments(make_chunk(i, rows, dim, pause))


def top_eigenvalues(n, total, outer) -> np.ndarray:
    """Leading covariance eigenvalues from the sums, computed as PCA does."""
    avg = total / n
    cov = (outer - np.outer(total, avg)) / (n - 1)
    return np.linalg.eigvalsh((cov + cov.T) / 2)[::-1][:OUTPUT_DIM]


def exact_eigenvalues(cfg) -> np.ndarray:
    """The eigenvalues of all blocks' moments, computed here without pauses."""
    n, total, outer = 0, 0.0, 0.0
    for i in range(cfg["n"]):
        bn, bsum, bouter = moments(make_chunk(i, cfg["rows"], cfg["dim"], 0.0))
        n, total, outer = n + bn, total + bsum, outer + bouter
    return top_eigenvalues(n, total, outer)


def worker_array(cfg):
    """The blocks as a Dask array generated on the workers."""
    import dask
    import dask.array as da

    blocks = [
        da.from_delayed(
            dask.delayed(make_chunk, pure=False)(i, cfg["rows"], cfg["dim"], cfg["pause"]),
            shape=(cfg["rows"], cfg["dim"]),
            dtype=np.float64,
        )
        for i in range(cfg["n"])
    ]
    return da.concatenate(blocks, axis=0)


class Joins:
    """The scheduler's ``NodeJoined`` events, and the tasks of the last ``PhaseFinished``
    (chunks trained again included) (thread-safe)."""

    def __init__(self):
        self.events: list = []
        self.n_tasks = 0
        self._lock = threading.Lock()

    def __call__(self, event) -> None:
        if isinstance(event, lk.events.NodeJoined):
            with self._lock:
                self.events.append(event)
        elif isinstance(event, lk.events.PhaseFinished) and event.ok:
            self.n_tasks = event.n_tasks

    def take(self) -> list:
        """The events since the last take."""
        with self._lock:
            out, self.events = self.events, []
        return out



def run_labkit(s, cfg, joins: Joins, exact) -> tuple[float, str]:
    """``ParallelFlow`` training on the worker array; its wall time and exactness."""
    from labkit.nodes.pca import PCA

    source = worker_array(cfg)
    flow = lk.ParallelFlow([PCA(output_dim=OUTPUT_DIM)])
    joins.take()
    start = time.perf_counter()
    flow.train([source], scheduler=s, join=cfg["join"], wait=False).result(timeout=600)
    wall = time.perf_counter() - start
    events = joins.take()
    samples = events[-1].state.get("samples") if events else None
    diff = float(np.max(np.abs(flow.nodes[0].d - exact)) / np.mean(np.abs(exact)))
    ok = samples == cfg["n"] * cfg["rows"] and diff < 1e-8
    again = joins.n_tasks - cfg["n"]
    return wall, (
        f"joins {len(events)} trained again {again} samples {samples} "
        f"eig rel diff {diff:.1e} exact {ok}"
    )


def run_raw(client, cfg, exact) -> tuple[float, str]:
    """``client.map`` of the same blocks, summed as they complete; wall time and exactness."""
    from distributed import as_completed

    start = time.perf_counter()
    futures = client.map(
        block_moments,
        range(cfg["n"]),
        rows=cfg["rows"],
        dim=cfg["dim"],
        pause=cfg["pause"],
        pure=False,
    )
    n, total, outer, seen = 0, 0.0, 0.0, []
    for future in as_completed(futures):
        i, (bn, bsum, bouter) = future.result()
        seen.append(i)
        n, total, outer = n + bn, total + bsum, outer + bouter
    wall = time.perf_counter() - start
    d = top_eigenvalues(n, total, outer)
    diff = float(np.max(np.abs(d - exact)) / np.mean(np.abs(exact)))
    ok = sorted(seen) == list(range(cfg["n"])) and diff < 1e-8
    return wall, f"results {len(seen)} distinct {len(set(seen))} eig rel diff {diff:.1e} exact {ok}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test: 2 rounds of 16 blocks")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each side (3)")
    parser.add_argument("--n", type=int, default=96, help="blocks a round (96)")
    parser.add_argument("--join", default="auto", choices=["auto", "client", "workers"])
    parser.add_argument("--no-lifetime", action="store_true", help="the same cluster, no lifetime")
    args = parser.parse_args()
    cfg = dict(n=args.n, rows=2000, dim=50, pause=0.5, join=args.join)
    rounds = args.rounds
    if args.quick:
        cfg["n"], rounds = 16, 2
    options = (
        {}
        if args.no_lifetime
        else dict(lifetime="15s", lifetime_stagger="3.75s", lifetime_restart=True)
    )
    print(
        f"4 worker processes, {options or 'no lifetime'}; {cfg['n']} blocks of "
        f"{cfg['rows']}x{cfg['dim']} after {cfg['pause']} s each; join={cfg['join']}; "
        f"{rounds} rounds a side, interleaved"
    )
    exact = exact_eigenvalues(cfg)
    times: dict[str, list[float]] = {"labkit": [], "raw": []}
    with lk.DaskScheduler(mode="processes", n_workers=4, **options) as s:
        s.client.wait_for_workers(4)
        joins = Joins()
        s.subscribe(joins)
        watch = WorkerCount(s.client)
        sides = {
            "labkit": lambda: run_labkit(s, cfg, joins, exact),
            "raw": lambda: run_raw(s.client, cfg, exact),
        }
        for r in range(rounds):
            for name in list(sides) if r % 2 == 0 else list(sides)[::-1]:
                before, at_start = set(watch.seen), set(watch.addresses)
                wall, note = sides[name]()
                left = len(((watch.seen - before) | at_start) - watch.addresses)
                times[name].append(wall)
                print(
                    f"round {r} {name:6s} wall {wall:6.1f} s  workers left {left}  {note}",
                    flush=True,
                )
        watch.close()
    lab, raw = statistics.median(times["labkit"]), statistics.median(times["raw"])
    print(f"labkit ParallelFlow median {lab:6.1f} s   raw client.map median {raw:6.1f} s")
    print(f"=> labkit / raw Dask (median wall): {lab / raw:.2f}x (target <= 1.1x)")


if __name__ == "__main__":
    main()
