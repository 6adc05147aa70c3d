"""Adaptive clusters and sweeps: does the cluster grow for a sweep as it does for raw Dask?

Run ``python benchmarks/bench_elastic.py`` (about two minutes on 2 cores) or
``--quick`` (a smoke test).  It prints times and worker counts and never asserts.

A ``LocalCluster(n_workers=1)`` of worker processes with ``adapt(minimum=1,
maximum=4)`` (Dask's defaults otherwise: a look each second, three looks
before a worker is taken away), a fresh one for each run:

1. **Raw Dask**: ``client.map`` of 16 tasks of 2 s (``time.sleep``), gathered.
2. **labkit**: ``lk.sweep`` of 16 trials of 2 s on ``lk.DaskScheduler(cluster=...)``.

For each: the wall time, the most workers seen (the cluster grew to), and the
seconds from the end of the work until the cluster is back at its minimum.
Target (issue 47): labkit <= 1.3x raw Dask's wall time, back at the minimum
within 30 s.  The ideal is 16 x 2 s / 4 workers = 8 s plus the workers' start.

3. **Lifetimes** (``--lifetimes``): ``lk.DaskScheduler(mode="processes",
   n_workers=4)`` with ``lifetime="15s", lifetime_stagger="3.75s",
   lifetime_restart=True`` against the same without lifetimes; a sweep of 64
   trials x 8 epochs x 0.5 s, a checkpoint each epoch, ``max_failures=1``.
   Failed trials, moves, and the wall-time ratio (target: 0 failed, <= 1.3x).
   What sets the floor: the work since a trial's last checkpoint plus a
   worker's restart.

4. **Groups** (``--groups``): the same lifetime cluster, a sweep of 16 group
   trials (``workers_per_trial=2``), each a ``DataParallelTrainer`` of a small
   MLP for 8 epochs (4 steps and 0.5 s a epoch), a checkpoint each epoch,
   ``max_failures=16`` (so that failures are counted, not raised), against the
   same sweep without lifetimes.  Counts, moves, attempts and the wall-time
   ratio (target: 0 failed).  What sets the floor: a restarted worker's start
   (its torch import included), the group's set-up on it, and the work since
   a trial's last checkpoint.

5. **dask-jobqueue** (``--jobqueue``): ``dask_jobqueue.local.LocalCluster(cores=1,
   processes=1, memory="1GiB", worker_extra_args=["--lifetime", "20s",
   "--lifetime-stagger", "4s"])`` with ``adapt(minimum_jobs=0, maximum_jobs=4)``,
   starting from 0 jobs; a sweep of 40 trials x 8 epochs x 0.5 s (a checkpoint
   each epoch) with ``early_stop=lk.ASHA(min_steps=1, reduction=2, max_steps=8)``,
   ``max_failures=40`` (counted, not raised).  Counts, moves, wall time, the jobs
   and workers over time, and the seconds until adapt ends every job (target:
   0 failed).
"""

from __future__ import annotations

import argparse
import threading
import time

import labkit as lk


def sleepy(seconds: float) -> float:
    """A task of ``seconds`` s."""
    time.sleep(seconds)
    return seconds


def sleepy_trial(config, trial):
    """A trial of ``config["seconds"]`` s."""
    time.sleep(float(config["seconds"]))
    trial.report(0, loss=config["x"])
    return {"loss": config["x"]}


class WorkerCount:
    """The workers of ``client``'s cluster, looked at every 0.1 s on a thread: the count now
    and the most seen, the addresses now and every address seen."""

    def __init__(self, client):
        self.client, self.most, self.now = client, 0, 0
        self.addresses: set = set()
        self.seen: set = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.1):
            try:
                self.addresses = set(self.client.nthreads())
            except Exception:  # the cluster closing
                return
            self.now = len(self.addresses)
            self.seen |= self.addresses
            self.most = max(self.most, self.now)

    def back_to(self, minimum: int, timeout: float) -> float:
        """Seconds until the cluster has ``minimum`` workers again (``timeout`` if never)."""
        start = time.perf_counter()
        while time.perf_counter() - start < timeout:
            if self.now <= minimum:
                return time.perf_counter() - start
            time.sleep(0.1)
        return timeout

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def adaptive_cluster(maximum: int):
    """A fresh ``LocalCluster`` of one worker process, adapting between 1 and ``maximum``."""
    from distributed import LocalCluster

    cluster = LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    )
    cluster.adapt(minimum=1, maximum=maximum)
    return cluster


