"""What each kind of run is called on a board: plain functions from snapshots to words.

A flow trains nodes in phases of chunks; a fit goes through epochs of batches
("epoch 3/6", the elapsed time and an ETA for the whole fit); an ensemble
fits layers of estimators; a search over an ensemble is one row whose
candidates fold into a small table named by their parameters; a pipe has
stages; your own batches have tasks; a phase reads ``node 0 PCA phase 0 —
8/8 (100%) · 12.3 tasks/s``.  Every number here is one the engine
measured and reported (a fit's finished epochs read their record, the one
``fit`` returns), formatted the same way wherever it is shown.  No UI
library is imported here.

Examples
--------
>>> from labkit.views.trackers.progress import PhaseProgress, RunProgress
>>> run = RunProgress("fit-1", "fit", started=0.0, detail={"epochs": 4})
>>> done = PhaseProgress("fit-1", 0, "MLP", 0, started=0.0, finished=2.0, steps=10,
...                      record={"epoch": 1, "loss": 0.5, "samples_per_s": 500.0,
...                              "seconds": 2.0, "steps": 10})
>>> now = PhaseProgress("fit-1", 0, "MLP", 1, started=2.0, steps=5, total=10, loss=0.4)
>>> f = fit_progress(run, [done, now], now=3.0)
>>> fit_outer(f), fit_inner(f)
('epoch 2/4 · 3.00 s · ETA 5.00 s', 'batch 5/10 (50%) · loss 0.4')
>>> phase_label(PhaseProgress("r", 0, "PCA", 0, done=8, total=8, started=0.0, finished=0.5))
'node 0 PCA phase 0 — 8/8 (100%) · 16.0 tasks/s · 0.50 s'
"""

from __future__ import annotations

import html
import time

from .trackers.progress import FitProgress, PhaseProgress, RunProgress, fit_progress

__all__ = [
    "phase_label",
    "bucket_lines",
    "FitProgress",
    "fit_progress",
    "fit_outer",
    "fit_inner",
    "run_line",
    "epoch_table",
    "stage_table",
    "search_groups",
    "search_table",
    "seconds",
    "rate",
]


def seconds(value: float) -> str:
    """``2.31 s``, or ``3.2 ms`` / ``41 µs`` for quick things (never ``0.00 s``)."""
    if value >= 1 or value == 0:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.1f} ms"
    return f"{value * 1e6:.0f} µs"


def rate(value: float, unit: str) -> str:
    """``3,200 samples/s`` (``12.5 tasks/s`` below 100)."""
    return f"{value:,.0f} {unit}/s" if value >= 100 else f"{value:.1f} {unit}/s"


# -- phases -------------------------------------------------------------------------------


def bucket_lines(nodes) -> str:
    """``Model steps per bucket: 10: 12 · 20: 8`` for each node of a bucketed trainer."""
    lines = []
    for n in nodes:
        if n.buckets:
            try:
                keys = sorted(n.buckets)
            except TypeError:  # keys of mixed types: the order they came in
                keys = list(n.buckets)
            counts = " · ".join(f"{html.escape(str(k))}: {n.buckets[k]}" for k in keys)
            lines.append(f"<div><b>{html.escape(n.name)}</b> steps per bucket: {counts}</div>")
    return "".join(lines)


def _what(p: PhaseProgress) -> str:
    """What the phase is, in the words of its run's kind."""
    if p.kind == "fit":
        return f"epoch {(p.phase or 0) + 1}"
    if p.kind == "ensemble":
        return f"layer {p.node_name}"
    if p.kind == "evaluate" or p.node is None:
        return p.node_name
    return f"node {p.node} {p.node_name} phase {p.phase}"


def _counts(p: PhaseProgress, now: float | None) -> list[str]:
    """Done of total, and the rate, in the run's own unit."""
    percent = f" ({100 * p.done // p.total}%)" if p.total else ""  # floor: 100% is all done
    if p.kind == "fit":
        elapsed = max((p.finished or now or time.time()) - p.started, 1e-9)
        rate = p.record["samples_per_s"] if p.record else p.samples / elapsed
        parts = [f"{p.steps} batch{'es' * (p.steps != 1)}{percent}", f"{rate:,.0f} samples/s"]
        if p.loss is not None:
            parts.append(f"loss {p.loss:.4g}")
        return parts
    fits = p.kind in ("ensemble", "evaluate")
    return [
        f"{p.done}/{p.total if p.total is not None else '?'}{' fits' * fits}{percent}",
        f"{p.rate(now):.1f} {'fits' if fits else 'tasks'}/s",
    ]


