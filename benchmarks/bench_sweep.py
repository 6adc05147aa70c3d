"""Sweeps: labkit against Optuna (in memory and on SQLite) and Ray Tune, in one command.

Run ``python benchmarks/bench_sweep.py`` (about three minutes on 2 cores) or
``--quick`` (a smoke test).  It prints times and ratios and never asserts.

1. **Overhead on real work**: 60 trials x 5 reports x 20 ms of GIL-free work
   (``time.sleep``) on 2 slots; the ideal is 60 x 5 x 20 ms / 2 = 3.0 s.
   labkit with its store on (a SQLite file), on ``lk.DaskScheduler(mode="auto")``
   with two threads and on two worker processes; Optuna ``n_jobs=2`` in
   memory and on SQLite (no pruning); Ray Tune where it imports.  Target:
   labkit on the default cluster <= 1.05x ideal, ahead of Optuna in memory.
2. **Trivial trials**: 500 trials that return at once, milliseconds a trial.
   Target: <= 2 ms with the store on; on worker processes, where trials run
   in slots, <= 0.5 ms (issue 37; a Dask task a trial, as before slots, beside
   it).  (Optuna on SQLite runs 100: its rate is the same, its time is not.)
3. **A real search**: a torch MLP on scikit-learn's digits, 32 random
   configurations of learning rate, width, depth and dropout, 27 epochs,
   validation accuracy reported every epoch; random search run to the end
   against ``lk.ASHA(min_steps=1, reduction=3)`` on the same configurations:
   the wall time for ASHA to report an accuracy within 0.5% of random
   search's best, over random search's whole wall time.  Target: <= 1/3.
   On two worker processes, one trial each, so that a configuration trains
   the same way in both searches.
4. **The board's cost**: 100 trials at once (``mode="auto"``, 100 worker
   threads), each reporting every 50 ms (40 reports: 2 s of GIL-free work;
   2000 reports a second in all), with the store on; without any view
   against the sweep's live comparison board (``lk.board(run)``, its comm
   messages serialised as a kernel would) plus the Bokeh dashboard with a
   session open (``bench_views.py --viewer``), in alternating order.  The
   ratio of the median wall times, and of the process's CPU time.  Target:
   board + dashboard <= 1.03x.
5. **The store at 10,000 trials**: sweeps of 10,000 trials of up to 30
   reports (no pause: the store's cost alone) written once, then
   ``lk.load_sweep`` of each (the ASHA sweep of issue 37, ``min_steps=2,
   reduction=3``, and one whose every trial reports 30 times), the time from
   ``lk.sweep(..., resume=True)`` with 10 more trials to the first new
   trial's start, and the bytes a report costs on disk: the file of 10,000 x
   30 reports less that of 10,000 x 1, over the 290,000 reports between
   (every write committed: the sweep closed its store).  Targets: load <= 0.5 s,
   resume <= 2 s.

6. **At scale**: 10,000 trials with and without the board, and the board of
   the stored sweep (``sweep_scale.py``).
7. **Samplers** (issue 35, ``--only samplers``, ``bench_samplers.py``): the
   best value of random search against Optuna's TPE driving ``lk.sweep`` (and
   Optuna alone) on a 4-d quadratic, 40 trials, 3 seeds; what asking and
   telling cost a trial at 1,000 trials, beside Optuna's own ``study.optimize``.

Timings are medians over ``--repeat`` rounds (3; 1 with ``--quick``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import labkit as lk  # noqa: E402
from labkit.events import TrialReported  # noqa: E402

SIZES = {"full": dict(trials=60, reports=5, pause=0.02, trivial=500, optuna_sqlite=100,
                      configs=32, epochs=27, repeat=3),
         "quick": dict(trials=8, reports=2, pause=0.01, trivial=40, optuna_sqlite=10,
                       configs=6, epochs=3, repeat=1)}
# warm-ups only steady the timings of the full run; the smoke test skips them
SIZES["full"].update(warm_up=True)
SIZES["quick"].update(warm_up=False)
SIZES["full"].update(board_trials=100, board_reports=40, board_pause=0.05, board_repeat=5)
SIZES["quick"].update(board_trials=20, board_reports=5, board_pause=0.05, board_repeat=1)
SIZES["full"].update(store_trials=10_000, store_repeat=5)
SIZES["quick"].update(store_trials=100, store_repeat=1)


def gil_free(config, trial):
    """Five reports, each after 20 ms of GIL-free work."""
    for step in range(config["reports"]):
        time.sleep(config["pause"])
        trial.report(step, loss=config["x"] / (step + 1))
    return None


def trivial(config, trial):
    return {"loss": config["x"]}


# -- (1) and (2): labkit and its peers ----------------------------------------------------

def labkit_run(fn, n: int, size: dict, scheduler, folder: str) -> float:
    """Seconds for an ``n``-trial sweep of ``fn`` with the store on."""
    space = {"x": lk.uniform(0, 1), "reports": size["reports"], "pause": size["pause"]}
    began = time.perf_counter()
    result = lk.sweep(fn, space, trials=n, metric="loss", mode="min", scheduler=scheduler,
                      seed=0, store=os.path.join(folder, "bench.db"))
    took = time.perf_counter() - began
    assert result.counts() == {"completed": n}, result.counts()
    return took


def optuna_run(objective_kind: str, n: int, size: dict, storage: str | None) -> float | None:
    """Seconds for ``n`` trials of Optuna with 2 jobs (None: Optuna is not installed)."""
    try:
        import optuna
    except ImportError:
        return None
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def objective(trial):
        x = trial.suggest_float("x", 0, 1)
        if objective_kind == "trivial":
            return x
        for step in range(size["reports"]):
            time.sleep(size["pause"])
            trial.report(x / (step + 1), step)
        return x / size["reports"]
    study = optuna.create_study(storage=storage, pruner=optuna.pruners.NopPruner(),
                                sampler=optuna.samplers.RandomSampler(seed=0))
    began = time.perf_counter()
    study.optimize(objective, n_trials=n, n_jobs=2)
    return time.perf_counter() - began


def ray_run(n: int, size: dict) -> float | None:
    """Seconds for ``n`` trials of Ray Tune on 2 CPUs (None: Ray does not import)."""
    try:
        from ray import tune
        import ray
    except ImportError:
        return None
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        def objective(config):
            for step in range(size["reports"]):
                time.sleep(size["pause"])
                tune.report({"loss": config["x"] / (step + 1)})
        began = time.perf_counter()
        tune.Tuner(objective, param_space={"x": tune.uniform(0, 1)},
                   tune_config=tune.TuneConfig(num_samples=n)).fit()
        return time.perf_counter() - began
    finally:
        ray.shutdown()


def plain_threads(size: dict) -> float:
    """Seconds for the same sleeps on two plain threads: the floor ``time.sleep`` sets here."""
    import queue
    work = queue.SimpleQueue()
    for i in range(size["trials"]):
        work.put(i)

    def slot():
        while True:
            try:
                work.get_nowait()
            except queue.Empty:
                return
            for _ in range(size["reports"]):
                time.sleep(size["pause"])
    threads = [threading.Thread(target=slot) for _ in range(2)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - began


PER_TASK = "labkit, 2 worker processes, a task a trial"


def per_task_run(size: dict, processes, folder: str) -> float:
    """Seconds a trivial trial on worker processes as before slots: a Dask task a trial."""
    from labkit.experiments import launch
    launch.SLOTS = False
    try:
        return labkit_run(trivial, size["trivial"], size, processes, folder) / size["trivial"]
    finally:
        launch.SLOTS = True


def _processes(size: dict):
    """Two worker processes: the quick run's one shared cluster, else a new one."""
    shared = size.get("processes")
    if shared is not None:
        return contextlib.nullcontext(shared)
    return lk.DaskScheduler(mode="processes", n_workers=2)


