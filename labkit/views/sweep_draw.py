"""A sweep's snapshot in HTML and SVG: the status line, the table, the curves, the parallel axes.

Plain functions of a :class:`~labkit.views.sweep_progress.SweepSnapshot`,
each returning one HTML string that fits any width (SVGs scale with their
``viewBox``; tables wrap their cells).  Every element a test or a reader
looks for has a class (``labkit-sweep-...``) and the table's rows carry
their numbers in ``data-`` attributes, exactly.

Examples
--------
>>> from labkit.views.sweep_progress import SweepSnapshot, TrialView
>>> t = TrialView(0, {"lr": 0.01}, "completed", 3, 0.9, 0.9, ((0, 0.5), (3, 0.9)))
>>> snap = SweepSnapshot(0.0, 1, "demo", "acc", "max", {}, None, 1, (t,), {"completed": 1}, t)
>>> 'data-trial="0"' in table(snap) and "<polyline" in curves(snap)
True
>>> fmt(0.000123456), fmt(None), fmt(128), fmt(True)
('0.0001235', '–', '128', 'True')
"""

from __future__ import annotations

import html
import math

from .sweep_progress import STATUSES

__all__ = [
    "status_line",
    "table",
    "curves",
    "parallel",
    "workers",
    "history",
    "sort_trials",
    "params",
    "config_words",
    "SORT_KEYS",
    "fmt",
    "finite",
]

PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
_COLOURS = {
    "completed": "#2ca02c",
    "stopped": "#8c6d1f",
    "failed": "#d62728",
    "cancelled": "#8c6d1f",
    "running": "#1f77b4",
    "pending": "#888",
}
_FADED = ("stopped", "failed", "cancelled")
#: Sort keys besides the parameters: the best first, and the table's columns.
SORT_KEYS = ("rank", "trial", "status", "step", "latest", "best")
_CELL = "padding:1px 4px;overflow-wrap:anywhere;word-break:break-word"