def run_raw(n: int, seconds: float, maximum: int) -> dict:
    """Raw Dask: ``n`` tasks of ``seconds`` s on a fresh adaptive cluster."""
    from distributed import Client

    with adaptive_cluster(maximum) as cluster, Client(cluster) as client:
        client.wait_for_workers(1)
        count = WorkerCount(client)
        start = time.perf_counter()
        client.gather(client.map(sleepy, [seconds] * n, pure=False))
        wall = time.perf_counter() - start
        back = count.back_to(1, 60.0)
        count.close()
    return {"wall": wall, "most": count.most, "back": back}


def run_labkit(n: int, seconds: float, maximum: int) -> dict:
    """labkit: a sweep of ``n`` trials of ``seconds`` s on a fresh adaptive cluster."""
    with adaptive_cluster(maximum) as cluster, lk.DaskScheduler(cluster=cluster) as s:
        s.client.wait_for_workers(1)
        count = WorkerCount(s.client)
        start = time.perf_counter()
        result = lk.sweep(
            sleepy_trial,
            {"x": lk.uniform(0, 1), "seconds": seconds},
            trials=n,
            metric="loss",
            mode="min",
            scheduler=s,
            store=None,
            seed=0,
        )
        wall = time.perf_counter() - start
        back = count.back_to(1, 60.0)
        count.close()
    return {"wall": wall, "most": count.most, "back": back, "counts": result.counts()}


def epochs(config, trial):
    """8 epochs of 0.5 s, a checkpoint each; goes on from its last checkpoint."""
    start = trial.restore() or 0
    for epoch in range(start, int(config["epochs"])):
        time.sleep(float(config["pause"]))
        trial.report(epoch, loss=config["x"] / (epoch + 1))
        trial.checkpoint(epoch + 1)
    return {"loss": config["x"] / int(config["epochs"])}


def run_lifetimes(trials: int, epochs_: int, lifetime: bool) -> dict:
    """A sweep of ``trials`` x ``epochs_`` x 0.5 s on 4 worker processes, with or without
    a 15 s lifetime (restarted); its wall time, counts and moves."""
    options = {}
    if lifetime:
        options = dict(lifetime="15s", lifetime_stagger="3.75s", lifetime_restart=True)
    with lk.DaskScheduler(mode="processes", n_workers=4, **options) as s:
        s.client.wait_for_workers(4)
        start = time.perf_counter()
        result = lk.sweep(
            epochs,
            {"x": lk.uniform(0, 1), "epochs": epochs_, "pause": 0.5},
            trials=trials,
            metric="loss",
            mode="min",
            scheduler=s,
            store=None,
            seed=0,
            max_failures=1,
            wait=False,
        ).result(timeout=1800)
        wall = time.perf_counter() - start
    moves = sum(t.moves for t in result.trials)
    return {"wall": wall, "counts": result.counts(), "moves": moves}


def lifetimes(quick: bool) -> None:
    """Part 3: the same sweep with and without worker lifetimes."""
    trials, epochs_ = (8, 4) if quick else (64, 8)
    print(f"4 worker processes; {trials} trials x {epochs_} x 0.5 s, a checkpoint each epoch")
    plain = run_lifetimes(trials, epochs_, False)
    print(f"no lifetime             wall {plain['wall']:6.1f} s   {plain['counts']}")
    aged = run_lifetimes(trials, epochs_, True)
    print(
        f"lifetime 15s +- 3.75s   wall {aged['wall']:6.1f} s   {aged['counts']}   "
        f"moves {aged['moves']}"
    )
    print(
        f"=> with / without lifetimes (wall): {aged['wall'] / plain['wall']:.2f}x (target <= 1.3x)"
    )