def overhead(size: dict, folder: str) -> None:
    """Benchmarks (1) and (2)."""
    ideal = size["trials"] * size["reports"] * size["pause"] / 2
    rows = {"labkit, auto (2 threads), store on": [], "labkit, 2 worker processes, store on": [],
            "optuna, in memory, n_jobs=2": [], "optuna, SQLite, n_jobs=2": [],
            "two plain threads (no framework: the floor)": []}
    trivial_rows = {k: [] for k in rows}
    trivial_rows[PER_TASK] = []   # issue 37: worker processes as before slots, side by side
    with lk.DaskScheduler(mode="auto", n_workers=1, threads_per_worker=2) as threads, \
            _processes(size) as processes:
        for s in (threads, processes) if size["warm_up"] else ():   # the first tasks import
            labkit_run(trivial, 4, size, s, folder)
        for r in range(size["repeat"]):
            for label, s in ((0, threads), (1, processes)):
                key = list(rows)[label]
                rows[key].append(labkit_run(gil_free, size["trials"], size, s, folder))
                trivial_rows[key].append(labkit_run(trivial, size["trivial"], size, s, folder)
                                         / size["trivial"])
            trivial_rows[PER_TASK].append(per_task_run(size, processes, folder))
            db = f"sqlite:///{os.path.join(folder, f'optuna-{r}.db')}"
            for key, storage in (("optuna, in memory, n_jobs=2", None),
                                 ("optuna, SQLite, n_jobs=2", db)):
                rows[key].append(optuna_run("work", size["trials"], size, storage))
                n = size["trivial"] if storage is None else size["optuna_sqlite"]
                took = optuna_run("trivial", n, size, storage)
                trivial_rows[key].append(None if took is None else took / n)
            rows["two plain threads (no framework: the floor)"].append(plain_threads(size))
    trivial_rows.pop("two plain threads (no framework: the floor)")
    ray = ray_run(size["trials"], size)
    print(f"\n[1] {size['trials']} trials x {size['reports']} reports x "
          f"{size['pause'] * 1e3:.0f} ms of GIL-free work on 2 slots; ideal {ideal:.2f} s")
    for key, times in rows.items():
        _line(key, times, lambda t: f"{t:.2f} s = {t / ideal:.3f}x ideal")
    print(f"    {'ray tune, 2 CPUs':44s} " + (f"{ray:.2f} s = {ray / ideal:.3f}x ideal"
                                               if ray else "skipped (ray does not import)"))
    ours, theirs = _median(rows["labkit, auto (2 threads), store on"]), \
        _median(rows["optuna, in memory, n_jobs=2"])
    floor = _median(rows["two plain threads (no framework: the floor)"])
    if ours and theirs:
        print(f"    => labkit (auto) / ideal {ours / ideal:.3f} (target <= 1.05); "
              f"optuna in memory / labkit {theirs / ours:.3f} (target > 1); over the floor: "
              f"labkit {(ours - floor) * 1e3:.0f} ms, optuna {(theirs - floor) * 1e3:.0f} ms")
    print(f"\n[2] {size['trivial']} trivial trials, milliseconds a trial")
    for key, times in trivial_rows.items():
        _line(key, times, lambda t: f"{t * 1e3:.2f} ms a trial")
    print(f"    => labkit (auto) {_median(trivial_rows[list(rows)[0]]) * 1e3:.2f} ms "
          f"(target <= 2 ms with the store on)")
    print(f"    => trivial trial on worker processes "
          f"{_median(trivial_rows[list(rows)[1]]) * 1e3:.2f} ms in slots (target <= 0.5 ms), "
          f"{_median(trivial_rows[PER_TASK]) * 1e3:.2f} ms a task a trial; on threads "
          f"{_median(trivial_rows[list(rows)[0]]) * 1e3:.2f} ms")


