"""The tasks a replica group runs on its Dask workers: set-up, the loops, state, tear-down.

Each function runs on one worker, for one rank of group ``gid`` (its
:class:`~labkit.data_parallel.rank.Rank` in ``RANKS``).  The loops are long:
:func:`run_epoch` trains a whole epoch on the rows the rank holds, and
:func:`run_steps` several steps of batches the client sent ahead; both leave
the worker's thread pool (``secede``) so that other work, another trainer's
loop among it, runs beside them.  Rank 0 streams its reports
(:mod:`.reports`).  A collective that fails because a peer is gone ends the
loop with ``{"status": "broken"}``: the client then re-forms the group from
the last commit.  Functions meant for ``client.run`` (:func:`request_stop`,
:func:`commit_of`, :func:`teardown`) run beside the task threads, so they
never queue behind a loop.
"""

from __future__ import annotations

import os
import socket
import threading
import time

import cloudpickle
import numpy as np
import torch

from ...scheduling.shared import SharedChunk, unmap
from ..groups import open_group
from ..guards import NonFiniteLossError
from ..interfaces import binding, bound
from ..plan import EpochPlan
from ..rank import RANKS, Rank, rank_error, train_step
from ..reports import ReportStream, StepReport, batch_number
from ..split import row_weights

__all__ = [
    "free_port",
    "build",
    "join",
    "teardown",
    "teardown_group",
    "request_stop",
    "commit_of",
    "commits_held",
    "restore_commit",
    "get_state",
    "set_state",
    "run_steps",
    "run_epoch",
    "evaluate",
    "evaluate_rows",
    "to_cpu",
]


def free_port(host):
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def to_cpu(obj):
    """``obj`` with every tensor in it copied to the CPU."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().clone()
    if isinstance(obj, dict):
        return type(obj)((k, to_cpu(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    return obj


# -- set-up and tear-down ---------------------------------------------------------------


def _keep_freed_memory() -> None:
    """Let this worker's allocator keep freed memory for the next step (glibc only).

    Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``, which
    also stops glibc from raising its mmap threshold: every activation and
    gradient buffer of a step is then mapped and unmapped afresh, a page
    fault per 4 KiB, 5-12% of a small model's step (``bench_worker_loops``).
    A rank reuses the same buffers every step, so it keeps them.
    """
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-1, 256 * 2**20)  # M_TRIM_THRESHOLD: keep up to 256 MiB free on top
        libc.mallopt(-3, 64 * 2**20)  # M_MMAP_THRESHOLD: below 64 MiB, from the heap
    except (OSError, AttributeError):  # not glibc: its own allocator decides
        pass


def build(gid, rank, name, payload, cuda_index) -> str:
    """Make this worker's replica from the shipped payload; the device it got, described."""
    _keep_freed_memory()
    try:
        device = torch.device("cpu")
        if cuda_index is not None:  # launchers that set CUDA_VISIBLE_DEVICES put our GPU first
            index = 0 if os.environ.get("CUDA_VISIBLE_DEVICES") else cuda_index
            device = torch.device("cuda", index % torch.cuda.device_count())
            torch.cuda.set_device(device)
        parts = cloudpickle.loads(payload)
        model = parts["model"].to(device)
        opt_type, defaults, groups, opt_state = parts["optimizer"]
        params = list(model.parameters())
        optimizer = opt_type([{"params": [params[j] for j in g]} for g in groups], **defaults)
        optimizer.load_state_dict(opt_state)
        RANKS[gid] = Rank(
            name, device, model, parts["loss_fn"], optimizer, parts["bucket_model"], rank=rank
        )
    except BaseException as exc:
        raise rank_error(exc, rank, name) from None
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return str(device)


def join(gid, rank, world, init_method, backend, timeout, host, generation=0):
    """Join the group's process group (a new one per generation); the interface it uses."""
    me = RANKS[gid]
    try:
        choice = binding(backend, host)
        with bound(choice):  # the backend reads its interface from the environment
            group = open_group(init_method, rank, world, backend, timeout, f"{gid}-{generation}")
    except BaseException as exc:
        raise rank_error(exc, rank, me.name) from None
    if RANKS.get(gid) is not me:  # closed while this rank waited for its peers
        group.close()
        return choice.describe()
    me.join(group, rank, world)
    me.stop.clear()
    return choice.describe()


