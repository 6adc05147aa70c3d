"""Soak: SIGKILL a worker at every point of a full-batch fit on Dask arrays, under load.

Each run builds a trainer on ``lk.DaskScheduler(mode="processes")``, fits one
full batch an epoch on Dask arrays, and kills one rank's worker process at
one point of the fit:

``start``     the client, as the epoch starts (before its tasks run: racing their submission)
``forward``   the rank itself, in its replica's forward (before the step's collective)
``backward``  the rank itself, during backward (its gradient buckets' collectives in flight)
``commit``    the rank itself, taking the commit after the step (``state_dict`` in ``take_commit``)
``fetch``     the rank itself, while the client fetches its state (``state_dict`` in ``get_state``)
``end``       the client, as the fit returns (releasing its blocks, fetching the state)
``random``    the client, at a random moment of the fit

A run ends well when the fit recovers (or raises a labkit error, a
``WorkerLostError`` above all) and the calls after it (the state, a second fit,
``close``) return, each within ``--deadline`` seconds.  A call past its
deadline is a hang: the client's threads (``sys._current_frames``) and the workers'
(``client.call_stack``) are written to ``--out``.  ``--load N`` runs N busy
processes beside it, started and ended by this script.

    python benchmarks/soak_fit_kill.py --runs 40 --load 2 --workers 2 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import dask
import numpy as np
import torch
from torch import nn

import labkit as lk
from labkit.data_parallel import DataParallelTrainer

POINTS = ("start", "forward", "backward", "commit", "fetch", "end", "random")
IN_RANK = {"forward", "backward", "commit", "fetch"}


class Victim(nn.Module):
    """``x @ w``, killing its own worker process at ``point`` once ``flag`` names that process."""

    def __init__(self, flag: str, point: str):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(8, 1, dtype=torch.float64))
        self.flag, self.point = flag, point

    def _maybe_die(self, point: str) -> None:
        if point != self.point or not os.path.exists(self.flag):
            return
        with open(self.flag) as f:
            if f.read() == str(os.getpid()):
                os.kill(os.getpid(), signal.SIGKILL)

    def forward(self, x):
        out = x @ self.w
        if self.training:
            self._maybe_die("forward")
            if out.requires_grad:
                out.register_hook(lambda g: (self._maybe_die("backward"), g)[1])
        return out

    def state_dict(self, *args, **kwargs):
        caller = sys._getframe(1).f_code.co_name
        self._maybe_die("commit" if caller == "take_commit" else "fetch")
        return super().state_dict(*args, **kwargs)


class Hang(Exception):
    """A call did not return within its deadline."""


def within(seconds: float, what: str, fn, log, client):
    """``fn()``, or :class:`Hang` after ``seconds`` with every stack written to ``log``."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - reported to the caller
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        log.write(f"\n==== HANG in {what} after {seconds} s: client threads\n")
        log.flush()
        for ident, frame in sys._current_frames().items():
            log.write(f"\n-- thread {ident}\n{''.join(traceback.format_stack(frame))}")
        with contextlib.suppress(Exception):
            stacks = client.call_stack()
            log.write(f"\n==== worker call stacks\n{json.dumps(stacks, indent=1, default=str)}\n")
        log.flush()
        thread.join(seconds)  # how long it holds on after the dump
        raise Hang(f"{what} did not return within {seconds} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def one_run(scheduler, point: str, rng: random.Random, deadline: float, log) -> str:
    """One fit with a kill at ``point``: its outcome in a word."""
    import dask.array as da

    client = scheduler.client
    rows, epochs = 400, 4
    gen = np.random.default_rng(rng.randrange(1 << 30))
    x = gen.standard_normal((rows, 8))
    X = da.from_array(x, chunks=(100, 8))
    Y = da.from_array(gen.standard_normal((rows, 1)), chunks=(100, 1))
    flag = tempfile.mktemp(prefix="labkit-soak-")
    model = Victim(flag, point)
    try:
        t = within(
            deadline,
            "trainer",
            lambda: DataParallelTrainer(
                model,
                nn.MSELoss(),
                torch.optim.SGD(model.parameters(), lr=0.01),
                scheduler=scheduler,
            ),
            log,
            client,
        )
    except (Hang, lk.LabkitError) as exc:  # before any kill: a worker that came back, slow
        log.write(f"\n---- set-up before the kill: {type(exc).__name__}: {exc}\n")
        return f"set-up {type(exc).__name__}" if not isinstance(exc, Hang) else f"HANG {exc}"
    rank = rng.randrange(len(t.names))
    victim = t.names[rank]
    pid = client.run(os.getpid, workers=[victim])[victim]
    kill_epoch = rng.randrange(epochs)

    def kill():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    def arm():
        if point in IN_RANK:
            with open(flag + ".tmp", "w") as f:
                f.write(str(pid))
            os.replace(flag + ".tmp", flag)
        elif point == "start":
            kill()

    def on_event(event):
        if type(event).__name__ == "PhaseStarted" and event.phase == kill_epoch:
            arm()

    if point != "end":
        t.subscribe(on_event)
    if point == "random":
        threading.Timer(rng.uniform(0.0, 3.0), kill).start()
    outcome = "?"
    try:
        run = t.fit((X, Y), batch_size=rows, epochs=epochs, shuffle=False, wait=False)
        if point == "end":
            threading.Thread(target=lambda: (run.done() or run.exception(None), kill())).start()
        try:
            within(deadline, f"fit ({point}, rank {rank})", lambda: run.result(), log, client)
            outcome = "recovered"
        except lk.WorkerLostError:
            outcome = "WorkerLostError"
        except lk.LabkitError as err:
            outcome = f"{type(err).__name__}"
            log.write(f"\n---- {point} rank {rank}: {type(err).__name__}: {err}\n")
        if point == "fetch" or outcome == "recovered":
            arm() if point == "fetch" else None
            with contextlib.suppress(lk.LabkitError):
                within(deadline, f"state ({point})", t.state_dict, log, client)
            with contextlib.suppress(lk.LabkitError):
                within(
                    deadline,
                    f"second fit ({point})",
                    lambda: t.fit((X, Y), batch_size=rows, epochs=1),
                    log,
                    client,
                )
    except Hang as hang:
        outcome = f"HANG {hang}"
    finally:
        try:
            within(deadline, f"close ({point})", t.close, log, client)
        except Hang as hang:
            outcome = f"{outcome}; HANG {hang}"
        except Exception as exc:  # noqa: BLE001
            outcome = f"{outcome}; close raised {type(exc).__name__}: {exc}"
        with contextlib.suppress(FileNotFoundError):
            os.remove(flag)
        kill()  # a kill point never reached (a fit that ended first): the worker goes anyway
        gone(client, victim)
    return f"{outcome} (rank {rank} of {len(t.names) + (outcome == 'recovered')})"


def gone(client, victim: str, within_s: float = 120.0) -> None:
    """Until the scheduler no longer lists ``victim`` (the next run must not pick it)."""
    from labkit.scheduling.dask.connect import scheduler_identity

    deadline = time.monotonic() + within_s
    while victim in scheduler_identity(client)["workers"] and time.monotonic() < deadline:
        time.sleep(0.1)


def busy(n: int) -> list:
    """``n`` busy processes (ended by :func:`end`)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def end(processes: list) -> None:
    for p in processes:
        p.kill()
        p.wait()


def runs(n: int, args, rng: random.Random, log, tally: dict) -> None:
    """``args.runs`` runs on clusters of ``n`` workers: a new cluster when one lacks a worker
    (Dask's LocalCluster closes a nanny whose worker came back too late, under load)."""
    i = 0
    while i < args.runs:
        with lk.DaskScheduler(mode="processes", n_workers=n) as s:
            if args.verbose:
                verbose()
            while i < args.runs:
                try:
                    s.client.wait_for_workers(n, timeout=120)
                except Exception:  # noqa: BLE001 - a nanny closed for good: a new cluster
                    log.write(f"run {i}: a new cluster (a worker did not come back)\n")
                    break
                point = args.points[i % len(args.points)]
                started = time.monotonic()
                outcome = one_run(s, point, rng, args.deadline, log)
                took = time.monotonic() - started
                key = (n, point, "HANG" if "HANG" in outcome else outcome.split(" ")[0])
                tally[key] = tally.get(key, 0) + 1
                line = f"{n} workers, run {i}, {point}: {outcome} ({took:.1f} s)"
                print(line, flush=True)
                log.write(line + "\n")
                log.flush()
                i += 1


def verbose() -> None:
    """The nannies' and the scheduler's INFO lines on stderr."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
    for name in ("distributed.nanny", "distributed.scheduler"):
        logging.getLogger(name).setLevel(logging.INFO)
        logging.getLogger(name).addHandler(handler)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs per cluster size")
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--points", nargs="+", default=list(POINTS), choices=POINTS)
    parser.add_argument("--load", type=int, default=2, help="busy processes beside it")
    parser.add_argument("--deadline", type=float, default=90.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="/tmp/soak-fit-kill.log")
    parser.add_argument("--verbose", action="store_true", help="the nannies' and scheduler's log")
    parser.add_argument("--keep-lost-workers", action="store_true",
                        help="Dask's lost-worker-timeout at 600 s (15 s by default)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    if args.keep_lost_workers:
        # a nanny whose restarted worker takes longer than this to register (a loaded
        # machine) is closed by its LocalCluster for good (15 s by default)
        dask.config.set({"distributed.deploy.lost-worker-timeout": "600s"})
    # a SIGTERM ends the run through the finally below: the busy processes end with it
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    loaders = busy(args.load)
    tally: dict = {}
    try:
        with open(args.out, "w") as log:
            for n in args.workers:
                runs(n, args, rng, log, tally)
    finally:
        end(loaders)
    hangs = sum(v for k, v in tally.items() if k[2] == "HANG")
    for key, v in sorted(tally.items()):
        print(key, v)
    print(f"{sum(tally.values())} runs, {hangs} hung")


if __name__ == "__main__":
    main()