# -- (3) a real search ------------------------------------------------------------------------

def digits():
    """Scaled digits, split 1437 / 360 rows (as float32 tensors)."""
    import numpy as np
    import torch
    from sklearn.datasets import load_digits
    data = load_digits()
    order = np.random.default_rng(0).permutation(len(data.target))
    x = torch.tensor(data.data[order] / 16.0, dtype=torch.float32)
    y = torch.tensor(data.target[order])
    return x[:1437], y[:1437], x[1437:], y[1437:]


DATA = None


def train_mlp(config, trial):
    """An MLP on digits; validation accuracy every epoch; a checkpoint every epoch."""
    import torch
    global DATA
    torch.set_num_threads(1)   # one thread a trial: the slots are the parallelism
    if DATA is None:
        DATA = digits()
    x, y, vx, vy = DATA
    torch.manual_seed(trial.id)
    layers, width = [], 64
    for _ in range(config["layers"]):
        layers += [torch.nn.Linear(width, config["width"]), torch.nn.ReLU(),
                   torch.nn.Dropout(config["dropout"])]
        width = config["width"]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    generator = torch.Generator().manual_seed(trial.id)
    for epoch in range(config["epochs"]):
        model.train()
        for batch in torch.randperm(len(x), generator=generator).split(64):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x[batch]), y[batch]).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            accuracy = float((model(vx).argmax(1) == vy).float().mean())
        trial.report(epoch + 1, accuracy=accuracy)
    return None


