"""Views: trackers turn events into snapshots; renderers draw them.

The engine never imports this package; views subscribe to its events.
"""

from .console import ConsoleProgress, format_phase
from .progress import PhaseProgress, ProgressTracker

__all__ = ["ProgressTracker", "PhaseProgress", "ConsoleProgress", "format_phase"]
