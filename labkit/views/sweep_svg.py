"""A sweep's snapshot as SVG: the curves of every trial, and the parallel coordinates.

Each function returns one ``<svg>`` that scales with its ``viewBox``; every
element a test or a reader looks for has a class (``labkit-sweep-...``).
"""

from __future__ import annotations

import math

from .sweep_style import FADED, PALETTE, config_words, escape, finite, fmt, params

__all__ = ["curves", "parallel"]


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
        f'style="max-width:{width}px;display:block" role="img" aria-label="{escape(label)}" '
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
        f'text-anchor="middle">{escape(snap.metric)}</text>'
    )
    best = snap.best.id if snap.best is not None else None
    for t, pts in sorted(lines, key=lambda item: item[0].id == best):
        if not pts:
            continue
        faded, bold = t.status in FADED and t.id != best, t.id == best
        path = " ".join(f"{X(x):.0f},{Y(y):.0f}" for x, y in pts)  # a pixel is enough
        body.append(
            f'<polyline class="labkit-sweep-curve{" labkit-sweep-best" * bold}" '
            f'data-trial="{t.id}" points="{path}" fill="none" '
            f'stroke="{PALETTE[t.id % len(PALETTE)]}" '
            f'stroke-width="{3.5 if bold else 1.3}" opacity="{0.25 if faded else 0.95}">'
            f"<title>trial {t.id} ({t.status}): {escape(config_words(t.config))} — "
            f"{escape(snap.metric)} {fmt(t.value)}</title></polyline>"
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
    order = sorted(zip(snap.trials, values, strict=True), key=lambda tv: tv[0].id == best)
    for t, v in order:
        us = [
            axis[0](t.config.get(p)) for axis, p in zip(axes, names, strict=False)
        ]  # the metric's axis last
        has = finite(v)  # an infinite or NaN value has no place on the metric's axis
        if has:
            us.append(axes[-1][0](v))
        pts = " ".join(f"{x:.0f},{Y(u):.0f}" for x, u in zip(xs, us, strict=False) if u is not None)
        colour = _grade((us[-1] if snap.mode == "max" else 1 - us[-1]) if has else None)
        bold, faded = t.id == best, t.status in FADED and t.id != best
        body.append(
            f'<polyline class="labkit-sweep-line{" labkit-sweep-best" * bold}" '
            f'data-trial="{t.id}" points="{pts}" fill="none" stroke="{colour}" '
            f'stroke-width="{3 if bold else 1.2}" opacity="{0.3 if faded else 0.9}">'
            f"<title>trial {t.id} ({t.status}): {escape(config_words(t.config))} — "
            f"{escape(snap.metric)} {fmt(v)}</title></polyline>"
        )
    for x, name, (_, ticks) in zip(xs, axis_names, axes, strict=True):
        body.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + h}" stroke="#555"/>'
            f'<text class="labkit-sweep-axis" x="{x:.1f}" y="{top - 10}" '
            f'text-anchor="middle" font-weight="bold">{escape(name)}</text>'
        )
        body += [
            f'<text x="{x + 3:.1f}" y="{Y(u) + 4:.1f}" fill="#444">{escape(label)}</text>'
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
    return "#" + "".join(f"{round(x + (y - x) * u):02x}" for x, y in zip(a, b, strict=True))
