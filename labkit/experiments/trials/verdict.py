"""How an execution's outcome ends its trial: the final status and the fields that go with it.

An outcome is what :func:`~.execution.execute` returns (or a launcher makes
up for a lost task): ``{"status": "completed" | "stopped" | "failed" |
"lost" | "moved", ...}``.  ``"moved"``: the trial's worker left gracefully (a
retirement, a lifetime's end); the engine runs it again from its latest
checkpoint, and it ends here only when the sweep was being cancelled.  :func:`verdict` is pure: the engine records what it says.
"""

from __future__ import annotations

from typing import Any

from .status import Status

__all__ = ["verdict"]


def verdict(
    trial: int, history: list, stop: tuple | None, outcome: dict, metric: str
) -> tuple[Status, dict[str, Any]]:
    """The final status of a trial and its fields (``stop``: the sweep's ``(kind, reason)``)."""
    kind = outcome["status"]
    last = dict(history[-1][1]) if history else {}
    if stop and stop[0] == "fail":  # the search failed it (a PBT member that started over)
        return Status.FAILED, {"error": stop[1], "metrics": last or None}
    if kind == "lost" or (stop and stop[0] == "lost"):
        why = stop[1] if stop else outcome.get("error") or "its worker was lost"
        return Status.FAILED, {
            "error": f"WorkerLostError: trial {trial} failed: {why}",
            "metrics": last or None,
        }
    if kind == "failed":
        return Status.FAILED, {
            "error": outcome.get("error"),
            "traceback": outcome.get("traceback"),
            "metrics": last or None,
        }
    if kind in ("stopped", "moved"):  # moved: its worker left as the trial was stopped
        cancelled = stop is None or stop[0] == "cancel"
        return Status.CANCELLED if cancelled else Status.STOPPED, {
            "metrics": last or None,
            "reason": stop[1] if stop else "stopped",
        }
    return _completed(trial, history, outcome, metric, last)


def _completed(
    trial: int, history: list, outcome: dict, metric: str, last: dict
) -> tuple[Status, dict[str, Any]]:
    """A trial that returned: completed, or failed when the metric is nowhere."""
    metrics = outcome.get("metrics") or last
    if "value" in outcome:
        metrics = {**metrics, metric: outcome["value"]}
    if metric in metrics:
        return Status.COMPLETED, {"metrics": metrics}
    seen = sorted({k for _, m, _ in history for k in m} | set(metrics))
    return Status.FAILED, {
        "metrics": metrics or None,
        "error": (
            f"InputError: trial {trial} finished without reporting the metric "
            f"{metric!r} (it reported {', '.join(map(repr, seen)) or 'nothing'}); "
            f"report it with trial.report(step, {metric}=...) or return "
            f"{{{metric!r}: ...}}"
        ),
    }
