"""A rank's life on its Dask worker: built, joined to its process group, its state, torn down.

Each function runs on one worker, for one rank of group ``gid`` (its
:class:`~labkit.data_parallel.worker.rank.Rank` in ``RANKS``).  Functions meant
for ``client.run`` (:func:`request_stop`, :func:`commit_of`, :func:`teardown`,
:func:`set_monitors`) run beside the task threads, so they never queue behind a
loop (:mod:`.training`).
"""

from __future__ import annotations

import ctypes
import os
import socket

import cloudpickle
import torch

from ...errors import SchedulerError
from .inputs import dataset_of
from .network import binding, bound
from .process_group import open_group_unless
from .rank import RANKS, Rank, rank_error

__all__ = [
    "free_port",
    "warm_up",
    "build",
    "join",
    "teardown",
    "teardown_group",
    "request_stop",
    "set_monitors",
    "commit_of",
    "commits_held",
    "restore_commit",
    "get_state",
    "held_state",
    "handover",
    "take_over",
    "state_view",
    "set_state",
    "dataset_length",
    "to_cpu",
]


def free_port(host: str) -> int:
    """A free port on ``host``, for the rendezvous store."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def to_cpu(obj, clone: bool = True, plain: bool = False):
    """``obj`` with every tensor in it copied to the CPU.

    ``clone=False`` moves a tensor only (one already on the CPU is shared);
    ``plain=True`` makes every mapping a plain ``dict`` (Dask sends plain dicts
    of tensors as frames, and pickles an ``OrderedDict`` whole).
    """
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().clone() if clone else obj.detach().cpu()
    if isinstance(obj, dict):
        kind = dict if plain else type(obj)
        return kind((k, to_cpu(v, clone, plain)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v, clone, plain) for v in obj)
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
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-1, 256 * 2**20)  # M_TRIM_THRESHOLD: keep up to 256 MiB free on top
        libc.mallopt(-3, 64 * 2**20)  # M_MMAP_THRESHOLD: below 64 MiB, from the heap
    except (OSError, AttributeError):  # not glibc: its own allocator decides
        pass


def warm_up() -> None:
    """Pay torch's first-use costs before a replica is built: a worker that starts warms up so.

    torch's first optimizer imports ``torch._dynamo`` (some 800 modules): a
    second on an idle machine, several on a loaded one, which a group on
    workers that come and go paid in every fresh worker's first :func:`build`.
    """
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    optimizer.load_state_dict(optimizer.state_dict())


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
    """Join the group's process group (a new one per generation); the interface it uses.

    The wait for the peers ends early when the forming is called off
    (:func:`teardown`, :func:`teardown_group`): a peer left meanwhile, and the
    client forms the group again without it.
    """
    me = RANKS.get(gid)
    if me is None:  # torn down before this task ran: the forming was called off
        raise SchedulerError(f"the forming of generation {generation} was called off", replica=rank)
    me.forming = generation
    try:
        choice = binding(backend, host)
        group = open_group_unless(
            lambda: RANKS.get(gid) is not me or me.called_off == generation,
            init_method, rank, world, backend, timeout, f"{gid}-{generation}",
            setting=lambda: bound(choice),  # the backend reads its interface from the environment
        )  # fmt: skip
    except BaseException as exc:
        raise rank_error(exc, rank, me.name) from None
    finally:
        me.forming = None
    if group is None:  # nobody waits for this task any more: the client moved on
        called_off = SchedulerError(f"the forming of generation {generation} was called off")
        raise rank_error(called_off, rank, me.name)
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
    """Close this worker's process group of ``gid`` (a peer was lost); the replica stays.

    A forming under way on this rank is called off: its peers will not all come.
    """
    rank = RANKS.get(gid)
    if rank is not None:
        rank.called_off = rank.forming
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


def get_state(gid: str) -> dict:
    """The state of this worker's rank of ``gid``, as CPU tensors."""
    rank = RANKS[gid]
    return {
        "model": to_cpu(rank.model.state_dict()),
        "optimizer": to_cpu(rank.optimizer.state_dict()),
    }


def held_state(gid: str) -> dict | None:
    """:func:`get_state`, or None when this worker holds no rank of ``gid`` (torn down: a
    trial's group taken back), rather than an error Dask logs on the worker."""
    return get_state(gid) if gid in RANKS else None


def handover(gid: str) -> dict:
    """What a rank that joins the group takes from this one: its state and its step count."""
    return {**get_state(gid), "steps": RANKS[gid].steps}


def take_over(gid: str, rank_no: int, handed: dict) -> None:
    """This joining rank takes the state and step count another rank handed over."""
    set_state(gid, rank_no, handed)
    RANKS[gid].steps = handed["steps"]


def state_view(gid: str) -> dict:
    """The state of this worker's rank of ``gid`` as plain dicts of CPU tensors, not copied.

    For the client's model after a call (see ``DaskReplicaGroup.fetch_state``):
    the trainer runs one call at a time, so nothing steps the rank before the
    client has read these; Dask sends the tensors as frames (plain dicts, not a
    pickle), and a CPU tensor is not cloned first.
    """
    rank = RANKS[gid]
    return {
        "model": to_cpu(rank.model.state_dict(), clone=False, plain=True),
        "optimizer": to_cpu(rank.optimizer.state_dict(), clone=False, plain=True),
    }


def set_state(gid: str, rank_no: int, state: dict) -> None:
    """Load ``state`` (a :func:`get_state`-shaped mapping) into this worker's rank."""
    rank = RANKS[gid]
    try:
        rank.model.load_state_dict(state["model"])
        rank.optimizer.load_state_dict(state["optimizer"])
    except Exception as exc:
        raise rank_error(exc, rank_no, rank.name) from None


def set_monitors(gid: str, blob: bytes) -> None:
    """The monitors this worker's rank of ``gid`` calls after backward (pickled in ``blob``)."""
    rank = RANKS.get(gid)
    if rank is not None:
        rank.monitors = cloudpickle.loads(blob)


def dataset_length(gid: str, blob: bytes, dataset_id: str) -> list:
    """What this worker's rank made (``"dataset"`` or ``"batches"``) and its length."""
    made = dataset_of(RANKS[gid], blob, dataset_id)
    return [made.kind, made.length]
