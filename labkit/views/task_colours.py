"""The colour of a task, the same in every view: a hue per node, failures red.

The Bokeh task stream and the task lanes draw a task's block in its node's
hue (Category10 without its red, kept for failures, and its grey, kept for
tasks outside any node); phases alternate in strength.  No UI library is
imported here.

Examples
--------
>>> node_color(1, 0), node_color(1, 1), node_color(None, None), node_color(0, 0, ok=False)
(('#ff7f0e', 0.9), ('#ff7f0e', 0.55), ('#7f7f7f', 0.8), ('#d62728', 1.0))
"""

from __future__ import annotations

__all__ = ["PALETTE", "FAILED_COLOR", "PLAIN_COLOR", "node_color"]

# Category10 without its red (kept for failures) and grey (kept for plain tasks).
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf")
FAILED_COLOR = "#d62728"
PLAIN_COLOR = "#7f7f7f"


def node_color(node: int | None, phase: int | None, ok: bool = True) -> tuple[str, float]:
    """Colour and alpha of a task: one hue per node, phases alternate in strength."""
    if not ok:
        return FAILED_COLOR, 1.0
    if node is None:
        return PLAIN_COLOR, 0.8
    return PALETTE[node % len(PALETTE)], 0.9 if (phase or 0) % 2 == 0 else 0.55
