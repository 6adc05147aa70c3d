"""The words of the views: a phase's label, the stage table, steps per bucket.

Plain functions from snapshots to text (HTML where a widget shows it), shared
by the board and the tests; no UI library is imported.

Examples
--------
>>> from labkit.views.progress import PhaseProgress
>>> phase_label(PhaseProgress("r", 0, "PCA", 0, done=8, total=8, started=0.0, finished=0.5))
'node 0 PCA phase 0 — 8/8 (100%) · 16.0 tasks/s · 0.50 s'
"""

from __future__ import annotations

import html
import time

from .progress import PhaseProgress

__all__ = ["phase_label", "stage_table", "bucket_lines"]


def stage_table(stages) -> str:
    """Pipeline stages (their latest StageStats) as an HTML table."""
    rows = "".join(
        f"<tr><td>{html.escape(s.stage)}</td><td>{s.records}</td>"
        f"<td>{s.records_per_s:,.0f}/s</td><td>{_seconds(s.busy_s)}</td>"
        f"<td>{'' if s.queue_fill is None else f'{100 * s.queue_fill:.0f}%'}</td>"
        f"<td>{'done' if s.final else 'running'}</td></tr>"
        for s in stages
    )
    return (
        "<table><tr><th>stage</th><th>records</th><th>rate</th><th>busy</th>"
        f"<th>queue</th><th></th></tr>{rows}</table>"
    )


def _seconds(seconds: float) -> str:
    """``2.31 s``, or ``3.2 ms`` / ``41 µs`` for the quick stages (not ``0.00 s``)."""
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"


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
        return f"epoch {p.phase + 1}"
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