SPACE = {"lr": lk.loguniform(1e-4, 1e-1), "width": lk.choice([64, 128, 256]),
         "layers": lk.randint(1, 4), "dropout": lk.uniform(0, 0.5)}


def search(size: dict, scheduler, folder: str, rule, name: str):
    """``(result, wall seconds, [(seconds since start, accuracy), ...])`` of one search."""
    seen, began = [], [None]

    def watch(event):
        if isinstance(event, TrialReported) and event.value is not None:
            seen.append((time.perf_counter() - began[0], max(m["accuracy"]
                                                             for m in event.metrics)))
    space = {**SPACE, "epochs": size["epochs"]}
    began[0] = time.perf_counter()
    run = lk.sweep(train_mlp, space, trials=size["configs"], metric="accuracy", mode="max",
                   scheduler=scheduler, seed=0, early_stop=rule, name=name,
                   store=os.path.join(folder, "search.db"), wait=False)
    run.subscribe(watch)
    result = run.result()
    return result, time.perf_counter() - began[0], seen


def real_search(size: dict, folder: str) -> None:
    """Benchmark (3)."""
    print(f"\n[3] torch MLP on digits, {size['configs']} random configurations, "
          f"{size['epochs']} epochs; random search to the end against ASHA")
    ratios = []
    # worker processes: torch's random generator is a process's own, so a configuration
    # trains the same way in both searches (threads would share it between trials)
    with _processes(size) as s:
        if size["warm_up"]:
            search(dict(size, configs=2, epochs=1), s, folder, None, "warm-up")  # imports, data
        for r in range(size["repeat"]):
            full, full_s, _ = search(size, s, folder, None, f"random-{r}")
            asha, asha_s, seen = search(size, s, folder, lk.ASHA(min_steps=1, reduction=3),
                                        f"asha-{r}")
            target = full.best.value - 0.005
            reached = next((t for t, acc in seen if acc >= target), None)
            ratio = None if reached is None else reached / full_s
            ratios.append(ratio)
            epochs = sum(len(t.history) for t in asha.trials)
            print(f"    round {r}: random search {full_s:.2f} s, best {full.best.value:.4f} "
                  f"(trial {full.best.id}); ASHA {asha_s:.2f} s in all ({epochs} epochs of "
                  f"{size['configs'] * size['epochs']}, {len(asha.by_status('stopped'))} "
                  f"stopped), best {asha.best.value:.4f}; within 0.5% after "
                  + (f"{reached:.2f} s = {ratio:.3f} of random's time" if reached is not None
                     else "never"))
    done = [r for r in ratios if r is not None]
    print(f"    => ASHA's time to within 0.5% / random search's time: "
          f"{statistics.median(done):.3f} (target <= 0.333)" if done else
          "    => ASHA never came within 0.5%")


# -- (4) the board's cost ------------------------------------------------------------------

def board_run(s, size: dict, folder: str, views: str, name: str) -> tuple[float, float]:
    """``(wall, cpu)`` seconds of one sweep with ``views``: "none", "board" or "both"."""
    import bench_views
    from labkit.views.bokeh.dashboard import stop_dashboard
    viewer = bench_views.DashboardViewer(lk.dashboard(s)) if views == "both" else None
    try:
        if viewer is not None:
            time.sleep(0.5)                        # the session's first updates pass
        space = {"x": lk.uniform(0, 1), "reports": size["board_reports"],
                 "pause": size["board_pause"]}
        c0, t0 = time.process_time(), time.perf_counter()
        run = lk.sweep(gil_free, space, trials=size["board_trials"], metric="loss", mode="min",
                       scheduler=s, seed=0, store=os.path.join(folder, "board.db"), name=name,
                       wait=False)
        shown = lk.board(run) if views != "none" else None
        result = run.result()
        c1, t1 = time.process_time(), time.perf_counter()
        assert result.counts() == {"completed": size["board_trials"]}, result.counts()
        if shown is not None:
            bench_views.wait_stopped(shown)
            assert len(shown.sweep_tracker.snapshot().trials) == size["board_trials"]
            shown.close()
    finally:
        if viewer is not None:
            viewer.close()
            stop_dashboard(s)
    return t1 - t0, c1 - c0


