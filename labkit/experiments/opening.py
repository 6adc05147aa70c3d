"""A sweep's start: its name claimed in the store, a new sweep recorded or a stored one resumed.

:func:`open_sweep` returns the sweep's :class:`~.spec.SweepSpec` and its
:class:`~.engine.SweepEngine` holding every trial: those a resumed sweep
knows (interrupted ones pending again, the rule's records taken back from
the store) and the new ones.  One sweep at a time owns a name
(:meth:`~.store.Store.claim`): a second one started meanwhile is refused
before it writes anything.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from ..errors import InputError
from .arguments import Prepared, SweepConfig
from .checkpointing import place_of
from .engine import SweepEngine
from .search.space import Distribution, Space
from .spec import SweepSpec, check_room
from .store.database import Store
from .store.kept import Retained
from .store.report_ops import paused_gc
from .trials.record import TrialRecord

__all__ = ["open_sweep"]


def open_sweep(
    store: Store, owner: str, fn: Any, config: SweepConfig, prepared: Prepared
) -> tuple[SweepSpec, SweepEngine]:
    """The sweep's spec and engine, its name claimed by ``owner``; see the module's docstring."""
    name = config.name or (
        f"{getattr(fn, '__name__', 'sweep')}-{time.strftime('%Y%m%d-%H%M%S')}-"
        f"{uuid.uuid4().hex[:4]}"
    )
    holder = store.claim(name, owner)
    if holder is not None:
        raise InputError(
            f"another sweep named {name!r} is running on the store {store.path or 'memory'} "
            f"right now (process {holder['pid']} on {holder['host']}, since "
            f"{time.strftime('%H:%M:%S', time.localtime(holder['since'] or 0))}); one sweep "
            "at a time owns a name: wait for it to end (then resume=True goes on with "
            "it), or give another name",
            argument="name",
        )
    try:
        return _build(store, name, config, prepared)
    except BaseException:
        store.release(name, owner)
        raise


def _build(
    store: Store, name: str, config: SweepConfig, prepared: Prepared
) -> tuple[SweepSpec, SweepEngine]:
    """:func:`open_sweep`'s work once the name is this sweep's."""
    space = prepared.space
    row = store.sweep(name)
    if row is not None:
        seed = _check_resumable(row, space, config, store, name)
    else:
        seed = (
            config.seed
            if config.seed is not None
            else int.from_bytes(uuid.uuid4().bytes[:4], "little")
        )
    known = store.records(name) if row is not None else []
    stored = row["settings"].get("trials") if row is not None else None
    total: int = max(config.trials or stored or space.size or 0, len(known))
    asked = bool(row is not None and row["settings"].get("asked"))
    spec = SweepSpec.of(config, prepared, name=name, seed=seed, trials=total, asked=asked)
    check_room(space, total)
    spec.checkpoints, temporary, spec.checkpoints_given = place_of(
        config, store, name, row and row["settings"]
    )
    retained = Retained(
        spec.checkpoints, spec.mode, spec.keep_best, spec.metric, spec.objectives, spec.modes
    )
    store.keep_checkpoints(name, retained)
    try:
        return spec, _engine(store, name, spec, row, known)
    except BaseException:
        if temporary:
            spec.checkpoints.location.remove_all()
        raise


def _engine(store: Store, name: str, spec: SweepSpec, row: dict | None, known: list) -> SweepEngine:
    """The sweep's engine, the sweep recorded (or its settings updated) in the store."""
    total = spec.trials
    if row is None:
        pairs = (
            [list(p) for p in zip(spec.objectives, spec.modes, strict=True)]
            if spec.several
            else None
        )
        store.create_sweep(
            name,
            spec.space.key(),
            spec.metric,
            spec.mode,
            spec.seed,
            spec.settings(),
            now=False,
            objectives=pairs,
        )
    else:
        store.update_sweep(name, spec.settings())
    engine = SweepEngine(spec, store)
    # a resumed sweep of 10,000 trials makes a few objects a report and a trial here, none
    # of them in a cycle: the collector would scan the hundreds of thousands again and again
    with paused_gc():
        known = [r.replace(config=_configuration(r, spec)) for r in known]
        engine.resume(known, store.rule_state(name) if known else None)
        engine.add(spec.new_records(len(known), total - len(known)))
    return engine


def _configuration(record: TrialRecord, spec: SweepSpec) -> dict:
    """A stored trial's configuration, as the resumed sweep runs (or ran) it.

    Drawn ones are drawn again from the seed (the stored JSON loses types); asked ones
    are kept as stored, constants taken from the space; a trial that never started
    gets its configuration anew: drawn, or ``{}`` until a search that asks asks it.
    """
    space, seed = spec.space, spec.seed
    if not record.status.terminal and not record.attempts:
        return {} if spec.asks else space.configuration(record.id, seed)
    if not spec.asked or not record.config:
        return space.configuration(record.id, seed)
    return {
        name: record.config.get(name) if isinstance(entry, Distribution) else entry
        for name, entry in space.entries.items()
    }


def _check_resumable(row: dict, space: Space, config: SweepConfig, store: Store, name: str) -> int:
    """The stored sweep may go on with these arguments; its seed."""
    where = store.path or "memory"
    if not config.resume:
        raise InputError(
            f"the store {where} holds a sweep named {name!r} already; pass "
            f"resume=True to go on with it, or give another name",
            argument="name",
        )
    if row["space"] != space.key():
        raise InputError(
            f"the sweep {name!r} in {where} was made with another space "
            f"({row['space'][:200]}); give its space again, or another name",
            argument="space",
        )
    names, modes = config.objectives
    stored = tuple(zip(*row["objectives"], strict=True))  # (names, modes)
    for argument, had, given in zip(("metric", "mode"), stored, (names, modes), strict=True):
        if had != given:
            said = had[0] if len(had) == 1 else had
            raise InputError(
                f"the sweep {name!r} in {where} has {argument}={said!r}, "
                f"not {getattr(config, argument)!r}",
                argument=argument,
            )
    if config.seed is not None and config.seed != row["seed"]:
        raise InputError(
            f"the sweep {name!r} in {where} was drawn with seed={row['seed']}, not {config.seed}",
            argument="seed",
        )
    return int(row["seed"])
