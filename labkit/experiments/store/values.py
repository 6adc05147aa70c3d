"""Values as the sweep store writes them: JSON for what is not a number, NaN kept in REAL columns.

>>> import numpy as np
>>> to_json({"lr": np.float32(0.5), "shape": (2, 3)}), unreal(real(float("nan")))
('{"lr": 0.5, "shape": [2, 3]}', nan)
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["to_json", "plain", "real", "unreal"]


def to_json(value: Any) -> str:
    """``value`` as JSON; numpy scalars as their numbers, what else JSON cannot hold as its repr."""
    return json.dumps(value, default=plain)


def plain(value: Any) -> Any:
    """A value JSON holds for ``value``: a numpy scalar's number (reads back equal), else its repr."""
    item = getattr(value, "item", None)
    if callable(item) and type(value).__module__ == "numpy":
        try:
            number = item()
        except (TypeError, ValueError):  # an array of more than one value
            return repr(value)
        if isinstance(number, (bool, int, float, str)):
            return number
    return repr(value)


def real(value: Any) -> Any:
    """A number for a REAL column: NaN as the text 'NaN' (SQLite would store NULL, read as None)."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def unreal(value: Any) -> Any:
    """A REAL column's value back: the text 'NaN' as NaN."""
    return float(value) if isinstance(value, str) else value
