"""Checkpoints written where trials run: labkit against the same trials saving by hand, one command.

Run ``python benchmarks/bench_checkpoints.py`` (part 1, about a minute on 2 cores),
add ``--s3 --pbt --ray`` for the other parts, or ``--quick`` (every part at small
sizes: a smoke test).  It prints times, ratios and the client's memory, and never
asserts.

On an embedded cluster of 4 worker processes (``lk.DaskScheduler(mode="processes",
n_workers=4, threads_per_worker=1)``), a sweep of 8 trials, each training 5 epochs
of 0.2 s (``time.sleep``: GIL-free work) on a state of 50 MB of float64 made on
the worker, reporting every epoch, with the store on (a SQLite file):

1. **A local folder.**  (a) no checkpoints; (b) each trial writes its state with
   ``np.save`` to a local folder itself, from the worker, after every epoch (one file a
   trial, overwritten); (b') the same to a new file each epoch (a temporary name
   renamed, the previous file removed: a checkpoint that survives a crash mid-write,
   as labkit's); (c)
   ``trial.checkpoint(state)`` after every epoch, to ``lk.sweep(...,
   checkpoints=folder)``.  The ratios of the median wall times c/b (target <= 1.1)
   and b/a, and each case's peak growth of this process's RSS (the notebook's
   process: the client and the Dask scheduler), sampled every 10 ms on a thread
   (target <= 100 MB).  ``--state-mb 500`` runs the same with 500 MB states
   (target: it works, and the client grows by <= 100 MB).
2. **S3** (``--s3``): moto's S3 server, started by this script in a process of its
   own (its objects are not this process's memory) on a port the system picks;
   (b) each trial puts its ``np.save`` bytes with s3fs by hand; (c)
   ``lk.sweep(..., checkpoints="s3://...", storage_options=...)``.  Target c/b <= 1.2.
3. **PBT** (``--pbt``): ``lk.PBT`` over 8 members with 50 MB states, 10 steps, an
   exploit round every 2: the client's peak RSS growth (target <= 100 MB) and the
   wall time.
4. **Ray Tune** (``--ray``): the trials of part 1 on Ray Tune (``num_cpus=4``), with
   no checkpoints and with a checkpoint (``np.save`` in a folder, ``tune.report(...,
   checkpoint=...)``) after every epoch to a local ``storage_path``, keeping one a
   trial.  Ray runs in a Python of its own (``--ray-python``, e.g. a venv under
   /tmp where ``ray[tune]`` is installed for the benchmark only): it is not
   labkit's dependency.

Timings are medians over ``--repeat`` rounds (3; 1 with ``--quick``) whose order
alternates; memory is the largest growth seen.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import io
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SIZES = {
    "full": dict(
        trials=8,
        epochs=5,
        pause=0.2,
        state_mb=50,
        workers=4,
        repeat=3,
        pbt_steps=10,
        pbt_interval=2,
    ),
    "quick": dict(
        trials=2, epochs=2, pause=0.05, state_mb=2, workers=2, repeat=1, pbt_steps=4, pbt_interval=2
    ),
}
# the warm-up sweeps only steady the full run's timings; the smoke test skips them
SIZES["full"]["warm_up"], SIZES["quick"]["warm_up"] = True, False
MB = 2**20


# -- the trials (shipped to the worker processes by value) ------------------------------


def _state(config):
    """The trial's state: ``state_mb`` of float64 made on the worker, not compressible."""
    rng = np.random.default_rng(int(config["x"] * 1e9))
    return rng.random(int(config["state_mb"] * MB) // 8)


def _epochs(config, trial, save):
    """Train ``epochs`` epochs of ``pause`` s on a state; ``save(state)`` after each report."""
    state = _state(config)
    for epoch in range(config["epochs"]):
        time.sleep(config["pause"])
        state[epoch] += 1.0  # the state changes every epoch
        trial.report(epoch, loss=config["x"] / (epoch + 1))
        if save is not None:
            save(state)


def no_checkpoints(config, trial):
    """(a) the work alone."""
    _epochs(config, trial, None)


def np_save_by_hand(config, trial):
    """(b) the trial writes its state itself, from the worker, to a local folder."""
    path = os.path.join(config["folder"], f"trial-{trial.id}.npy")
    _epochs(config, trial, lambda state: np.save(path, state))


def np_save_new_files(config, trial):
    """(b') by hand, as a checkpoint that survives a crash mid-write must: a new file each
    epoch (np.save to a temporary name, renamed), the previous one removed after."""
    folder = os.path.join(config["folder"], f"trial-{trial.id}")
    os.makedirs(folder, exist_ok=True)
    written = []

    def save(state):
        path = os.path.join(folder, f"epoch-{len(written)}.npy")
        with open(path + ".tmp", "wb") as fh:
            np.save(fh, state)
        os.replace(path + ".tmp", path)
        if written:
            os.unlink(written[-1])
        written.append(path)

    _epochs(config, trial, save)


def s3fs_by_hand(config, trial):
    """(b) on S3: the trial puts its ``np.save`` bytes with s3fs itself."""
    import s3fs

    fs = s3fs.S3FileSystem(
        endpoint_url=config["endpoint"], key=config["key"], secret=config["secret"]
    )
    path = f"{config['bucket']}/by-hand/trial-{trial.id}.npy"

    def put(state):
        buffer = io.BytesIO()
        np.save(buffer, state)
        fs.pipe_file(path, buffer.getvalue())

    _epochs(config, trial, put)


def labkit_checkpoints(config, trial):
    """(c) ``trial.checkpoint(state)``: written from the worker to the sweep's location."""
    _epochs(config, trial, trial.checkpoint)


def pbt_member(config, trial):
    """A PBT member: goes on from its (or its donor's) checkpoint, reads the lr in force."""
    saved = trial.restore()
    start, state = (0, _state(config)) if saved is None else (saved["step"], saved["state"])
    for step in range(start + 1, config["steps"] + 1):
        time.sleep(config["pause"])
        state[0] += trial.config["lr"]
        trial.report(step, score=float(state[0]))
        trial.checkpoint({"step": step, "state": state})


# -- measuring ---------------------------------------------------------------------------


def cpu_seconds(process):
    """CPU seconds (user + system) of ``process`` and its children (the worker processes):
    the work done, which other programs loading the machine change far less than wall time."""
    total = 0.0
    for each in [process, *process.children(recursive=True)]:
        try:
            times = each.cpu_times()
        except Exception:  # noqa: BLE001 - a child gone meanwhile
            continue
        total += times.user + times.system
    return total


class PeakRSS:
    """Samples this process's RSS every ``interval`` seconds on a thread; the peak growth."""

    def __init__(self, interval=0.01):
        import psutil

        self.process, self.interval = psutil.Process(), interval
        self.stop, self.peak, self.baseline = threading.Event(), 0, 0
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        """Keep the largest RSS seen until stopped."""
        while not self.stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            self.stop.wait(self.interval)

    def __enter__(self):
        gc.collect()
        self.baseline = self.peak = self.process.memory_info().rss
        self.cpu = -cpu_seconds(self.process)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.cpu += cpu_seconds(self.process)

    @property
    def grew_mb(self) -> float:
        """MiB the process grew by at its peak."""
        return (self.peak - self.baseline) / MB


def run_sweep(fn, size, scheduler, folder, where=None, space=None):
    """Wall seconds, client RSS growth (MiB) and MiB kept at the checkpoint location of one
    sweep of ``fn``; ``where(run)`` gives its ``checkpoints=``/``storage_options=`` (a place
    of the run's own); everything it wrote is removed after."""
    import labkit as lk
    from labkit.checkpoints.location import CheckpointLocation

    run = tempfile.mkdtemp(prefix="run-", dir=folder)
    space = {
        "x": lk.uniform(0, 1),
        "epochs": size["epochs"],
        "pause": size["pause"],
        "state_mb": size["state_mb"],
        "folder": run,
        **(space or {}),
    }
    place = where(run) if where else {}
    kept = 0.0
    try:
        with PeakRSS() as rss:
            began = time.perf_counter()
            result = lk.sweep(
                fn,
                space,
                trials=size["trials"],
                metric="loss",
                mode="min",
                scheduler=scheduler,
                seed=0,
                store=os.path.join(run, "sweeps.db"),
                name=fn.__name__,
                **place,
            )
            took = time.perf_counter() - began
        assert result.counts() == {"completed": size["trials"]}, result.counts()
        if place:
            location = CheckpointLocation(place["checkpoints"], place.get("storage_options"))
            kept = location.size_of() / MB
            location.remove_all()
    finally:
        shutil.rmtree(run, ignore_errors=True)
    return took, rss.grew_mb, kept, rss.cpu


def warm_up(cases, size, scheduler, folder):
    """One tiny sweep of each case, untimed: workers import what the trials use."""
    tiny = dict(size, epochs=1, pause=0.0, state_mb=0.01)
    for _, fn, extra in cases:
        run_sweep(fn, tiny, scheduler, folder, **extra)


def side_by_side(cases, size, scheduler, folder):
    """Each case's median time and largest RSS growth over ``repeat`` alternating rounds."""
    if size["warm_up"]:
        warm_up(cases, size, scheduler, folder)
    times = {label: [] for label, _, _ in cases}
    cpus = {label: [] for label, _, _ in cases}
    grown = {label: 0.0 for label, _, _ in cases}
    kept = {label: 0.0 for label, _, _ in cases}
    for round_ in range(size["repeat"]):
        for label, fn, extra in cases if round_ % 2 == 0 else cases[::-1]:
            took, grew, kept[label], cpu = run_sweep(fn, size, scheduler, folder, **extra)
            times[label].append(took)
            cpus[label].append(cpu)
            grown[label] = max(grown[label], grew)
    ideal = size["trials"] * size["epochs"] * size["pause"] / size["workers"]
    medians = {label: statistics.median(times[label]) for label in times}
    cpu = {label: statistics.median(cpus[label]) for label in cpus}
    for label in medians:
        print(
            f"    {label:42s} median {medians[label]:6.2f} s ({medians[label] / ideal:5.2f}x "
            f"ideal {ideal:.1f} s)   CPU {cpu[label]:6.2f} s   client peak RSS growth "
            f"{grown[label]:7.1f} MiB"
            + (f"   kept after {kept[label]:.0f} MiB" if kept[label] else "")
        )
    return medians, grown, cpu


def show_ratio(label, value, target=None):
    """One ratio line, with its target where there is one."""
    goal = f"   (target <= {target})" if target is not None else ""
    print(f"    => {label:40s} {value:6.3f}{goal}")


# -- the parts ---------------------------------------------------------------------------


def local_part(size, scheduler, folder):
    """(1) no checkpoints, np.save by hand, labkit to a local folder."""
    print(
        f"\n[1] {size['trials']} trials x {size['epochs']} epochs x {size['pause']} s, "
        f"{size['state_mb']} MB state checkpointed after every epoch, "
        f"{size['workers']} worker processes, store on; local folder"
    )
    cases = [
        ("(a) no checkpoints", no_checkpoints, {}),
        ("(b) np.save by hand from the worker", np_save_by_hand, {}),
        ("(b') np.save, a new file each epoch", np_save_new_files, {}),
        (
            "(c) labkit trial.checkpoint",
            labkit_checkpoints,
            {"where": lambda run: {"checkpoints": os.path.join(run, "checkpoints")}},
        ),
    ]
    medians, grown, cpu = side_by_side(cases, size, scheduler, folder)
    a, b, b_new, c = (medians[label] for label, _, _ in cases)
    show_ratio("c/b: labkit / np.save by hand", c / b, 1.1)
    show_ratio("b/a: np.save by hand / no checkpoints", b / a)
    show_ratio("c/b': labkit / np.save to new files", c / b_new)
    show_ratio("c/a: labkit / no checkpoints", c / a)
    cpu_a, cpu_b, _, cpu_c = (cpu[label] for label, _, _ in cases)
    # CPU seconds of the client and the workers: what a busy machine's wall times hide
    show_ratio("CPU c/b: labkit / np.save by hand", cpu_c / cpu_b)
    show_ratio("CPU (c-a)/(b-a): checkpoints' own", (cpu_c - cpu_a) / max(cpu_b - cpu_a, 1e-9))
    print(
        f"    => client peak RSS growth with labkit's checkpoints: "
        f"{grown[cases[-1][0]]:.1f} MiB   (target <= 100)"
    )
    return c / a


def start_moto(folder):
    """moto's S3 server in a process of its own on a port the system picks; (process, URL)."""
    code = (
        "import sys; from moto.server import ThreadedMotoServer; "
        "s = ThreadedMotoServer('127.0.0.1', 0, verbose=False); s.start(); "
        "print(s.get_host_and_port()[1], flush=True); sys.stdin.read(); s.stop()"
    )
    log = os.path.join(folder, "moto.log")
    with open(log, "wb") as errors:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
    port = proc.stdout.readline().decode().strip()  # the server binds port 0: no race
    if not port.isdigit():
        proc.kill()
        proc.wait()
        raise RuntimeError(f"moto's server did not start: {port!r} (see {log})")
    return proc, f"http://127.0.0.1:{port}"


def s3_part(size, scheduler, folder):
    """(2) on S3 through moto's server: s3fs by hand against labkit."""
    import s3fs

    proc, endpoint = start_moto(folder)
    try:
        options = {"endpoint_url": endpoint, "key": "bench", "secret": "bench"}
        s3fs.S3FileSystem(**options, skip_instance_cache=True).mkdir("bench")
        print(f"\n[2] the same on S3 (moto's server at {endpoint}, a process of its own)")
        hand = {"endpoint": endpoint, "key": "bench", "secret": "bench", "bucket": "bench"}
        cases = [
            ("(b) s3fs by hand from the worker", s3fs_by_hand, {"space": hand}),
            (
                "(c) labkit trial.checkpoint to s3://",
                labkit_checkpoints,
                {
                    "where": lambda run: {
                        "checkpoints": f"s3://bench/{os.path.basename(run)}",
                        "storage_options": options,
                    }
                },
            ),
        ]
        medians, grown, _ = side_by_side(cases, size, scheduler, folder)
        b, c = (medians[label] for label, _, _ in cases)
        show_ratio("c/b: labkit / s3fs by hand", c / b, 1.2)
        print(
            f"    => client peak RSS growth with labkit's checkpoints on S3: "
            f"{grown[cases[1][0]]:.1f} MiB   (target <= 100)"
        )
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def pbt_part(size, scheduler, folder):
    """(3) PBT over 8 members with 50 MB states: the client's memory."""
    import labkit as lk

    members = 8
    print(
        f"\n[3] PBT: {members} members, {size['state_mb']} MB states, {size['pbt_steps']} "
        f"steps of {size['pause']} s, interval {size['pbt_interval']}"
    )
    run = tempfile.mkdtemp(prefix="pbt-", dir=folder)
    space = {
        "x": lk.uniform(0, 1),
        "lr": lk.uniform(0.01, 0.1),
        "steps": size["pbt_steps"],
        "pause": size["pause"],
        "state_mb": size["state_mb"],
    }
    pbt = lk.PBT(
        interval=size["pbt_interval"],
        quantile=0.25,
        mutations={"lr": lk.uniform(0.01, 0.1)},
        seed=0,
    )
    try:
        with PeakRSS() as rss:
            began = time.perf_counter()
            result = lk.sweep(
                pbt_member,
                space,
                trials=members,
                metric="score",
                mode="max",
                scheduler=scheduler,
                seed=0,
                search=pbt,
                name="pbt",
                store=os.path.join(run, "sweeps.db"),
                checkpoints=os.path.join(run, "checkpoints"),
            )
            took = time.perf_counter() - began
        print(f"    {'PBT, labkit checkpoints':42s} {took:6.2f} s   counts {result.counts()}")
        print(f"    => client peak RSS growth with PBT: {rss.grew_mb:.1f} MiB   (target <= 100)")
    finally:
        shutil.rmtree(run, ignore_errors=True)


# -- Ray Tune, in a Python of its own ------------------------------------------------------


def ray_trial(config):
    """Part 1's trial on Ray Tune: a checkpoint (np.save in a folder) after every epoch."""
    from ray import tune

    state = _state(config)
    for epoch in range(config["epochs"]):
        time.sleep(config["pause"])
        state[epoch] += 1.0
        metrics = {"loss": config["x"] / (epoch + 1)}
        if not config["checkpoint"]:
            tune.report(metrics)
            continue
        with tempfile.TemporaryDirectory() as place:
            np.save(os.path.join(place, "state.npy"), state)
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(place))


