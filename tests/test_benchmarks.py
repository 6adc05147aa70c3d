"""The benchmark script runs end to end at small size (no timing is asserted)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_core_benchmarks_run_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_core.py"),
                           "--quick"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("[1] speed-up vs serial", "[2] raw time / labkit time",
                  "[3] labkit (plain function) / raw", "[4] peak RSS increase"):
        assert label in proc.stdout, label
    assert "eigenvalues parallel vs serial" in proc.stdout


def test_pipeline_benchmarks_run_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_pipeline.py"),
                           "--quick"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("labkit / hand-written (records/s)", "2 threads / 1 thread"):
        assert label in proc.stdout, label


def test_data_parallel_benchmarks_run_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks",
                                                        "bench_data_parallel.py"), "--quick"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("trainer / plain (samples/s)", "auto / even (samples/s)"):
        assert label in proc.stdout, label


def test_ensemble_benchmark_runs_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_ensemble.py"),
                           "--quick"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("StackingClassifier(n_jobs=2)", "sklearn time / labkit time",
                  "held-out accuracy"):
        assert label in proc.stdout, label


def test_collector_benchmark_runs_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks",
                                                        "bench_collector.py"), "--quick"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("=> as_completed / callback queue") == 2


def test_mode_benchmark_runs_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_modes.py"),
                           "--quick"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = proc.stdout.split("speed-up vs serial (medians):")[1]
    for config in ("processes 2x1 (old default)", "threads 1x2 in-process", "auto (the default)"):
        assert config in table, config
    assert "pure Python, client iterator" in table


def test_scaling_benchmark_runs_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_scaling.py"),
                           "--quick"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("ms/chunk") == 4


def test_join_benchmark_runs_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_join.py"),
                           "--quick"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    for config in ("processes 2x1", "auto (the default, in-process)"):
        client = next(l for l in lines if config in l and "join on the client" in l)
        workers = next(l for l in lines if config in l and "join on the workers" in l)
        # 4 chunks on 2 worker threads: 4 forks joined on the client, at most 2 from the workers
        assert "forks joined   4" in client
        assert int(workers.split("forks joined")[1].split()[0]) <= 2


def test_copies_benchmark_runs_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_copies.py"),
                           "--quick"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    per_chunk = {line.split(" median")[0].strip(): float(line.split("(")[-1].split("x")[0])
                 for line in proc.stdout.splitlines() if "loopback" in line}
    # a pickled chunk crosses the socket whole; a shared one and a referenced one do not
    assert per_chunk["processes 2x1, pickled through the socket"] >= 1.0
    assert per_chunk["processes 2x1, shared memory"] < 0.5
    assert per_chunk["auto (in-process, by reference)"] < 0.5


def test_sweep_benchmark_runs_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_sweep.py"),
                           "--quick"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("labkit, auto (2 threads), store on", "two plain threads",
                  "(target <= 2 ms with the store on)", "random search's time",
                  "trivial trial on worker processes", "board + dashboard (a session open)",
                  "resume thirty: call to first new trial", "bytes a report costs on disk",
                  "with lk.board(run)", "stored sweep: lk.load_sweep"):
        assert label in proc.stdout, label


def test_default_cluster_benchmark_runs_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks",
                                                        "bench_default_cluster.py"), "--quick"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("samples/s   set-up") == 10  # 2 modes x 3 kinds, 1, 3
    assert "thread replicas, mode='auto', Dask arrays (X, Y)" in proc.stdout


def test_channels_benchmark_runs_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_channels.py"),
                           "--quick"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("dask Queue", "dask actor method", "client.run there, log_event back",
                  "socket, Nagle off (a slot's line)", "a Dask task a message"):
        assert label in proc.stdout, label


def test_store_changes_benchmark_runs_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks",
                                                        "bench_store_changes.py"), "--quick"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("idle", "100 reports of 10 running", "100 reports of 100 new trials"):
        assert label in proc.stdout, label


def test_groups_benchmark_runs_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_groups.py"),
                           "--quick"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("sweep / ideal", "idle worker-seconds", "speed-up (one after another / sweep)",
                  "a trial's wall in the sweep / alone"):
        assert label in proc.stdout, label
    # placement: no two trials that ran at once shared a worker
    assert "shared-worker overlaps                         0 (placement: 0)" in proc.stdout


def test_group_kill_benchmark_runs_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_group_kill.py"),
                           "--quick"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "with a kill (s)" in proc.stdout and "median cost" in proc.stdout
    # the one killed run redid at most the steps of one checkpoint interval (5 with --quick)
    row = next(line for line in proc.stdout.splitlines() if line.startswith("| ") and line[2].isdigit())
    assert 0 <= int(row.split("|")[4]) <= 5


def test_model_sync_benchmark_runs_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_model_sync.py"),
                           "--quick"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "parameters" in proc.stdout and "copy" in proc.stdout, proc.stdout[-2000:]


def test_checkpoints_benchmark_runs_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks",
                                                        "bench_checkpoints.py"), "--quick"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("(b) np.save by hand from the worker", "(c) labkit trial.checkpoint",
                  "c/b: labkit / np.save by hand", "client peak RSS growth with labkit's",
                  "(c) labkit trial.checkpoint to s3://", "c/b: labkit / s3fs by hand",
                  "client peak RSS growth with PBT", "[4] Ray Tune"):
        assert label in proc.stdout, label


def test_pareto_view_benchmark_runs_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks",
                                                        "bench_pareto_view.py"), "--quick"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("pareto part of a delta", "fold + delta CPU", "pareto part of a paint at 1000"):
        assert label in proc.stdout, label
