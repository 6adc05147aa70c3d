"""A sweep at the size users reach, with and without its board (``bench_sweep.py --only scale``).

10,000 trials on the embedded default cluster (``lk.DaskScheduler()``, two
threads here), the store on; each trial reports up to 30 steps, each after
2 ms of GIL-free work (``time.sleep``); ASHA ``min_steps=2, reduction=3``
stops most of them early.  The same sweep runs with no view and with
``lk.board(run)`` attached (its comm messages serialised and counted as a
kernel would send them, ``bench_views.CommRecorder``), in alternating order.
Printed: the wall times and their ratio (goal <= 1.05), the board's first
paint and its frames after it (largest, mean, bytes a second; goals: no
frame over 100 KB, <= 200 KB/s), the board of the stored sweep
(``lk.board(lk.load_sweep(...))``: seconds and bytes to its first paint;
goals <= 2 s, <= 1 MB) and ``lk.load_sweep``'s own time.
"""

from __future__ import annotations

import os
import statistics
import time

import labkit as lk

__all__ = ["scale", "SCALE_SIZES"]

SCALE_SIZES = {"full": dict(trials=10_000, steps=30, pause=0.002, repeat=1),
               "quick": dict(trials=100, steps=10, pause=0.002, repeat=1)}


def steps(config, trial):
    """Up to ``steps`` reports, each after ``pause`` s of GIL-free work."""
    loss = 1.0 + config["x"]
    for step in range(1, config["steps"] + 1):
        time.sleep(config["pause"])
        loss *= 0.9 + 0.05 * config["x"]
        trial.report(step, loss=loss)
    return {"loss": loss}


def one_sweep(s, size: dict, store: str, name: str, board: bool, recorder) -> dict:
    """Wall seconds of one sweep, and what its board sent (when it had one)."""
    space = {"x": lk.uniform(0, 1), "y": lk.loguniform(1e-4, 1), "c": lk.choice(["a", "b", "c"]),
             "steps": size["steps"], "pause": size["pause"]}
    mark = len(recorder.records)
    t0 = time.perf_counter()
    run = lk.sweep(steps, space, trials=size["trials"], metric="loss", mode="min", scheduler=s,
                   seed=0, store=store, name=name, early_stop=lk.ASHA(min_steps=2, reduction=3),
                   wait=False)
    shown = lk.board(run) if board else None
    result = run.result()
    wall = time.perf_counter() - t0
    out = {"wall": wall, "trials": len(result.trials)}
    if shown is not None:
        import bench_views
        bench_views.wait_stopped(shown)
        shown.close()
        out["sent"] = list(zip(recorder.labels[mark:], (r[2] for r in recorder.records[mark:]),
                               strict=True))
    return out


def stored_board(store: str, name: str, recorder) -> tuple[float, float, int]:
    """Seconds to load the stored sweep; seconds to its board's paint, and the bytes sent."""
    import bench_views
    t0 = time.perf_counter()
    result = lk.load_sweep(store, name)
    loaded = time.perf_counter() - t0
    mark = len(recorder.records)
    board = lk.board(result)
    bench_views.wait_stopped(board)
    sent = list(zip(recorder.labels[mark:], recorder.records[mark:], strict=True))
    painted = max((r[0] for label, r in sent if label == "custom:paint"), default=float("nan"))
    board.close()
    return loaded, painted - t0, sum(r[2] for _, r in sent)


def frames_line(sent: list, seconds: float) -> str:
    """The board's messages: its paints, the largest other message, bytes a second."""
    paints = [n for label, n in sent if label == "custom:paint"]
    deltas = [n for label, n in sent if label == "custom:delta"] or [0]
    others = [(n, label) for label, n in sent if label not in ("custom:paint", "custom:delta")]
    # the kept frame: its parts and their index (``update:kept_<i>``, ``update:kept``)
    kept = sum(n for label, n in sent if label.startswith("update:kept"))
    after = sum(deltas) + sum(paints[1:])
    big = max(others, default=(0, "-"))
    shown = ", ".join(f"{p / 1e3:.1f}" for p in paints)
    return (f"    board: {len(sent)} messages; paints {shown} KB; {len(deltas)} deltas, largest "
            f"{max(deltas) / 1e3:.1f} KB (goal <= 100), mean "
            f"{statistics.mean(deltas) / 1e3:.1f} KB; after the first paint "
            f"{after / seconds / 1e3:.1f} KB/s (goal <= 200); the last frame kept in the widget "
            f"{kept / 1e3:.1f} KB at the end, in parts of <= 100 KB; largest other message {big[0] / 1e3:.1f} KB "
            f"({big[1]})")


def scale(size: dict, folder: str) -> None:
    """Print the 10,000-trial case."""
    import bench_views
    recorder = bench_views.CommRecorder().install()
    walls: dict[str, list] = {"none": [], "board": []}
    frames: list[list] = []
    try:
        with lk.DaskScheduler() as s:
            for r in range(size["repeat"]):
                for kind in (("none", "board") if r % 2 == 0 else ("board", "none")):
                    store = os.path.join(folder, f"scale-{kind}-{r}.db")
                    out = one_sweep(s, size, store, f"scale-{kind}", kind == "board", recorder)
                    walls[kind].append(out["wall"])
                    if kind == "board":
                        frames.append(out["sent"])
                        last_store = store
        loaded, first, sent = stored_board(last_store, "scale-board", recorder)
    finally:
        recorder.uninstall()
    none, board = statistics.median(walls["none"]), statistics.median(walls["board"])
    print(f"\n[6] {size['trials']:,} trials x up to {size['steps']} reports of "
          f"{size['pause'] * 1e3:.0f} ms, ASHA(min_steps=2, reduction=3), store on, default "
          f"cluster; median of {size['repeat']}")
    print(f"    no view {none:.1f} s, with lk.board(run) {board:.1f} s => {board / none:.3f}x "
          "(goal <= 1.05)")
    print(frames_line(frames[0], walls["board"][0]))
    print(f"    stored sweep: lk.load_sweep {loaded:.2f} s; lk.board of it painted after "
          f"{first:.2f} s (goal <= 2), {sent / 1e6:.2f} MB sent (goal <= 1)")