def group_epochs(config, trial):
    """8 epochs of 4 data-parallel steps and 0.5 s on the trial's workers, a checkpoint each."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1)).double()
    opt = torch.optim.SGD(model.parameters(), lr=float(config["lr"]))
    saved = trial.restore()
    if saved is not None:
        model.load_state_dict(saved["model"])
    trainer = lk.DataParallelTrainer(model, nn.functional.mse_loss, opt, scheduler=trial.scheduler)
    try:
        for epoch in range(0 if saved is None else saved["epoch"], int(config["epochs"])):
            g = torch.Generator().manual_seed(100 + epoch)
            x = torch.randn(64, 5, generator=g, dtype=torch.float64)
            for _ in range(4):
                loss = trainer.step(x, x.sum(dim=1, keepdim=True) * 0.5)
            time.sleep(float(config["pause"]))
            trial.report(epoch, loss=float(loss))
            trial.checkpoint({"model": trainer.sync_model().state_dict(), "epoch": epoch + 1})
    finally:
        trainer.close()
    return {"loss": float(loss)}


def run_groups(trials: int, epochs_: int, lifetime: bool) -> dict:
    """A sweep of ``trials`` group trials (2 workers each) on 4 worker processes, with or
    without a 15 s lifetime (restarted); its wall time, counts, moves and the trials not
    completed."""
    options = {}
    if lifetime:
        options = dict(lifetime="15s", lifetime_stagger="3.75s", lifetime_restart=True)
    with lk.DaskScheduler(mode="processes", n_workers=4, **options) as s:
        s.client.wait_for_workers(4)
        start = time.perf_counter()
        result = lk.sweep(
            group_epochs,
            {"lr": lk.uniform(0.01, 0.2), "epochs": epochs_, "pause": 0.5},
            trials=trials,
            metric="loss",
            mode="min",
            scheduler=s,
            workers_per_trial=2,
            store=None,
            seed=0,
            max_failures=trials,
            wait=False,
        ).result(timeout=1200)
        wall = time.perf_counter() - start
    return {
        "wall": wall,
        "counts": result.counts(),
        "moves": sum(t.moves for t in result.trials),
        "attempts": sum(t.attempts for t in result.trials),
        "others": [t for t in result.trials if t.status.value != "completed"],
    }


def groups(quick: bool) -> None:
    """Part 4: group trials (2 workers each) on the lifetime cluster, and without lifetimes."""
    trials, epochs_ = (4, 4) if quick else (16, 8)
    print(
        f"4 worker processes; {trials} group trials (workers_per_trial=2) x {epochs_} epochs "
        "of 4 DataParallelTrainer steps + 0.5 s, a checkpoint each"
    )
    plain = run_groups(trials, epochs_, False)
    print(f"no lifetime              wall {plain['wall']:6.1f} s   {plain['counts']}")
    aged = run_groups(trials, epochs_, True)
    print(
        f"lifetime 15s +- 3.75s    wall {aged['wall']:6.1f} s   {aged['counts']}   "
        f"moves {aged['moves']}   attempts {aged['attempts']}"
    )
    failed = aged["counts"].get("failed", 0)
    print(
        f"=> failed {failed} (target 0); with / without lifetimes (wall): "
        f"{aged['wall'] / plain['wall']:.2f}x"
    )
    for t in plain["others"] + aged["others"]:
        print(f"  trial {t.id}: {t.status.value} {t.error}")


class JobWatch:
    """A dask-jobqueue cluster's jobs and workers, looked at every 0.5 s: the changes."""

    def __init__(self, cluster):
        self.cluster, self.start, self.changes = cluster, time.perf_counter(), []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        last = None
        while not self._stop.wait(0.5):
            try:
                now = (len(self.cluster.workers), len(self.cluster.scheduler_info["workers"]))
            except Exception:  # the cluster closing
                return
            if now != last:
                self.changes.append((time.perf_counter() - self.start, *now))
                last = now

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def jobqueue(quick: bool) -> None:
    """Part 5: an ASHA sweep on dask-jobqueue's local cluster with lifetimes and adapt."""
    from dask_jobqueue.local import LocalCluster as JobCluster

    trials, maximum = (8, 2) if quick else (40, 4)
    print(
        f"dask_jobqueue LocalCluster, --lifetime 20s --lifetime-stagger 4s, "
        f"adapt(minimum_jobs=0, maximum_jobs={maximum}); {trials} trials x 8 x 0.5 s, ASHA"
    )
    with JobCluster(
        cores=1,
        processes=1,
        memory="1GiB",
        walltime="00:30:00",
        worker_extra_args=["--lifetime", "20s", "--lifetime-stagger", "4s"],
        scheduler_options={"host": "127.0.0.1", "dashboard_address": None},
    ) as cluster:
        cluster.adapt(minimum_jobs=0, maximum_jobs=maximum)
        watch = JobWatch(cluster)
        with lk.DaskScheduler(cluster=cluster) as s:
            start = time.perf_counter()
            result = lk.sweep(
                epochs,
                {"x": lk.uniform(0, 1), "epochs": 8, "pause": 0.5},
                trials=trials,
                metric="loss",
                mode="min",
                scheduler=s,
                store=None,
                seed=0,
                max_failures=trials,
                early_stop=lk.ASHA(min_steps=1, reduction=2, max_steps=8),
                wait=False,
            ).result(timeout=1200)
            wall = time.perf_counter() - start
        ended = time.perf_counter()
        while cluster.scheduler_info["workers"] and time.perf_counter() - ended < 180:
            time.sleep(0.5)
        back = time.perf_counter() - ended
        watch.close()
    moves = sum(t.moves for t in result.trials)
    print(
        f"ASHA sweep from 0 jobs   wall {wall:6.1f} s   {result.counts()}   moves {moves}   "
        f"workers {len({t.worker for t in result.trials})}"
    )
    print(f"every job ended {back:5.1f} s after the sweep")
    print(
        "jobs/workers over time (s, jobs, workers): "
        + " ".join(f"{t:.0f}:{j}/{w}" for t, j, w in watch.changes)
    )
    for t in result.trials:
        if t.status.value not in ("completed", "stopped"):
            print(f"  trial {t.id}: {t.status.value} {t.error}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test: 4 x 1 s, at most 2")
    parser.add_argument("--lifetimes", action="store_true", help="part 3 alone")
    parser.add_argument("--groups", action="store_true", help="part 4 alone")
    parser.add_argument("--jobqueue", action="store_true", help="part 5 alone")
    args = parser.parse_args()
    if args.groups:
        groups(args.quick)
        return
    if args.jobqueue:
        jobqueue(args.quick)
        return
    if args.lifetimes:
        lifetimes(args.quick)
        return
    n, seconds, maximum = (4, 1.0, 2) if args.quick else (16, 2.0, 4)
    print(
        f"adaptive LocalCluster(n_workers=1).adapt(minimum=1, maximum={maximum}); "
        f"{n} x {seconds:g} s; ideal {n * seconds / maximum:.1f} s plus the workers' start"
    )
    raw = run_raw(n, seconds, maximum)
    print(
        f"raw Dask client.map     wall {raw['wall']:6.1f} s   most workers {raw['most']}   "
        f"back at minimum {raw['back']:5.1f} s after"
    )
    labkit = run_labkit(n, seconds, maximum)
    print(
        f"labkit lk.sweep         wall {labkit['wall']:6.1f} s   most workers {labkit['most']}   "
        f"back at minimum {labkit['back']:5.1f} s after   {labkit['counts']}"
    )
    print(f"=> labkit / raw Dask (wall): {labkit['wall'] / raw['wall']:.2f}x (target <= 1.3x)")


if __name__ == "__main__":
    main()
