"""What checkpointing a group trial's trainer costs, through the client and from rank 0 (issue 46).

A ``DataParallelTrainer`` on ``lk.DaskScheduler(mode="processes", n_workers=2)``
(what ``trial.scheduler`` is in a ``workers_per_trial=2`` sweep) holds a model
of 100 MB and 1 GB of float32 parameters (``nn.Linear`` layers), trained with
plain SGD (no optimizer state beside the parameters, so the state is the
size named).  Each figure is a median over rounds that alternate their order,
with the client's peak RSS growth beside it (sampled every 10 ms):

* **state_dict()**: ``trainer.state_dict()``, the state pulled through the client
  (rank 0's tensors gathered, then deep-copied: a snapshot);
* **before**: a checkpoint as a group trial had to write it before issue 46:
  ``state_dict()``, encoded on the client in labkit's safe format, written to the
  location from the client;
* **after**: ``trainer.write_checkpoint(location, key, step)``: rank 0 encodes
  and writes it on its worker, and only the reference comes back
  (what ``trial.checkpoint(trainer)`` calls);
* **restore before / after**: the reverse: the client reads and decodes the file
  and ``trainer.load_state_dict`` sends it to every rank, against
  ``trainer.read_checkpoint(location, ref)`` on a trainer made with
  ``sync_model=False`` (every rank reads the file itself; the default
  ``sync_model=True`` then copies the state into the user's model as after a fit,
  which is the state_dict() column's read).

The location is a folder on this machine's disk; its dirty pages are written
out (``os.sync()``) before each timed call.  It never asserts on a timing.

    python benchmarks/bench_group_checkpoint.py            # 100 MB and 1 GB, ~12 GB of memory
    python benchmarks/bench_group_checkpoint.py --sizes 100 --rounds 3   # one size, in MB
    python benchmarks/bench_group_checkpoint.py --quick    # a smoke test (4 MB)
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import labkit as lk  # noqa: E402
from labkit.checkpoints import CheckpointLocation  # noqa: E402
from labkit.data_parallel.state_file import decode_state, encode_state  # noqa: E402

SIZES = {"full": dict(mb=(100, 1000), rounds=2), "quick": dict(mb=(4,), rounds=1)}
#: Above this many MB the old restore (the state sent to every rank as a task's argument,
#: held by the scheduler in this process) is not run: at 1 GB it took over 9 GB here and
#: was killed for memory on a 24 GiB machine.  ``--restore-via-client`` runs it anyway.
RESTORE_VIA_CLIENT_MAX = 500
WIDTH = 2048  # columns of each layer (and rows of a batch's inputs)
ROWS = 8


def model_of(mb: float) -> nn.Module:
    """Linear layers ``WIDTH -> WIDTH`` holding about ``mb`` megabytes of float32 parameters."""
    per_layer = 4 * (WIDTH * WIDTH + WIDTH)
    layers = max(1, round(mb * 1e6 / per_layer))
    if layers == 1 and mb * 1e6 < per_layer:  # a small one: fewer rows
        rows = max(1, round(mb * 1e6 / (8 * WIDTH)))
        return nn.Sequential(nn.Linear(WIDTH, rows), nn.Linear(rows, WIDTH))
    with torch.no_grad():  # no need for a careful init: it is timed, not trained far
        model = nn.Sequential(*[nn.Linear(WIDTH, WIDTH) for _ in range(layers)])
    return model


def nbytes(model: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


class PeakRSS:
    """The client's peak resident memory above where it started, sampled every 10 ms."""

    def __enter__(self):
        self.start = self.peak = _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())

    @property
    def grew(self) -> float:
        return (self.peak - self.start) / 1e6


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def timed(fn) -> tuple[float, float]:
    """Seconds ``fn()`` took and the MB the client grew by meanwhile.

    The disk's dirty pages are written out first: a write of 1 GB right after
    another one is otherwise throttled to the disk's speed, and the second of two
    writes (before or after) paid for the first.
    """
    gc.collect()
    os.sync()
    with PeakRSS() as rss:
        started = time.perf_counter()
        fn()
        seconds = time.perf_counter() - started
    return seconds, rss.grew