def _quartiles(values: list) -> str:
    """The lower and upper quartiles of ``values``, as text."""
    if len(values) < 4:
        return "n/a"
    q = statistics.quantiles(values, n=4)
    return f"{q[0]:.3f}-{q[2]:.3f}"


def board_cost(size: dict, folder: str) -> None:
    """Benchmark (4)."""
    import bench_views
    recorder = bench_views.CommRecorder().install()
    labels = {"none": "no view", "board": "the board alone",
              "both": "board + dashboard (a session open)"}
    times: dict[str, list] = {k: [] for k in labels}
    try:
        with lk.DaskScheduler(mode="auto", n_workers=1,
                              threads_per_worker=size["board_trials"]) as s:
            if size["warm_up"]:
                board_run(s, dict(size, board_reports=1), folder, "both", "warm-up")
            for r in range(size["board_repeat"]):
                for views in (list(labels) if r % 2 == 0 else list(labels)[::-1]):
                    times[views].append(board_run(s, size, folder, views, f"{views}-{r}"))
    finally:
        recorder.uninstall()
    ideal = size["board_reports"] * size["board_pause"]
    print(f"\n[4] {size['board_trials']} trials at once, each reporting every "
          f"{size['board_pause'] * 1e3:.0f} ms ({size['board_reports']} reports; ideal "
          f"{ideal:.2f} s), store on; medians of {size['board_repeat']}")
    for key, label in labels.items():
        walls, cpus = [w for w, _ in times[key]], [c for _, c in times[key]]
        print(f"    {label:44s} {_median(walls):.3f} s wall, {_median(cpus):.2f} s CPU "
              f"(walls: {', '.join(f'{w:.3f}' for w in walls)})")
    for key in ("board", "both"):
        wall = _median([w for w, _ in times[key]]) / _median([w for w, _ in times["none"]])
        cpu = _median([c for _, c in times[key]]) / _median([c for _, c in times["none"]])
        print(f"    => {labels[key]} / none: wall {wall:.3f}"
              f"{' (target <= 1.03)' if key == 'both' else ''}, CPU of this process {cpu:.3f}")
        # each round's own ratio (its views beside its no-view sweep, run next to each
        # other): drift of the machine over the rounds cancels out of these
        paired = [v[0] / n[0] for v, n in zip(times[key], times["none"], strict=True)]
        print(f"       paired by round: median {_median(paired):.3f}, "
              f"quartiles {_quartiles(paired)}")


# -- (5) the store at 10,000 trials --------------------------------------------------------------

STORE_SPACE = {"x": lk.uniform(0, 1), "y": lk.loguniform(1e-3, 1), "k": lk.choice(["a", "b"])}
FIRST_NEW: list = []   # when the first trial of id >= NEW_FROM[0] began
NEW_FROM = [1 << 62]


def thirty(config, trial):
    """Up to 30 reports of a falling loss, no work between them (the store's cost alone)."""
    if trial.id >= NEW_FROM[0] and not FIRST_NEW:
        FIRST_NEW.append(time.perf_counter())
    for step in range(config.get("steps", 30)):
        trial.report(step, loss=config["x"] / (step + 1) + config["y"])


def store_sweep(path: str, n: int, name: str, rule, **space):
    """The sweep of ``n`` trials of :func:`thirty` into ``path``; its result."""
    return lk.sweep(thirty, {**STORE_SPACE, **space}, trials=n, metric="loss", mode="min",
                    seed=0, store=path, name=name, early_stop=rule)