def fmt(value) -> str:
    """A number in 4 significant digits (ints and words as they are; None as a dash)."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def config_words(config: dict) -> str:
    """A configuration in words: ``lr=0.001, width=64``."""
    return ", ".join(f"{k}={fmt(v)}" for k, v in config.items())


def status_line(snap, title: str, status: str) -> str:
    """The sweep's name, its run's status, counts by status and the best trial so far."""
    counts = " · ".join(
        f'<span style="color:{_COLOURS[s]}">{snap.counts[s]} {s}</span>'
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
            f" · best {_e(snap.metric)} <b>{fmt(value)}"
            f"</b> (trial {best.id}: {_e(config_words(best.config))})"
        )
        if best
        else ""
    )
    rule = f" · {_e(snap.rule)}" if snap.rule else ""
    return (
        f'<div style="overflow-wrap:anywhere;line-height:1.4"><b>{_e(title)}</b> · '
        f'<span class="labkit-run-status">{_e(status)}</span> · {n} trial{"s" * (n != 1)}: '
        f'{counts}<span class="labkit-sweep-best-line">{words}</span>{rule}</div>'
    )


def params(snap) -> list[str]:
    """The parameters that vary (the space's; a list's: every key its configurations have)."""
    names = [k for k, d in snap.space.items() if k != "list" and d.get("type") != "constant"]
    if names or not snap.trials:
        return names
    seen: dict = {}
    for t in snap.trials:
        seen.update(dict.fromkeys(t.config))
    return list(seen)


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
        missing = v is None or (isinstance(v, float) and math.isnan(v))
        if key == "rank":
            return (missing, sign * v if not missing else 0, t.id)
        return (missing, (0, v) if isinstance(v, (int, float)) else (1, str(v)), t.id)

    rows = sorted(snap.trials, key=value)
    if descending:
        rows.reverse()
    return rows


def table(snap, key: str = "rank", descending: bool = False, limit: int | None = None) -> str:
    """The trials as a table, sorted; the best row highlighted; numbers in ``data-`` too."""
    names = params(snap)
    heads = ["trial", "status", *names, "step", f"latest {snap.metric or ''}", "best"]
    head = "".join(f'<th style="{_CELL};text-align:left">{_e(h)}</th>' for h in heads)
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
            f'<span style="color:{_COLOURS.get(t.status, "inherit")}"'
            f' title="{_e(note)}">{_e(t.status)}</span>',
            *(_e(fmt(t.config.get(p))) for p in names),
            _e(fmt(t.step)),
            _e(fmt(t.value)),
            _e(fmt(t.best)),
        ]
        data = (
            f'data-trial="{t.id}" data-status="{_e(t.status)}" data-step="{_e(t.step)}" '
            f'data-value="{_e(repr(t.value))}" data-best="{_e(repr(t.best))}"'
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


# -- SVG ------------------------------------------------------------------------------------


def finite(value) -> bool:
    """Whether ``value`` is a number a plot can place (not NaN, not infinite, not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an int beyond any float
        return False


def _unit(value, lo: float, hi: float) -> float | None:
    """Where ``value`` lies from ``lo`` (0) to ``hi`` (1); None for what cannot be placed.

    Halves first: ``hi - lo`` of two huge floats would overflow to infinity.
    """
    if not finite(value):
        return None
    span = hi / 2 - lo / 2
    return (float(value) / 2 - lo / 2) / span if span > 0 else 0.5


def _padded(lo: float, hi: float) -> tuple[float, float]:
    """``lo, hi`` widened by 5% each way (by 1 around a single value), within floats."""
    pad = (hi / 2 - lo / 2) * 0.1 or abs(lo) * 0.05 or 1.0
    return max(lo - pad, -_BIGGEST), min(hi + pad, _BIGGEST)


_BIGGEST = 1.7976931348623157e308


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round numbers between ``lo`` and ``hi`` (the ends themselves where none fit)."""
    if hi <= lo:
        return [lo]
    try:
        raw = (hi / 2 - lo / 2) / max(n - 1, 1) * 2
        mag = 10.0 ** math.floor(math.log10(raw))
        step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
        first = math.ceil(lo / step) * step
        count = int((hi / 2 - first / 2) / step * 2 + 1e-9) + 1
        ticks = [first + i * step for i in range(min(count, 2 * n))]
    except (OverflowError, ValueError, ZeroDivisionError, StopIteration):
        return [lo, hi]
    ticks = [t for t in ticks if math.isfinite(t) and lo <= t <= hi]
    return ticks or [lo, hi]


def _svg(width: int, height: int, body: str, cls: str, label: str) -> str:
    return (
        f'<svg class="{cls}" viewBox="0 0 {width} {height}" width="100%" '
        f'style="max-width:{width}px;display:block" role="img" aria-label="{_e(label)}" '
        f'font-family="sans-serif" font-size="11">{body}</svg>'
    )


def _thin(points: tuple, most: int = 200) -> tuple:
    """At most ``most`` points of a curve (its last one kept)."""
    if len(points) <= most:
        return points
    k = math.ceil(len(points) / most)
    return points[::k] + ((points[-1],) if (len(points) - 1) % k else ())


def curves(snap, width: int = 640, height: int = 260) -> str:
    """Every trial's metric against the step; stopped ones faded, the best one bold."""
    left, right, top, bottom = 52, 10, 10, 34
    lines = [
        (t, [(float(s), float(v)) for s, v in _thin(t.curve) if finite(v) and finite(s)])
        for t in snap.trials
    ]
    points = [p for _, pts in lines for p in pts]
    if not points:
        return _svg(
            width,
            40,
            '<text x="8" y="24" fill="#888">no reports yet</text>',
            "labkit-sweep-curves",
            "curves",
        )
    x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
    y0, y1 = min(p[1] for p in points), max(p[1] for p in points)
    x1 = x1 if x1 > x0 else x0 + max(1.0, abs(x0) * 1e-9)
    y0, y1 = _padded(y0, y1)
    w, h = width - left - right, height - top - bottom

    def X(x):
        return left + (_unit(x, x0, x1) or 0.0) * w

    def Y(y):
        return top + (1 - (_unit(y, y0, y1) or 0.0)) * h

    body = [_axes(left, top, w, h)]
    body += [
        f'<text x="{X(v):.1f}" y="{top + h + 14}" text-anchor="middle">{fmt(v)}</text>'
        for v in _ticks(x0, x1)
    ]
    body += [
        f'<text x="{left - 4}" y="{Y(v) + 4:.1f}" text-anchor="end">{fmt(v)}</text>'
        for v in _ticks(y0, y1)
    ]
    body.append(f'<text x="{left + w / 2}" y="{height - 4}" text-anchor="middle">step</text>')
    body.append(
        f'<text transform="translate(12,{top + h / 2}) rotate(-90)" '
        f'text-anchor="middle">{_e(snap.metric)}</text>'
    )
    best = snap.best.id if snap.best is not None else None
    for t, pts in sorted(lines, key=lambda item: item[0].id == best):
        if not pts:
            continue
        faded, bold = t.status in _FADED and t.id != best, t.id == best
        path = " ".join(f"{X(x):.0f},{Y(y):.0f}" for x, y in pts)  # a pixel is enough
        body.append(
            f'<polyline class="labkit-sweep-curve{" labkit-sweep-best" * bold}" '
            f'data-trial="{t.id}" points="{path}" fill="none" '
            f'stroke="{PALETTE[t.id % len(PALETTE)]}" '
            f'stroke-width="{3.5 if bold else 1.3}" opacity="{0.25 if faded else 0.95}">'
            f"<title>trial {t.id} ({t.status}): {_e(config_words(t.config))} — "
            f"{_e(snap.metric)} {fmt(t.value)}</title></polyline>"
        )
    return _svg(width, height, "".join(body), "labkit-sweep-curves", f"{snap.metric} by step")


def _axes(left, top, w, h) -> str:
    return f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="none" stroke="#ccc"/>'


def _axis(name: str, spec: dict, values: list):
    """``(to_unit, ticks)`` of one axis: a value to 0..1, and ``[(unit, label)]``."""
    kind = spec.get("type")
    if kind in ("choice", "grid") or any(
        not isinstance(v, (int, float)) or isinstance(v, bool) for v in values if v is not None
    ):
        cats = [str(v) for v in (spec.get("values") or [])] or sorted(
            {str(v) for v in values}, key=str
        )
        spot = {c: (i / (len(cats) - 1) if len(cats) > 1 else 0.5) for i, c in enumerate(cats)}
        return (lambda v: spot.get(str(v))), [(u, c) for c, u in spot.items()]
    placed = [float(v) for v in values if finite(v)]
    lo: float = min(placed, default=0.0)
    hi: float = max(placed, default=1.0)
    if finite(spec.get("lo")) and finite(spec.get("hi")):  # else a list's, or unplaceable
        lo, hi = spec["lo"], spec["hi"] - (1 if kind == "randint" else 0)
    if kind == "loguniform" and lo > 0:
        a, b = math.log10(lo), math.log10(hi)
        return (lambda v: _unit(math.log10(v), a, b) if finite(v) and v > 0 else None), [
            (0.0, fmt(float(lo))),
            (1.0, fmt(float(hi))),
            (0.5, "log"),
        ]
    return (lambda v: _unit(v, lo, hi)), [(0.0, fmt(lo)), (1.0, fmt(hi))]


def parallel(snap, width: int = 640, height: int = 240) -> str:
    """Parallel coordinates: each parameter's axis, then the metric's; a line a trial."""
    names = params(snap)
    top, bottom, left, right = 26, 20, 40, 44
    h = height - top - bottom
    values = [t.value if t.status != "running" else t.best for t in snap.trials]
    known = [v for v in values if finite(v)]
    m_lo, m_hi = (min(known), max(known)) if known else (0.0, 1.0)
    axes = [_axis(p, snap.space.get(p, {}), [t.config.get(p) for t in snap.trials]) for p in names]
    axes.append(((lambda v: _unit(v, m_lo, m_hi)), [(0.0, fmt(m_lo)), (1.0, fmt(m_hi))]))
    axis_names = names + [snap.metric or "metric"]
    n = len(axis_names)
    xs = [left + i * (width - left - right) / max(n - 1, 1) for i in range(n)]

    def Y(u):
        return top + (1 - min(max(u, 0.0), 1.0)) * h

    body = []
    best = snap.best.id if snap.best is not None else None
    order = sorted(zip(snap.trials, values), key=lambda tv: tv[0].id == best)
    for t, v in order:
        us = [axis[0](t.config.get(p)) for axis, p in zip(axes, names)]
        has = finite(v)  # an infinite or NaN value has no place on the metric's axis
        if has:
            us.append(axes[-1][0](v))
        pts = " ".join(f"{x:.0f},{Y(u):.0f}" for x, u in zip(xs, us) if u is not None)
        colour = _grade((us[-1] if snap.mode == "max" else 1 - us[-1]) if has else None)
        bold, faded = t.id == best, t.status in _FADED and t.id != best
        body.append(
            f'<polyline class="labkit-sweep-line{" labkit-sweep-best" * bold}" '
            f'data-trial="{t.id}" points="{pts}" fill="none" stroke="{colour}" '
            f'stroke-width="{3 if bold else 1.2}" opacity="{0.3 if faded else 0.9}">'
            f"<title>trial {t.id} ({t.status}): {_e(config_words(t.config))} — "
            f"{_e(snap.metric)} {fmt(v)}</title></polyline>"
        )
    for x, name, (_, ticks) in zip(xs, axis_names, axes):
        body.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + h}" stroke="#555"/>'
            f'<text class="labkit-sweep-axis" x="{x:.1f}" y="{top - 10}" '
            f'text-anchor="middle" font-weight="bold">{_e(name)}</text>'
        )
        body += [
            f'<text x="{x + 3:.1f}" y="{Y(u) + 4:.1f}" fill="#444">{_e(label)}</text>'
            for u, label in ticks
            if label != "log"
        ]
        if any(label == "log" for _, label in ticks):
            body.append(
                f'<text x="{x:.1f}" y="{top + h + 14}" text-anchor="middle" fill="#888">log</text>'
            )
    return _svg(width, height, "".join(body), "labkit-sweep-parallel", "parallel coordinates")