def teardown(gid):
    """Drop this worker's rank of ``gid`` (its process group only; other groups live on)."""
    rank = RANKS.pop(gid, None)
    if rank is not None:
        rank.stop.set()
        rank.close()


def teardown_group(gid):
    """Close this worker's process group of ``gid`` (a peer was lost); the replica stays."""
    rank = RANKS.get(gid)
    if rank is not None:
        rank.close_group()


def request_stop(gid, run) -> bool:
    """Ask this worker's rank to stop ``run`` after its current step (all ranks stop at one)."""
    rank = RANKS.get(gid)
    if rank is not None and rank.run == run:
        rank.stop.set()
    return rank is not None


def commit_of(gid):
    """The position of this rank's last commit (``None`` without one)."""
    rank = RANKS.get(gid)
    return None if rank is None or rank.commit is None else dict(rank.commit["position"])


def commits_held(gid) -> list:
    """The positions of the commits this rank holds, the last first."""
    return RANKS[gid].commits()


def restore_commit(gid, position=None):
    """Back to the commit at ``position`` (the last by default); its position."""
    return RANKS[gid].restore_commit(position)


def get_state(gid):
    rank = RANKS[gid]
    return {
        "model": to_cpu(rank.model.state_dict()),
        "optimizer": to_cpu(rank.optimizer.state_dict()),
    }


def set_state(gid, rank_no, state):
    rank = RANKS[gid]
    try:
        rank.model.load_state_dict(state["model"])
        rank.optimizer.load_state_dict(state["optimizer"])
    except Exception as exc:
        raise rank_error(exc, rank_no, rank.name) from None


# -- the loops ------------------------------------------------------------------------------


def _leave_pool() -> None:
    """Free this worker thread's slot: a loop is long, other tasks may run beside it."""
    try:
        from distributed import secede

        secede()
    except (ValueError, KeyError, ImportError):  # not in a worker task (tests call it directly)
        pass


def _stream(rank: Rank, topic, run: str):
    """Rank 0's report stream (its messages name ``run``); the others report nothing."""
    if rank.rank != 0 or topic is None:
        return ReportStream(None, None)
    from distributed import get_worker

    return ReportStream(topic, get_worker().log_event, run=run)


def _step(rank: Rank, x, y, weight, key, epoch, step, policy, shares, stream):
    """One step and its report; raises the step's error, returns the outcome otherwise."""
    started = time.perf_counter()
    outcome = train_step(rank, x, y, weight, key, rank.steps)
    wall = time.perf_counter() - started
    if outcome.error is not None:
        raise outcome.error.locate(epoch=epoch, batch=batch_number(step))
    if outcome.nonfinite and policy == "raise":
        if not np.isfinite(outcome.local_loss):
            raise NonFiniteLossError.of(outcome.local_loss, rank.rank, rank.name).locate(
                epoch=epoch, batch=batch_number(step)
            )
    stream.add(
        StepReport(
            epoch,
            step,
            outcome.loss if outcome.ok else float("nan"),
            tuple(outcome.rows),
            tuple(outcome.seconds),
            wall,
            time.time(),
            skipped=outcome.nonfinite,
            key=key,
            shares=tuple(shares),
            losses=tuple(outcome.losses),
        )
    )
    return outcome


def run_steps(gid, rank_no, run, commands, policy="raise", after=None):
    """Client-fed steps of ``run``: ``commands`` lists ``(epoch, step, x, y, weight, key, shares)``
    (a :class:`~labkit.scheduling.shared.SharedChunk` of them: mapped here).

    Returns ``{"status": "done" | "stopped" | "failed" | "error" | "broken" | "halted",
    "done": steps, "reports": [...], "unmapped": bool}`` (reports from rank 0 only;
    ``unmapped``: nothing here still views the shared-memory segments, so the client
    may reuse them).  ``after`` is the command sent before (so that commands run in
    order); a halted run skips the rest.  A step's own error (located) comes back as
    ``"error"`` with the reports of the steps before it, so the client counts those as
    done before it raises.
    """
    rank = RANKS[gid]
    _leave_pool()
    if not rank.enter(run):
        return {"status": "halted", "done": 0, "reports": [], "rank": rank.rank, "unmapped": True}
    mapped: list = []
    if isinstance(commands, SharedChunk):
        commands = commands.materialize(mapped)
    result = _run_commands(rank, commands, policy)
    del commands  # its views of the segments, before they are unmapped
    return {**result, "unmapped": unmap(mapped)}


