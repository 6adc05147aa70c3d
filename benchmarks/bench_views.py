"""What the live views cost a training: the board and the dashboard open vs none.

Run ``python benchmarks/bench_views.py`` (full size: PCA on 40 chunks, a few
seconds each training, 5 repetitions of each variant, about two minutes on
2 cores; three and a half with ``--split``) or ``python benchmarks/bench_views.py
--quick`` (a smoke test).  It prints timings and ratios; it never asserts on
timings.

All variants train a PCA with ``ParallelFlow`` on the same default
``DaskScheduler()`` (in-process, a thread per core); the chunks are generated on the workers (a Dask array), so
the client only schedules and listens.  The variants alternate their order
on each repetition; medians are compared.

* **none**: ``flow.train(..., wait=True)``: nothing listens to the scheduler.
* **run**: ``flow.train(..., wait=False)`` then ``run.result()``, no view: a
  ``Run`` keeps its events for late subscribers, so it listens itself.
* **views**: before the training, ``lk.dashboard(s)`` serves the Bokeh
  dashboard and a Bokeh client session in a separate process (standing for a
  browser tab) keeps it open; right after ``train`` returns the run,
  ``lk.board(run)`` builds the board on it.  The board runs outside a kernel
  here: a recording stand-in patched into ``comm.create_comm`` takes its comm
  messages (serialising each, as a kernel would) and counts them.  The
  dashboard's update rate is the number of document patches its session
  received per second of training.  Setting up and tearing down the views
  is not timed.  ``--split`` also times the board alone and the dashboard
  alone.  The CPU each thread of this process used during the trainings is
  printed too (it shows which view costs what).

The script also runs itself as that dashboard session: ``--viewer URL``.

``--stored STORE`` (issue 44) times instead the board of a stored sweep,
``lk.board(lk.load_sweep(STORE, NAME))`` (``--name``; the 10,000-trial sweep of
``sweep_scale.py`` by default): seconds and CPU seconds of this process from the
load to its paint, the bytes its messages carried (goal: <= 1 MB, <= 2 s) and the
largest of them after its code (goal: <= 100 KB), medians of ``--reps`` (3).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

SIZES = {
    "full": dict(n_chunks=40, rows=20_000, dim=300, reps=5),
    "quick": dict(n_chunks=8, rows=2_000, dim=40, reps=1),
}
SEED = 20240601
OUTPUT_DIM = 20
TARGET = 1.03          # views/none median time, at most
BURST_GAP = 0.1        # seconds between two dashboard updates, at least (it polls at 5 Hz)


# -- data and training -------------------------------------------------------------------

def make_chunk(i: int, rows: int, dim: int) -> np.ndarray:
    """Chunk ``i``: seeded normal data with a graded spectrum."""
    x = np.random.default_rng(SEED + i).standard_normal((rows, dim))
    x *= np.linspace(0.5, 2.0, dim)
    return x


def worker_array(cfg):
    """The chunks as a Dask array whose blocks are generated on the workers."""
    import dask
    import dask.array as da
    blocks = [da.from_delayed(dask.delayed(make_chunk, pure=False)(i, cfg["rows"], cfg["dim"]),
                              shape=(cfg["rows"], cfg["dim"]), dtype=np.float64)
              for i in range(cfg["n_chunks"])]
    return da.concatenate(blocks, axis=0)


def start_training(s, cfg, wait: bool = False):
    """A new PCA flow and a function that trains it (in the background unless ``wait``)."""
    import labkit as lk
    from labkit.nodes.pca import PCA
    flow = lk.ParallelFlow([PCA(output_dim=OUTPUT_DIM)])
    source = worker_array(cfg)
    return flow, lambda: flow.train([source], scheduler=s, wait=wait)


# -- the board's comm messages -------------------------------------------------------------

def _label(msg_type: str, data) -> str:
    """What a comm message carries, in a word: its method and a custom message's kind or the
    state keys it sets (``comm_open`` for a widget's first message)."""
    if msg_type != "comm_msg" or not isinstance(data, dict):
        return msg_type
    method = data.get("method", "")
    content = data.get("content")
    if method == "custom" and isinstance(content, dict):
        return f"custom:{content.get('kind', '')}"
    state = data.get("state")
    return f"{method}:{','.join(sorted(state))}" if isinstance(state, dict) else method


class CommRecorder:
    """Patches ``comm.create_comm`` with a comm that serialises and records every message."""

    def __init__(self):
        self.records: list[tuple[float, str, int]] = []   # (time, msg_type, bytes)
        self.labels: list[str] = []   # what each record was: "custom:paint", "update:last", ...
        self._lock = threading.Lock()
        self._original = None

    def _comm_class(self):
        from comm.base_comm import BaseComm
        recorder = self

        class RecordingComm(BaseComm):
            """A comm with no kernel: what it would publish is serialised and counted."""

            def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
                size = len(json.dumps(data, default=str)) + sum(
                    memoryview(b).nbytes for b in buffers or ())
                with recorder._lock:
                    recorder.records.append((time.perf_counter(), msg_type, size))
                    recorder.labels.append(_label(msg_type, data))

        return RecordingComm

    def install(self) -> "CommRecorder":
        import comm
        cls = self._comm_class()
        self._original = comm.create_comm
        comm.create_comm = lambda *args, **kwargs: cls(*args, **kwargs)
        return self

    def uninstall(self) -> None:
        import comm
        if self._original is not None:
            comm.create_comm, self._original = self._original, None

    def between(self, t0: float, t1: float) -> tuple[int, int]:
        """Messages and bytes recorded in ``[t0, t1]``."""
        with self._lock:
            picked = [size for t, _, size in self.records if t0 <= t <= t1]
        return len(picked), sum(picked)


# -- the dashboard's session ----------------------------------------------------------------

class DashboardViewer:
    """A Bokeh client session on the dashboard, in a child process; counts its patches."""

    def __init__(self, url: str, timeout: float = 60):
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--viewer", url],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self._read(timeout)
        if line != "connected":
            self.close()
            raise RuntimeError(f"the dashboard session did not connect: {line!r}")

    def _read(self, timeout: float) -> str:
        """One line from the child, or a RuntimeError after ``timeout`` seconds."""
        out: list[str] = []
        reader = threading.Thread(target=lambda: out.append(self.proc.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(timeout)
        if not out:
            raise RuntimeError(f"no answer from the dashboard session in {timeout:.0f} s")
        return out[0].strip()

    def counts(self) -> tuple[int, int]:
        """Patches and updates (bursts of patches) received so far."""
        self.proc.stdin.write("mark\n")
        self.proc.stdin.flush()
        _, patches, updates = self._read(30).split()
        return int(patches), int(updates)

    def close(self) -> None:
        """Close the session and end the child (by its pid, killed if it does not exit)."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc.stdout.close()


def viewer_main(url: str) -> None:
    """The child: pull a session, count PATCH-DOC messages, answer ``mark`` lines on stdin.

    An update is a burst of patches (one periodic callback of the server may
    send several); a gap of more than ``BURST_GAP`` seconds starts a new one.
    """
    from bokeh.client import pull_session
    from bokeh.client.session import ClientSession
    state = {"patches": 0, "updates": 0, "last": 0.0}
    handle_patch = ClientSession._handle_patch

    def counting(self, message):
        now = time.perf_counter()
        state["patches"] += 1
        state["updates"] += now - state["last"] > BURST_GAP
        state["last"] = now
        handle_patch(self, message)

    ClientSession._handle_patch = counting
    session = pull_session(url=url)
    loop = session._connection.io_loop

    def answer():
        print(f"patches {state['patches']} {state['updates']}", flush=True)

    def commands():
        for line in sys.stdin:
            if line.strip() == "mark":
                loop.add_callback(answer)
        loop.add_callback(session.close)

    threading.Thread(target=commands, daemon=True).start()
    print("connected", flush=True)
    session._connection.loop_until_closed()   # bokeh 3: a private name on the session


# -- the variants ------------------------------------------------------------------------------

def thread_cpu() -> dict[str, float]:
    """CPU seconds (user + system) of each live thread of this process, by thread name."""
    import psutil
    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict[str, float] = {}
    for t in psutil.Process().threads():
        name = names.get(t.id, "other (not a Python thread)")
        name = name.split(" (")[0].rstrip("-0123456789") or name   # group numbered threads
        out[name] = out.get(name, 0.0) + t.user_time + t.system_time
    return out


def cpu_delta(before: dict, after: dict) -> dict:
    return {k: after[k] - before.get(k, 0.0) for k in after if after[k] - before.get(k, 0.0) > 0}


def train_plain(s, cfg, wait: bool = True):
    """No views: the training alone, blocking or as a background Run."""
    flow, train = start_training(s, cfg, wait)
    threads0, c0, t0 = thread_cpu(), time.process_time(), time.perf_counter()
    run = train()
    if not wait:
        run.result()
    c1, t1 = time.process_time(), time.perf_counter()
    return t1 - t0, dict(cpu=c1 - c0, threads=cpu_delta(threads0, thread_cpu()))


def wait_stopped(board, timeout: float = 30) -> None:
    """Wait for the board's writer to draw the end and stop."""
    deadline = time.monotonic() + timeout
    while board.writer is not None and board.writer.running and time.monotonic() < deadline:
        time.sleep(0.05)


def train_with_views(s, cfg, recorder: CommRecorder, board: bool = True,
                     dashboard: bool = True):
    """The dashboard open in a session and/or the board on the run; set-up is not timed."""
    import labkit as lk
    from labkit.views.bokeh.dashboard import stop_dashboard
    viewer = DashboardViewer(lk.dashboard(s)) if dashboard else None
    try:
        flow, train = start_training(s, cfg)
        if viewer is not None:
            time.sleep(0.5)                        # the session's first updates pass
        p0, u0 = viewer.counts() if viewer else (0, 0)
        threads0, c0, t0 = thread_cpu(), time.process_time(), time.perf_counter()
        run = train()
        shown = lk.board(run) if board else None
        run.result()
        c1, t1 = time.process_time(), time.perf_counter()
        threads = cpu_delta(threads0, thread_cpu())
        p1, u1 = viewer.counts() if viewer else (0, 0)
        if shown is not None:
            wait_stopped(shown)
            shown.close()
    finally:
        if viewer is not None:
            viewer.close()
            stop_dashboard(s)
    elapsed = t1 - t0
    messages, nbytes = recorder.between(t0, t1)
    return elapsed, dict(cpu=c1 - c0, threads=threads, msgs_per_s=messages / elapsed,
                         bytes_per_s=nbytes / elapsed, messages=messages,
                         patches_per_s=(p1 - p0) / elapsed, updates_per_s=(u1 - u0) / elapsed,
                         spans=shown.lanes.sent if shown is not None and shown.lanes else None)


# -- reporting --------------------------------------------------------------------------------

def alternate(variants: dict, reps: int) -> dict:
    """Each variant ``reps`` times, the order reversed every repetition: name -> (times, info)."""
    out = {name: ([], []) for name in variants}
    names = list(variants)
    for r in range(reps):
        for name in (names if r % 2 == 0 else names[::-1]):
            gc.collect()
            seconds, info = variants[name]()
            out[name][0].append(seconds)
            out[name][1].append(info)
    return out


def show(name: str, times: list[float]) -> float:
    median = statistics.median(times)
    runs = ", ".join(f"{t:.3f}" for t in times)
    print(f"  {name:<44} median {median:8.3f} s   (runs: {runs})")
    return median


def describe_machine() -> None:
    import bokeh
    import dask
    import ipywidgets
    print(f"python {platform.python_version()}, numpy {np.__version__}, dask {dask.__version__}, "
          f"bokeh {bokeh.__version__}, ipywidgets {ipywidgets.__version__}")
    print(f"{os.cpu_count()} cores, {platform.system()}; load average {os.getloadavg()[0]:.2f}")


LABELS = {"none": "no views (wait=True)", "run": "no views, a Run (wait=False)",
          "views": "board + dashboard open",
          "board": "board only", "dashboard": "dashboard only"}


def median_of(infos: list[dict], key: str) -> float:
    return statistics.median(i[key] for i in infos)


def busiest_threads(infos: list[dict], n: int = 6) -> str:
    """The threads that used the most CPU, mean seconds per training."""
    total: dict[str, float] = {}
    for info in infos:
        for name, seconds in info["threads"].items():
            total[name] = total.get(name, 0.0) + seconds / len(infos)
    top = sorted(total.items(), key=lambda kv: -kv[1])[:n]
    return ", ".join(f"{name} {seconds:.2f}" for name, seconds in top)


def report(results: dict) -> None:
    medians = {name: show(LABELS[name], times) for name, (times, _) in results.items()}
    ratio = medians["views"] / medians["none"]
    verdict = "met" if ratio <= TARGET else "MISSED"
    print(f"  => views / none (median time)                {ratio:6.3f}   "
          f"target <= {TARGET}  [{verdict}]")
    print(f"  => slower by                                 {100 * (ratio - 1):+6.1f} %")
    print(f"  => views / a Run without views (median time) "
          f"{medians['views'] / medians['run']:6.3f}")
    for name in ("run", "board", "dashboard"):
        if name in medians:
            print(f"  => {name} / none (median time){'':<{26 - len(name)}} "
                  f"{medians[name] / medians['none']:6.3f}")
    print("  client process CPU per training (all threads, median):")
    for name, (_, infos) in results.items():
        print(f"    {LABELS[name]:<30} {median_of(infos, 'cpu'):6.2f} s   busiest threads (s): "
              f"{busiest_threads(infos)}")
    infos = results["views"][1]
    print(f"  board comm messages per second               {median_of(infos, 'msgs_per_s'):6.1f}"
          f"   ({median_of(infos, 'bytes_per_s') / 1024:.1f} KiB/s; "
          f"{median_of(infos, 'messages'):.0f} messages a training)")
    print(f"  dashboard updates per second (session)       "
          f"{median_of(infos, 'updates_per_s'):6.1f}   "
          f"({median_of(infos, 'patches_per_s'):.1f} PATCH-DOC messages/s)")
    print(f"  task spans the lanes sent per training        {[i['spans'] for i in infos]}")


def variants(s, cfg, recorder, split: bool) -> dict:
    """The variants to alternate: none and views; board only and dashboard only with split."""
    out = {"none": lambda: train_plain(s, cfg, wait=True),
           "run": lambda: train_plain(s, cfg, wait=False),
           "views": lambda: train_with_views(s, cfg, recorder)}
    if split:
        out["board"] = lambda: train_with_views(s, cfg, recorder, dashboard=False)
        out["dashboard"] = lambda: train_with_views(s, cfg, recorder, board=False)
    return out


def stored_board(path: str, name: str, reps: int) -> None:
    """The board of a stored sweep: time and CPU to its paint, what its messages carried."""
    import labkit as lk
    recorder = CommRecorder().install()
    walls, cpus, sent = [], [], []
    try:
        for _ in range(reps):
            gc.collect()
            mark = len(recorder.records)
            c0, t0 = time.process_time(), time.perf_counter()
            board = lk.board(lk.load_sweep(path, name))
            wait_stopped(board)
            with recorder._lock:
                records = list(zip(recorder.labels[mark:], recorder.records[mark:], strict=True))
            painted = max(r[0] for label, r in records if label == "custom:paint")
            walls.append(painted - t0)
            cpus.append(time.process_time() - c0)       # to its end: the paint is its last
            board.close()
            sent.append([(label, r[2]) for label, r in records])
    finally:
        recorder.uninstall()
    last = sent[-1]
    data = [(n, label) for label, n in last if label != "comm_open" or n < 10_000]  # not code
    print(f"stored board of {name!r} ({path}): painted after {statistics.median(walls):.2f} s "
          f"(goal <= 2; runs {', '.join(f'{w:.2f}' for w in walls)}), CPU "
          f"{statistics.median(cpus):.2f} s; {len(last)} messages, "
          f"{sum(n for _, n in last) / 1e6:.2f} MB in all (goal <= 1), largest but the code "
          f"{max(data)[0] / 1e3:.1f} KB ({max(data)[1]}; goal <= 100); "
          f"load average {os.getloadavg()[0]:.2f}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke test")
    parser.add_argument("--reps", type=int, help="repetitions of each variant")
    parser.add_argument("--split", action="store_true",
                        help="also time the board alone and the dashboard alone")
    parser.add_argument("--chunks", type=int,
                        help="chunks a training (40 by default): longer trainings show how "
                             "much of the cost is once per board and how much per second")
    parser.add_argument("--mode", default="auto",
                        help="the DaskScheduler's mode (auto by default; processes: the "
                             "views no longer share the GIL with the tasks)")
    parser.add_argument("--viewer", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--stored", metavar="STORE",
                        help="time the board of a stored sweep (issue 44) instead")
    parser.add_argument("--name", default="scale-board", help="the stored sweep's name")
    args = parser.parse_args(argv)
    if args.viewer:
        return viewer_main(args.viewer)
    if args.stored:
        return stored_board(args.stored, args.name, args.reps or 3)
    cfg = dict(SIZES["quick" if args.quick else "full"])
    cfg["reps"] = args.reps or cfg["reps"]
    cfg["n_chunks"] = args.chunks or cfg["n_chunks"]
    import labkit as lk

    print(f"labkit views benchmark ({'quick' if args.quick else 'full'}): {' '.join(sys.argv)}")
    print(time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    describe_machine()
    print(f"PCA on {cfg['n_chunks']} chunks of {cfg['rows']}x{cfg['dim']} generated on the "
          f"workers; DaskScheduler(mode={args.mode!r}); {cfg['reps']} repetitions")
    recorder = CommRecorder().install()
    t_start = time.perf_counter()
    try:
        with lk.DaskScheduler(mode=args.mode) as s:
            train_plain(s, dict(cfg, n_chunks=2))                    # workers warm up
            train_with_views(s, dict(cfg, n_chunks=2), recorder)    # imports, BokehJS models
            results = alternate(variants(s, cfg, recorder, args.split), cfg["reps"])
    finally:
        recorder.uninstall()
    report(results)
    print(f"({time.perf_counter() - t_start:.0f} s in all; load average now "
          f"{os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