def ray_child(size: dict, folder: str) -> None:
    """Run in Ray's Python: print the seconds of Tune without and with checkpoints (JSON)."""
    import ray
    from ray import tune

    ray.init(num_cpus=size["workers"], include_dashboard=False, log_to_driver=False)
    took = {}
    try:
        for checkpoint in [False, True] * size["repeat"]:
            space = {
                "x": tune.uniform(0, 1),
                "epochs": size["epochs"],
                "pause": size["pause"],
                "state_mb": size["state_mb"],
                "checkpoint": checkpoint,
            }
            tuner = tune.Tuner(
                tune.with_resources(ray_trial, {"cpu": 1}),
                param_space=space,
                tune_config=tune.TuneConfig(num_samples=size["trials"], metric="loss", mode="min"),
                run_config=tune.RunConfig(
                    storage_path=folder,
                    name=f"bench-{checkpoint}-{time.time_ns()}",
                    verbose=0,
                    checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
                ),
            )
            began = time.perf_counter()
            tuner.fit()
            took.setdefault(str(checkpoint), []).append(time.perf_counter() - began)
    finally:
        ray.shutdown()
    print("RAY-TIMES " + json.dumps(took))


def ray_part(size, folder, python, labkit_ratio):
    """(4) Ray Tune with checkpoints to a local storage_path, beside labkit's ratio."""
    print(
        f"\n[4] Ray Tune on the trials of [1] ({size['workers']} CPUs), checkpoints to a "
        "local storage_path, one kept a trial"
    )
    if python is None:
        print(
            "    skipped: ray does not import here; pass --ray-python (a Python with "
            "ray[tune] installed for the benchmark only)"
        )
        return
    place = tempfile.mkdtemp(prefix="ray-", dir=folder)
    proc = subprocess.run(
        [python, os.path.abspath(__file__), "--ray-child", json.dumps(size), place],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RAY-TIMES ")), None)
    if proc.returncode != 0 or line is None:
        print(f"    skipped: Ray's run failed ({proc.returncode}): {proc.stderr[-1500:]}")
        return
    took = {k: statistics.median(v) for k, v in json.loads(line.split(" ", 1)[1]).items()}
    print(f"    {'(a) Ray Tune, no checkpoints':42s} median {took['False']:6.2f} s")
    print(f"    {'(c) Ray Tune, checkpoint every epoch':42s} median {took['True']:6.2f} s")
    show_ratio("Ray Tune: checkpoints / none", took["True"] / took["False"])
    if labkit_ratio is not None:
        show_ratio("labkit: checkpoints / none (from [1])", labkit_ratio)


def ray_python(given: str | None) -> str | None:
    """The Python to run Ray in: the one given, or this one if ray imports here."""
    if given:
        return given
    return sys.executable if importlib.util.find_spec("ray") is not None else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="every part at small sizes")
    parser.add_argument("--repeat", type=int, help="rounds (medians are printed)")
    parser.add_argument("--state-mb", type=float, help="MB of state a checkpoint (50)")
    parser.add_argument("--s3", action="store_true", help="also on S3 (moto's server)")
    parser.add_argument("--pbt", action="store_true", help="also PBT's client memory")
    parser.add_argument("--ray", action="store_true", help="also Ray Tune (--ray-python)")
    parser.add_argument("--ray-python", help="a Python where ray[tune] imports")
    parser.add_argument("--ray-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ray_child:
        ray_child(json.loads(args.ray_child[0]), args.ray_child[1])
        return
    import labkit as lk

    size = dict(SIZES["quick" if args.quick else "full"])
    if args.repeat:
        size["repeat"] = args.repeat
    if args.state_mb:
        size["state_mb"] = args.state_mb
    print(
        f"labkit checkpoints: {platform.node()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; command: {' '.join(sys.argv)}"
    )
    with (
        tempfile.TemporaryDirectory(prefix="labkit-bench-checkpoints-") as folder,
        lk.DaskScheduler(
            mode="processes", n_workers=size["workers"], threads_per_worker=1
        ) as scheduler,
    ):
        ratio = local_part(size, scheduler, folder)
        if args.s3 or args.quick:
            s3_part(size, scheduler, folder)
        if args.pbt or args.quick:
            pbt_part(size, scheduler, folder)
        if args.ray or args.quick:
            ray_part(size, folder, ray_python(args.ray_python), ratio)


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    main()
