"""What a sweep's HTML and SVG share: the palette, the status colours, numbers and words.

>>> fmt(0.000123456), fmt(None), fmt(128), fmt(True)
('0.0001235', '–', '128', 'True')
"""

from __future__ import annotations

import html
import math

__all__ = ["PALETTE", "COLOURS", "fmt", "escape", "config_words", "finite", "params"]

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
COLOURS = {
    "completed": "#2ca02c",
    "stopped": "#8c6d1f",
    "failed": "#d62728",
    "cancelled": "#8c6d1f",
    "running": "#1f77b4",
    "pending": "#888",
}


def fmt(value) -> str:
    """A number in 4 significant digits (ints and words as they are; None as a dash)."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def escape(value) -> str:
    return html.escape(str(value), quote=True)


def config_words(config: dict) -> str:
    """A configuration in words: ``lr=0.001, width=64``."""
    return ", ".join(f"{k}={fmt(v)}" for k, v in config.items())


def finite(value) -> bool:
    """Whether ``value`` is a number a plot can place (not NaN, not infinite, not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an int beyond any float
        return False


def params(snap) -> list[str]:
    """The parameters that vary (the space's; a list's: every key its configurations have)."""
    names = [k for k, d in snap.space.items() if k != "list" and d.get("type") != "constant"]
    if names or not snap.trials:
        return names
    seen: dict = {}
    for t in snap.trials:
        seen.update(dict.fromkeys(t.config))
    return list(seen)