def _run_commands(rank: Rank, commands, policy: str) -> dict:
    """The steps of ``commands`` on ``rank``: ``run_steps``'s result (without ``unmapped``)."""
    kept: list = []
    stream = ReportStream(
        "commands", lambda topic, message: kept.append(message), every=float("inf")
    )
    done, status, extra = 0, "done", {}
    try:
        for epoch, step, x, y, weight, key, shares in commands:
            x, y = _tensor(x), None if y is None else _tensor(y)
            outcome = _step(rank, x, y, weight, key, epoch, step, policy, shares, stream)
            if not outcome.ok and policy == "raise":
                status = "failed"
                break
            done += 1
            if outcome.stop:
                status = "stopped"
                break
    except Exception as exc:  # raised by a collective (a peer is gone), or the step's own
        if _is_user_error(exc):
            status, extra = "error", {"error": exc}
        else:
            status, extra = "broken", {"reason": f"{type(exc).__name__}: {exc}"}
    rank.halted = status != "done"
    stream.flush()
    reports = [r for message in kept for r in message["reports"]] if rank.rank == 0 else []
    return {"status": status, "done": done, "reports": reports, "rank": rank.rank, **extra}


def _tensor(value):
    """A share as sent (a numpy array, or a tensor) as a tensor."""
    return torch.from_numpy(value) if isinstance(value, np.ndarray) else value


def _is_user_error(exc: BaseException) -> bool:
    """Errors of the step itself come out located (labkit errors), peers' losses do not."""
    from ...errors import LabkitError

    return isinstance(exc, LabkitError)


# -- an epoch on the rows the rank holds ---------------------------------------------------


class _Planned:
    """Rows taken by the epoch's plan (:mod:`.plan`): blocks held here, or a dataset."""

    def steps(self, spec: dict, rank: Rank):
        """``(step, x, y, key, counts)`` of this rank for every step of ``spec``'s plan."""
        plan = self._plan = epoch_plan(spec)
        for step in range(plan.start, plan.steps):
            x, y = self.take(plan.rows(step, rank.rank))
            yield step, x, y, None, plan.counts(step, rank.world)

    def total(self, spec: dict) -> int:
        """Steps of the epoch (of the plan the last ``steps`` walks)."""
        return self._plan.steps


class _Rows(_Planned):
    """The rows a rank holds, as tensors, and how to take some of them by global number."""

    kind = "blocks"

    def __init__(self, starts, xs, ys):
        self.starts = np.asarray(starts, dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum([len(x) for x in xs])])[:-1]
        self.x = torch.from_numpy(np.ascontiguousarray(np.concatenate(xs))) if len(xs) else None
        self.y = torch.from_numpy(np.ascontiguousarray(np.concatenate(ys))) if len(ys) else None

    def take(self, rows: np.ndarray):
        if self.x is None or not len(rows):
            empty = self.x[:0] if self.x is not None else torch.empty(0)
            return empty, (self.y[:0] if self.y is not None else None)
        block = np.searchsorted(self.starts, rows, side="right") - 1
        local = torch.from_numpy(self.offsets[block] + rows - self.starts[block])
        return self.x.index_select(0, local), self.y.index_select(0, local)


#: Inputs a rank keeps between tasks: a fit's training data and its validation data.
KEPT_INPUTS = 2


def _kept(rank: Rank, key: tuple, make):
    """``rank.data[key]``, made by ``make()`` when missing; the least recently used goes.

    ``key`` names the data itself (the Dask keys of the blocks, a dataset's id),
    never only its place (block numbers): other arrays chunked alike are other data.
    """
    value = rank.data.pop(key, None)
    if value is None:
        value = make()
    rank.data[key] = value  # the newest last
    while len(rank.data) > KEPT_INPUTS:
        rank.data.pop(next(iter(rank.data)))
    return value


def _rows_of(rank: Rank, spec: dict, xs, ys) -> _Rows:
    """This rank's rows of ``spec``'s blocks, kept by their Dask keys and row starts."""
    starts = [spec["table"][b][0] for b in spec["mine"]]
    key = ("blocks", tuple(spec.get("keys", ())), tuple(starts))
    return _kept(rank, key, lambda: _Rows(starts, xs, ys))


