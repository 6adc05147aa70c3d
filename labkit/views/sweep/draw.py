"""A sweep's snapshot in HTML: the status line, the table, the workers, a trial's reports.

The notebook board sends frames (:mod:`.sweep_frames`) and draws its own
table, curves and axes in the page; it asks this module only for a trial's
history (:func:`history`).  The dashboard's HTML table and status line are here.

Plain functions of a :class:`~labkit.views.trackers.sweep_tracker.SweepSnapshot`,
each returning one HTML string that fits any width (SVGs scale with their
``viewBox``; tables wrap their cells).  Every element a test or a reader
looks for has a class (``labkit-sweep-...``) and the table's rows carry
their numbers in ``data-`` attributes, exactly.

Examples
--------
>>> from labkit.views.trackers.sweep_tracker import SweepSnapshot, TrialView
>>> t = TrialView(0, {"lr": 0.01}, "completed", 3, 0.9, 0.9, ((0, 0.5), (3, 0.9)))
>>> snap = SweepSnapshot(0.0, 1, "demo", "acc", "max", {}, None, 1, (t,), {"completed": 1}, t)
>>> 'data-trial="0"' in table(snap) and "completed" in status_line(snap, "demo", "finished")
True
>>> fmt(0.000123456), fmt(None), fmt(128), fmt(True)
('0.0001235', '–', '128', 'True')
"""

from __future__ import annotations

import math

from ..trackers.sweep_tracker import STATUSES
from .style import COLOURS, PALETTE, config_words, escape, finite, fmt, params

__all__ = [
    "status_line",
    "table",
    "workers",
    "history",
    "sort_trials",
    "params",
    "config_words",
    "SORT_KEYS",
    "fmt",
    "finite",
    "PALETTE",
]

#: Sort keys besides the parameters: the best first, and the table's columns.
SORT_KEYS = ("rank", "trial", "status", "step", "latest", "best")
_CELL = "padding:1px 4px;overflow-wrap:anywhere;word-break:break-word"


def status_line(snap, title: str, status: str) -> str:
    """The sweep's name, its run's status, counts by status and the best trial so far."""
    counts = " · ".join(
        f'<span style="color:{COLOURS[s]}">{snap.counts[s]} {s}</span>'
        for s in STATUSES
        if snap.counts.get(s)
    )
    n = len(snap.trials)
    best = snap.best
    value = (
        best.value
        if best is not None and best.status != "running"
        else (best.best if best is not None else None)
    )
    words = (
        (
            f" · best {escape(snap.metric)} <b>{fmt(value)}"
            f"</b> (trial {best.id}: {escape(config_words(best.config))})"
        )
        if best
        else ""
    )
    rule = f" · {escape(snap.rule)}" if snap.rule else ""
    return (
        f'<div style="overflow-wrap:anywhere;line-height:1.4"><b>{escape(title)}</b> · '
        f'<span class="labkit-run-status">{escape(status)}</span> · {n} trial{"s" * (n != 1)}: '
        f'{counts}<span class="labkit-sweep-best-line">{words}</span>{rule}</div>'
    )


def sort_trials(snap, key: str = "rank", descending: bool = False) -> list:
    """The trials in the order of ``key`` (a column, a parameter, or ``rank``: best first)."""
    sign = -1 if snap.mode == "max" else 1

    def value(t):
        v = (
            {
                "trial": t.id,
                "status": t.status,
                "step": t.step,
                "latest": t.value,
                "best": t.best,
            }.get(key)
            if key != "rank"
            else (t.value if t.status != "running" else t.best)
        )
        if key not in SORT_KEYS:
            v = t.config.get(key)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return (True, 0 if key == "rank" else (0, 0), t.id)
        if key == "rank":
            return (False, sign * v, t.id)
        return (False, (0, v) if isinstance(v, (int, float)) else (1, str(v)), t.id)

    rows = sorted(snap.trials, key=value)
    if descending:
        rows.reverse()
    return rows