def phase_label(p: PhaseProgress, now: float | None = None) -> str:
    """One phase in its run's words: ``node 0 PCA phase 0 — 8/8 (100%) · 12.3 tasks/s``.

    A trainer's epoch reads ``epoch 2 — 12 batches (40%) · 5,120 samples/s · loss
    0.42``; an ensemble's layer ``layer base — 10/10 fits (100%) · ...`` with what
    the fits are (``2 estimators × 5 folds``).
    """
    what = _what(p)
    ended = " · cancelled" if p.cancelled else "" if p.ok else " · failed"
    if p.local:
        state = "training locally" if p.finished is None else "trained locally"
        return f"{what} — {state}" + ended
    parts = _counts(p, now)
    if p.failed:
        parts.append(f"{p.failed} failed")
    dropped = p.submitted - p.done - p.failed  # a failed or cancelled phase's other tasks
    if p.finished is not None and not p.ok and dropped > 0:
        parts.append(f"{dropped} cancelled")
    if p.running:
        parts.append(f"{p.running} running")
    if p.finished is not None:
        seconds = p.record["seconds"] if p.record else p.finished - p.started
        parts.append(f"{seconds:.2f} s" + ended)
    elif p.eta(now) is not None:
        parts.append(f"ETA {p.eta(now):.1f} s")
    if p.detail:
        parts.append(p.detail)
    return f"{what} — " + " · ".join(parts)


# -- fits ---------------------------------------------------------------------------------


def fit_outer(f: FitProgress) -> str:
    """``epoch 3/6 · 12.3 s · ETA 20.1 s``: the whole fit."""
    of = f"/{f.epochs}" if f.epochs else ""
    parts = [f"epoch {f.epoch}{of}", seconds(f.elapsed)]
    if f.status != "running":
        parts.append(f.status)
    elif f.eta is not None:
        parts.append(f"ETA {seconds(f.eta)}")
    return " · ".join(parts)


def fit_inner(f: FitProgress) -> str:
    """``batch 7/14 (50%) · 3,200 samples/s · loss 0.41``: the epoch under way."""
    if f.batches:
        parts = [f"batch {f.batch}/{f.batches} ({100 * f.batch // f.batches}%)"]
    else:
        parts = [f"batch {f.batch}"]
    if f.samples_per_s:
        parts.append(rate(f.samples_per_s, "samples"))
    if f.loss is not None:
        parts.append(f"loss {f.loss:.4g}")
    return " · ".join(parts)


def epoch_table(records) -> str:
    """The finished epochs, as ``fit`` returns them: an HTML table with headers over columns."""
    if not records:
        return ""
    extra = [k for k in ("val_loss", "redone") if any(k in r for r in records)]
    head = _row(
        ["epoch", "loss", *[k.replace("_", " ") for k in extra], "samples/s", "time", "steps"], "th"
    )
    rows = "".join(
        _row(
            [
                r["epoch"],
                f"{r['loss']:.4g}",
                *[_cell(r.get(k)) for k in extra],
                f"{r['samples_per_s']:,.0f}",
                seconds(r["seconds"]),
                r["steps"],
            ]
        )
        for r in records
    )
    return f"<table class='labkit-table labkit-epochs'>{head}{rows}</table>"


def _cell(value) -> str:
    if value is None:
        return ""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


#: Cell styles inline (an HTML widget loads no style sheet): numbers right under their
#: right-aligned headers, a gap between columns so values never run together.
_CELL = {
    "name": "text-align:left;padding:1px 12px 1px 0",
    "num": "text-align:right;padding:1px 0 1px 12px;font-variant-numeric:tabular-nums",
}


def _row(values, tag: str = "td") -> str:
    cells = "".join(
        f"<{tag} class='{k}' style='{_CELL[k]}'>{html.escape(str(v))}</{tag}>"
        for i, v in enumerate(values)
        for k in ["num" if i else "name"]
    )
    return f"<tr>{cells}</tr>"


# -- any run, in one line ---------------------------------------------------------------