def _file_bytes(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def store_scale(size: dict, folder: str) -> None:
    """Benchmark (5)."""
    import shutil
    n, repeat = size["store_trials"], size["store_repeat"]
    asha = lambda: lk.ASHA(min_steps=2, reduction=3)   # noqa: E731 - a fresh rule a sweep
    paths = {key: os.path.join(folder, f"store-{key}.db") for key in ("asha", "thirty", "one")}
    began = time.perf_counter()
    kept = store_sweep(paths["asha"], n, "asha", asha())
    wrote = time.perf_counter() - began
    store_sweep(paths["thirty"], n, "thirty", None)
    store_sweep(paths["one"], n, "one", None, steps=1)
    reports = {key: sum(len(t.history) for t in lk.load_sweep(p).trials)
               for key, p in paths.items()}
    print(f"\n[5] the store at {n:,} trials (ASHA min_steps=2, reduction=3: {reports['asha']:,} "
          f"reports, {kept.counts()}; written in {wrote:.2f} s); medians of {repeat}")
    for key in ("asha", "thirty"):
        walls, cpus = [], []
        for _ in range(repeat):
            c0, t0 = time.process_time(), time.perf_counter()
            loaded = lk.load_sweep(paths[key])
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        assert len(loaded.trials) == n
        print(f"    {'lk.load_sweep, ' + f'{reports[key]:,} reports':44s} "
              f"{_median(walls):.3f} s wall, {_median(cpus):.3f} s CPU (target <= 0.5 s)")
    for key, rule in (("asha", asha), ("thirty", lambda: None)):
        waits = []
        for r in range(repeat):
            copy = os.path.join(folder, f"resume-{key}-{r}.db")
            shutil.copy(paths[key], copy)
            FIRST_NEW.clear()
            NEW_FROM[0] = n
            t0 = time.perf_counter()
            resumed = lk.sweep(thirty, STORE_SPACE, trials=n + 10,
                               metric="loss", mode="min", seed=0, store=copy, name=key,
                               resume=True, early_stop=rule())
            waits.append(FIRST_NEW[0] - t0)
            assert len(resumed.trials) == n + 10
        print(f"    {'resume ' + key + ': call to first new trial':44s} "
              f"{_median(waits):.3f} s (target <= 2 s; {', '.join(f'{w:.3f}' for w in waits)})")
    grew = _file_bytes(paths["thirty"]) - _file_bytes(paths["one"])
    between = reports["thirty"] - reports["one"]
    print(f"    {'bytes a report costs on disk':44s} {grew / between:.1f} B "
          f"({_file_bytes(paths['thirty']):,} B for {reports['thirty']:,} reports, "
          f"{_file_bytes(paths['one']):,} B for {reports['one']:,})")


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _line(label: str, values, fmt) -> None:
    m = _median(values)
    print(f"    {label:44s} " + ("skipped (not installed)" if m is None else fmt(m)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    parser.add_argument("--repeat", type=int, help="rounds (medians are printed)")
    parser.add_argument("--only", choices=["overhead", "search", "board", "store", "scale",
                                           "samplers"],
                        help="one part only")
    args = parser.parse_args()
    size = dict(SIZES["quick" if args.quick else "full"])
    if args.repeat:
        size["repeat"] = size["board_repeat"] = args.repeat
    print(f"labkit sweeps: {platform.node()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="labkit-bench-sweep-") as folder, \
            contextlib.ExitStack() as stack:
        if args.quick and args.only in (None, "overhead", "search"):
            # a smoke test: one cluster of worker processes serves (1), (2) and (3)
            size["processes"] = stack.enter_context(
                lk.DaskScheduler(mode="processes", n_workers=2))
        if args.only in (None, "overhead"):
            overhead(size, folder)
        if args.only in (None, "search"):
            real_search(size, folder)
        if args.only in (None, "board"):
            board_cost(size, folder)
        if args.only in (None, "store"):
            store_scale(size, folder)
        if args.only in (None, "scale"):
            from sweep_scale import SCALE_SIZES, scale
            scale(SCALE_SIZES["quick" if args.quick else "full"], folder)
        if args.only in (None, "samplers"):
            from bench_samplers import SIZES as SAMPLER_SIZES
            from bench_samplers import samplers
            samplers(SAMPLER_SIZES["quick" if args.quick else "full"])


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    main()