def trainer_on(scheduler, mb: float, sync: bool):
    model = model_of(mb)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    trainer = lk.DataParallelTrainer(
        model, nn.functional.mse_loss, optimizer, scheduler=scheduler, sync_model=sync
    )
    x = torch.randn(ROWS, WIDTH)
    trainer.step(x, x)  # one step: the replicas hold trained parameters and their gradients
    return trainer


def measure(scheduler, mb: float, rounds: int, folder: str, old_restore: bool) -> dict:
    """Medians of each figure over ``rounds`` rounds, alternating before and after."""
    location = CheckpointLocation(folder)
    figures: dict = {k: [] for k in ("state_dict", "before", "after", "r_before", "r_after")}
    trainer = trainer_on(scheduler, mb, sync=False)
    refs = {}

    def before():
        state = trainer.state_dict()
        blob = encode_state(state, "the trainer")
        del state
        refs["before"] = location.write("before.lkc", blob, step=1)

    def after():
        refs["after"] = trainer.write_checkpoint(location, "after.lkc", step=1)

    def restore_before():
        ref = refs["before"]
        trainer.load_state_dict(decode_state(location.read(ref), ref.key))

    def restore_after():
        trainer.read_checkpoint(location, refs["after"])

    try:
        size = nbytes(trainer.model)
        for r in range(rounds):
            figures["state_dict"].append(timed(trainer.state_dict))
            order = [("before", before), ("after", after)]
            for name, fn in order if r % 2 == 0 else order[::-1]:
                figures[name].append(timed(fn))
            order = [("r_before", restore_before)] if old_restore else []
            order += [("r_after", restore_after)]
            for name, fn in order if r % 2 == 0 else order[::-1]:
                figures[name].append(timed(fn))
    finally:
        trainer.close()
        location.remove_all()
    nan = float("nan")
    medians = {
        k: (statistics.median(s for s, _ in v), max(g for _, g in v)) if v else (nan, nan)
        for k, v in figures.items()
    }
    return dict(medians, size=size, file=refs["after"].nbytes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test of a small size")
    parser.add_argument("--sizes", type=float, nargs="*", help="megabytes of parameters")
    parser.add_argument("--rounds", type=int, help="rounds a size (alternating order)")
    parser.add_argument(
        "--restore-via-client",
        action="store_true",
        help=f"the old restore above {RESTORE_VIA_CLIENT_MAX} MB too (memory)",
    )
    args = parser.parse_args()
    size = SIZES["quick" if args.quick else "full"]
    rounds = args.rounds or size["rounds"]
    print(
        f"labkit {lk.__version__}, torch {torch.__version__}, Python "
        f"{platform.python_version()}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}; 2 worker processes; plain SGD; medians of {rounds} "
        "rounds; seconds (client's peak RSS growth, the most of any round)"
    )
    header = (
        f"{'parameters':>10} | {'state_dict()':>20} | {'before: via client':>20} | "
        f"{'after: rank 0':>20} | {'before / after':>14} | {'restore via client':>20} | "
        f"{'restore on ranks':>20}"
    )
    print(header)
    print("-" * len(header))
    folder = tempfile.mkdtemp(prefix="labkit-bench-ckpt-")
    try:
        with lk.DaskScheduler(mode="processes", n_workers=2, threads_per_worker=1) as scheduler:
            for mb in args.sizes or size["mb"]:
                old = args.restore_via_client or mb <= RESTORE_VIA_CLIENT_MAX
                f = measure(scheduler, mb, rounds, folder, old)

                def cell(key, f=f):
                    return f"{f[key][0]:>7.3f} s ({f[key][1]:>5.0f} MB)"

                print(
                    f"{f['size'] / 1e6:>7.0f} MB | {cell('state_dict')} | {cell('before')} | "
                    f"{cell('after')} | {f['before'][0] / f['after'][0]:>13.2f}x | "
                    f"{cell('r_before')} | {cell('r_after')}",
                    flush=True,
                )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(
        f"restore via client: not run above {RESTORE_VIA_CLIENT_MAX} MB (nan) without "
        "--restore-via-client; before: state_dict() + encode + write from the client; after: "
        "trainer.write_checkpoint() from rank 0 (target: the client grows by ~0 MB); "
        f"load average at the end {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