def table(snap, key: str = "rank", descending: bool = False, limit: int | None = None) -> str:
    """The trials as a table, sorted; the best row highlighted; numbers in ``data-`` too."""
    names = params(snap)
    heads = ["trial", "status", *names, "step", f"latest {snap.metric or ''}", "best"]
    head = "".join(f'<th style="{_CELL};text-align:left">{escape(h)}</th>' for h in heads)
    best = snap.best.id if snap.best is not None else None
    rows = []
    for t in sort_trials(snap, key, descending)[:limit]:
        mark = (
            ' class="labkit-sweep-best" style="background:#fff3b0;font-weight:bold"'
            if t.id == best
            else ""
        )
        note = t.error or t.reason or ""
        cells = [
            str(t.id),
            f'<span style="color:{COLOURS.get(t.status, "inherit")}"'
            f' title="{escape(note)}">{escape(t.status)}</span>',
            *(escape(fmt(t.config.get(p))) for p in names),
            escape(fmt(t.step)),
            escape(fmt(t.value)),
            escape(fmt(t.best)),
        ]
        data = (
            f'data-trial="{t.id}" data-status="{escape(t.status)}" data-step="{escape(t.step)}" '
            f'data-value="{escape(repr(t.value))}" data-best="{escape(repr(t.best))}"'
        )
        rows.append(
            f"<tr {data}{mark}>" + "".join(f'<td style="{_CELL}">{c}</td>' for c in cells) + "</tr>"
        )
    return (
        f'<div style="max-height:320px;overflow-y:auto;overflow-x:hidden">'
        f'<table class="labkit-sweep-rows" style="width:100%;table-layout:fixed;'
        f'border-collapse:collapse;font-size:12px"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def workers(snap) -> str:
    """Each worker's trials running and done, and its reports a second."""
    if not snap.workers:
        return ""
    rows = "".join(
        f'<tr><td style="{_CELL}">{escape(w.name)}</td><td style="{_CELL}">{w.running}'
        f'</td><td style="{_CELL}">{w.done}</td><td style="{_CELL}">'
        f"{w.reports_per_s:.1f}</td></tr>"
        for w in snap.workers
    )
    head = "".join(
        f'<th style="{_CELL};text-align:left">{h}</th>'
        for h in ("worker", "trials running", "trials done", "reports/s")
    )
    return (
        f'<table class="labkit-sweep-workers" style="width:100%;table-layout:fixed;'
        f'border-collapse:collapse;font-size:12px"><thead><tr>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )


#: Most reports a trial's history shows (its latest): a row click must not cost a long trial's
#: whole history in one message.
HISTORY_ROWS = 200


def history(trial, reports: list, most: int = HISTORY_ROWS) -> str:
    """One trial: its configuration, status, error (traceback) or reason, and its latest reports.

    >>> from labkit.views.trackers.sweep_rows import TrialView
    >>> t = TrialView(0, {"lr": 0.1}, "completed", 4, 0.5, 0.5)
    >>> html = history(t, [(s, {"loss": 1 / (s + 1)}) for s in range(5)], most=2)
    >>> html.count("<tr>"), "3 earlier reports not shown" in html
    (3, True)
    """
    if trial is None:
        return ""
    earlier = max(0, len(reports) - most)
    reports = reports[earlier:]
    names = list(dict.fromkeys(k for _, m in reports for k in m))
    head = "".join(
        f'<th style="{_CELL};text-align:left">{escape(h)}</th>' for h in ["step", *names]
    )
    rows = "".join(
        "<tr>"
        + "".join(
            f'<td style="{_CELL}">{escape(fmt(v))}</td>' for v in [s, *(m.get(k) for k in names)]
        )
        + "</tr>"
        for s, m in reports
    )
    error = ""
    if trial.error:
        error = (
            f'<div class="labkit-sweep-error" style="color:#d62728;overflow-wrap:anywhere">'
            f'{escape(trial.error)}</div><pre style="white-space:pre-wrap;overflow-wrap:anywhere;'
            f'font-size:11px">{escape(trial.traceback or "")}</pre>'
        )
    reason = f"<div>{escape(trial.reason)}</div>" if trial.reason else ""
    if earlier:
        reason += f'<div class="labkit-sweep-earlier">{earlier} earlier reports not shown</div>'

    return (
        f'<div style="overflow-wrap:anywhere"><b>trial {trial.id}</b> · {escape(trial.status)} · '
        f"{escape(config_words(trial.config))} · attempts {trial.attempts}</div>{error}{reason}"
        f'<div style="max-height:200px;overflow-y:auto"><table style="width:100%;'
        f'table-layout:fixed;border-collapse:collapse;font-size:12px"><thead><tr>{head}'
        f"</tr></thead><tbody>{rows}</tbody></table></div>"
    )