def _grade(u: float | None) -> str:
    """A colour from poor (0: light orange) to good (1: dark blue); grey without a value."""
    if u is None:
        return "#bbb"
    a, b = (253, 174, 97), (49, 54, 149)
    return "#%02x%02x%02x" % tuple(round(x + (y - x) * u) for x, y in zip(a, b))


def workers(snap) -> str:
    """Each worker's trials running and done, and its reports a second."""
    if not snap.workers:
        return ""
    rows = "".join(
        f'<tr><td style="{_CELL}">{_e(w.name)}</td><td style="{_CELL}">{w.running}'
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


def history(trial, reports: list) -> str:
    """One trial: its configuration, status, error (traceback) or reason, and every report."""
    if trial is None:
        return ""
    names = list(dict.fromkeys(k for _, m in reports for k in m))
    head = "".join(f'<th style="{_CELL};text-align:left">{_e(h)}</th>' for h in ["step", *names])
    rows = "".join(
        "<tr>"
        + "".join(f'<td style="{_CELL}">{_e(fmt(v))}</td>' for v in [s, *(m.get(k) for k in names)])
        + "</tr>"
        for s, m in reports
    )
    error = ""
    if trial.error:
        error = (
            f'<div class="labkit-sweep-error" style="color:#d62728;overflow-wrap:anywhere">'
            f'{_e(trial.error)}</div><pre style="white-space:pre-wrap;overflow-wrap:anywhere;'
            f'font-size:11px">{_e(trial.traceback or "")}</pre>'
        )
    reason = f"<div>{_e(trial.reason)}</div>" if trial.reason else ""
    return (
        f'<div style="overflow-wrap:anywhere"><b>trial {trial.id}</b> · {_e(trial.status)} · '
        f"{_e(config_words(trial.config))} · attempts {trial.attempts}</div>{error}{reason}"
        f'<div style="max-height:200px;overflow-y:auto"><table style="width:100%;'
        f'table-layout:fixed;border-collapse:collapse;font-size:12px"><thead><tr>{head}'
        f"</tr></thead><tbody>{rows}</tbody></table></div>"
    )