def run_line(run: RunProgress, phases: list[PhaseProgress], now: float) -> str:
    """One run in one line, in its own words (the rows of a scheduler's board)."""
    name = run.name if run.name != run.kind else run.run
    mine = [p for p in phases if p.run == run.run]
    if run.kind == "fit":
        f = fit_progress(run, phases, now)
        words = f"{fit_outer(f)} · {fit_inner(f)}" if run.finished is None else fit_outer(f)
        return f"fit {name} — {words}"
    if run.kind == "tasks":
        done = sum(p.done for p in mine)
        total = run.detail.get("total")
        counts = f"{done}/{total}" if total else f"{done}"
        return (
            f"tasks {name} — {counts} tasks · {seconds((run.finished or now) - run.started)}"
            f" · {run.status}"
        )
    current = mine[-1] if mine else None
    where = ""
    if current is not None and current.node is not None and run.kind != "evaluate":
        of = run.detail.get("nodes")
        node = f"{current.node + 1}/{of}" if of else f"{current.node}"
        unit = "layer" if run.kind == "ensemble" else "node"
        where = f" · {unit} {node} {current.node_name}"
    unit = "fits" if run.kind in ("ensemble", "evaluate") else "tasks"
    return (
        f"{run.kind} {name}{where} — {sum(p.done for p in mine)} {unit} · "
        f"{seconds((run.finished or now) - run.started)} · {run.status}"
    )


# -- pipes --------------------------------------------------------------------------------


def stage_table(stages) -> str:
    """Pipeline stages (their latest StageStats): headers over their columns, numbers right."""
    head = _row(["stage", "records", "rate", "busy", "queue", "state"], "th")
    rows = "".join(
        _row(
            [
                s.stage,
                f"{s.records:,}",
                rate(s.records_per_s, "records"),
                seconds(s.busy_s),
                "" if s.queue_fill is None else f"{100 * s.queue_fill:.0f}%",
                "done" if s.final else "running",
            ]
        )
        for s in stages
    )
    return f"<table class='labkit-table labkit-stage-table'>{head}{rows}</table>"


# -- searches over an ensemble --------------------------------------------------------------


def search_groups(runs: list[RunProgress]) -> list[list[RunProgress]]:
    """Runs in groups: consecutive fits of one estimator with different parameters fold.

    A search (``GridSearchCV`` over a ``SuperLearner``) fits the same
    estimator again and again with other parameters: those runs are one group;
    every other run is a group of its own.
    """
    groups: list[list[RunProgress]] = []
    for run in runs:
        last = groups[-1] if groups else None
        if (
            last is not None
            and run.kind == "ensemble"
            and last[-1].kind == "ensemble"
            and run.detail.get("estimator") is not None
            and run.detail.get("estimator") == last[-1].detail.get("estimator")
        ):
            last.append(run)
        else:
            groups.append([run])
    return groups


def varying(group: list[RunProgress]) -> list[str]:
    """The parameters whose values differ within a group: what names its candidates."""
    keys: dict[str, set] = {}
    for run in group:
        for k, v in (run.detail.get("params") or {}).items():
            keys.setdefault(k, set()).add(repr(v))
    return sorted(k for k, values in keys.items() if len(values) > 1)


def search_line(group: list[RunProgress], now: float) -> str:
    """``search over SuperLearner — 7 fits of 3 candidates · 6 finished · 12.3 s``."""
    first, last = group[0], group[-1]
    names = varying(group)
    candidates = {tuple(repr((r.detail.get("params") or {}).get(k)) for k in names) for r in group}
    finished = sum(1 for r in group if r.finished is not None)
    failed = sum(1 for r in group if r.status == "failed")
    ended = (last.finished or now) - first.started
    words = [
        f"{len(group)} fits of {len(candidates)} candidate{'s' * (len(candidates) != 1)}",
        f"{finished} finished",
        seconds(ended),
    ]
    if failed:
        words.append(f"{failed} failed")
    return f"search over {first.detail.get('estimator')} — " + " · ".join(words)


def search_table(group: list[RunProgress], now: float) -> str:
    """The candidates of a search: one row each, named by the parameters that vary."""
    names = varying(group)
    rows: dict[tuple, list[RunProgress]] = {}
    for run in group:
        key = tuple(repr((run.detail.get("params") or {}).get(k)) for k in names)
        rows.setdefault(key, []).append(run)
    columns = [n.rsplit("__", 1)[-1] for n in names] or ["candidate"]
    head = _row([*columns, "fits", "time", "state"], "th")
    body = ""
    for key, runs in rows.items():
        spent = sum((r.finished or now) - r.started for r in runs)
        state = (
            "running"
            if any(r.finished is None for r in runs)
            else "failed"
            if any(r.status == "failed" for r in runs)
            else "finished"
        )
        body += _row([*(key or ("(the estimator)",)), len(runs), seconds(spent), state])
    title = " · ".join(html.escape(n) for n in names)
    return f"<table class='labkit-table labkit-search' title='{title}'>{head}{body}</table>"