def _dataset_of(rank: Rank, spec: dict):
    """What ``spec``'s ``make_dataset`` made on this worker (made once, then kept)."""
    key = ("dataset", spec["dataset_id"])
    return _kept(rank, key, lambda: _made(cloudpickle.loads(spec["dataset"])()))


def _made(obj):
    """A dataset (``[i]`` and ``len``) or batches (re-iterable, with ``len``), wrapped."""
    if hasattr(obj, "__getitem__") and hasattr(obj, "__len__"):
        return _DatasetRows(obj)
    if hasattr(obj, "__iter__") and hasattr(obj, "__len__"):
        return _WorkerBatches(obj)
    raise TypeError(
        f"make_dataset must return a torch Dataset (len() and [i]) or batches "
        f"(len() and iterable, e.g. lk.bucket_batches), got {type(obj).__name__}"
    )


class _DatasetRows(_Planned):
    """A dataset made on this worker; rows taken by index and collated as a DataLoader does."""

    kind = "dataset"

    def __init__(self, dataset):
        from torch.utils.data import default_collate

        self.dataset, self._collate = dataset, default_collate
        self.length = len(dataset)

    def take(self, rows: np.ndarray):
        if not len(rows):
            x, y = self._collate([self.dataset[0]])
            return x[:0], y[:0]
        x, y = self._collate([self.dataset[int(i)] for i in rows])
        return x, y


class _WorkerBatches:
    """Batches made alike on every worker (``lk.bucket_batches``): each rank its share of each.

    Every rank walks the same batches in the same order (a bucket batches'
    order is drawn from its seed and the epoch), and takes the rows the
    shares give it, so a step's bucket key is the same on every rank.
    """

    kind = "batches"

    def __init__(self, batches):
        self.batches, self.length = batches, len(batches)

    def steps(self, spec: dict, rank: Rank):
        from ..loops import pair
        from ..split import shares as split_counts

        start, shares = 0, spec["shares"]
        for step, shares_then in spec.get("resumes", []):
            start, shares = step, shares_then
        if hasattr(self.batches, "passes"):  # the epoch's order, also after a recovery
            self.batches.passes = spec["epoch"]
        for step, batch in enumerate(self.batches):
            if step < start:
                continue
            x, y, key = pair(batch, spec["epoch"], step)
            counts = split_counts(len(x), shares)
            begin = sum(counts[: rank.rank])
            end = begin + counts[rank.rank]
            yield step, x[begin:end], y[begin:end], key, counts

    def total(self, spec: dict) -> int:
        return self.length


def epoch_plan(spec: dict) -> EpochPlan:
    """The plan of ``spec``'s epoch (every rank computes the same one), resumes applied."""
    if spec.get("dataset") is not None:
        plan = EpochPlan.shared(
            spec["rows"],
            spec["batch_size"],
            spec["shares"],
            spec["shuffle"],
            spec["seed"],
            spec["epoch"],
        )
        for step, shares in spec.get("resumes", []):
            plan = plan.resume_shared(step, shares)
        return plan
    plan = EpochPlan.make(
        _holders(spec["rows"], spec["first_table"]),
        spec["batch_size"],
        spec["shuffle"],
        spec["seed"],
        spec["epoch"],
    )
    for step, table in spec.get("resumes", []):
        plan = plan.resume(step, _holders(spec["rows"], table))
    return plan


def _holders(rows: int, table) -> np.ndarray:
    """Row -> rank, from ``table``: one ``(start, stop, rank)`` per block."""
    holders = np.empty(rows, dtype=np.int64)
    for start, stop, rank in table:
        holders[start:stop] = rank
    return holders


def run_epoch(gid, rank_no, spec, xs=(), ys=(), after=None):
    """Train ``spec``'s epoch (from its first step on) on the rows this rank holds.

    ``xs``/``ys`` are this rank's blocks (Dask hands them over where they lie);
    a dataset made on the worker takes their place when ``spec`` names one.
    ``after`` is the epoch before (so that epochs run in order).
    """
    rank = RANKS[gid]
    _leave_pool()
    if not rank.enter(spec["run"]):
        return {"status": "halted", "step": 0, "rank": rank.rank}
    if rank.commit is None or rank.commit["position"].get("run") != spec["run"]:
        rank.take_commit(
            {"run": spec["run"], "epoch": spec["epoch"], "step": 0, "steps": rank.steps}
        )  # where a fit that loses a worker goes back
    source = (
        _dataset_of(rank, spec) if spec.get("dataset") is not None else _rows_of(rank, spec, xs, ys)
    )
    stream = _stream(rank, spec.get("topic"), spec["run"])
    started, done, skipped = time.perf_counter(), 0, 0
    for step, x, y, key, counts in source.steps(spec, rank):
        weights = row_weights(counts)
        weight = 1.0 if rank.sum_loss else len(x) / max(sum(counts), 1)
        try:
            outcome = _step(
                rank,
                x,
                y,
                weight,
                key,
                spec["epoch"],
                step,
                spec["policy"],
                weights,
                stream,
            )
        except Exception as exc:  # the step's own error, or a collective's (a peer is gone)
            rank.halted = True
            stream.flush()
            if _is_user_error(exc):
                raise
            return {
                "status": "broken",
                "step": step,
                "rank": rank.rank,
                "reason": f"{type(exc).__name__}: {exc}",
            }
        if not outcome.ok and spec["policy"] == "raise":
            rank.halted = True
            stream.flush()
            return {"status": "failed", "step": step, "rank": rank.rank}
        skipped += not outcome.ok
        done += 1
        _maybe_commit(rank, spec, step + 1, last=step + 1 == source.total(spec))
        if outcome.stop:
            rank.halted = True
            stream.flush(stopped=step + 1)
            return {"status": "stopped", "step": step + 1, "rank": rank.rank}
    seconds = time.perf_counter() - started
    stream.flush(epoch_end=spec["epoch"], seconds=seconds)
    return {
        "status": "done",
        "step": source.total(spec),
        "rank": rank.rank,
        "seconds": seconds,
        "skipped": skipped,
    }


def _maybe_commit(rank: Rank, spec: dict, next_step: int, last: bool = False) -> None:
    """Every ``commit_every`` steps and at an epoch's end: a commit every rank keeps (and
    rank 0's checkpoint); a lost worker costs at most the steps since the last one."""
    every = spec.get("commit_every") or 0
    if not (last or (every and rank.steps % every == 0)):
        return
    position = {
        "run": spec["run"],
        "epoch": spec["epoch"] + (1 if last else 0),
        "step": 0 if last else next_step,
        "steps": rank.steps,
    }
    rank.take_commit(position)
    if rank.rank == 0 and spec.get("checkpoint"):
        _write_checkpoint(rank.commit, spec["checkpoint"])


def _write_checkpoint(commit: dict, path: str) -> None:
    """Write ``commit`` to ``path`` (labkit's safe format) from a thread of its own."""
    from ...flows.flow import atomic_dump

    snapshot = to_cpu(commit)

    def write():
        try:
            atomic_dump(snapshot, path)
        except Exception as exc:  # a failed checkpoint must not stop the training
            import logging

            logging.getLogger("labkit.data_parallel").warning(
                "labkit: could not write the checkpoint %s: %s", path, exc
            )

    threading.Thread(target=write, name="labkit-checkpoint", daemon=True).start()


# -- evaluation -------------------------------------------------------------------------------


def evaluate(gid, rank_no, x, y, metrics, key=None):
    """Mean loss and metrics of this rank's replica on ``(x, y)``, in eval mode."""
    rank = RANKS[gid]
    training = rank.model.training
    try:
        rank.model.eval()
        with torch.no_grad():
            out = rank.buckets.get(0, key, replica=rank_no, device=rank.name)(x.to(rank.device))
            y = None if y is None else y.to(rank.device)
            values = {"loss": rank.loss_fn(out, y), **{k: f(out, y) for k, f in metrics.items()}}
        return {k: float(v) for k, v in values.items()}
    except Exception as exc:
        raise rank_error(exc, rank_no, rank.name) from None
    finally:
        rank.model.train(training)


def evaluate_rows(gid, rank_no, spec, metrics, xs=(), ys=()):
    """Row-weighted sums of the loss and metrics over every row this rank holds, and the rows."""
    rank = RANKS[gid]
    source = (
        _dataset_of(rank, spec) if spec.get("dataset") is not None else _rows_of(rank, spec, xs, ys)
    )
    sums, n = {}, 0
    for _, x, y, key, _ in source.steps(spec, rank):
        if not len(x):
            continue
        values = evaluate(gid, rank_no, x, y, metrics, key)
        for k, v in values.items():
            sums[k] = sums.get(k, 0.0) + v * len(x)
        n += len(x)
    return {"sums": sums, "rows": n}
