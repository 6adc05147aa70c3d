"""How a sweep's rows are written in a board's frames: its parameters, their kinds, the cells.

:class:`SweepWords` holds what a frame's ``meta`` says of a sweep (its
parameters in order, each one's kind: ``number``, ``log`` or ``category``;
each category's labels; the statuses and workers that the rows' codes index)
and writes trials' rows as the protocol's columns: numbers rounded to 6
significant digits, non-finite ones null, a category as the index of its
label, a status and a worker as indexes.  Labels and workers are only ever
appended, so the indexes of rows sent before stay true.

Examples
--------
>>> from labkit.experiments import TrialRecord
>>> words = SweepWords()
>>> words.describe({"lr": {"type": "loguniform", "lo": 1e-4, "hi": 0.1},
...                 "act": {"type": "choice", "values": ["relu", "tanh"]}})
True
>>> rows = [TrialRecord(id=0, config={"lr": 0.00123456789, "act": "tanh"}, status="running",
...                     value=float("nan"), worker="tcp://w:1 #0")]
>>> words.absorb(rows)
True
>>> columns = words.columns(rows)
>>> columns["params"], columns["latest"], columns["worker"], words.meta()["kinds"]
({'lr': [0.00123457], 'act': [1]}, [None], [0], {'lr': 'log', 'act': 'category'})
"""

from __future__ import annotations

from ..trackers.sweep_grid import r6
from ..trackers.sweep_rows import worker_name
from ..trackers.sweep_tracker import STATUSES

__all__ = ["SweepWords", "label"]

#: The kind of a parameter, by the type its space describes (others are numbers).
_KINDS = {"loguniform": "log", "choice": "category", "grid": "category"}
_NON_FINITE = ("inf", "-inf", "nan")  # how a space describes such a float


def label(value) -> str:
    """The label of a category's value: the same for a value and for its description."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"repr"}:
        return str(value["repr"])
    if value is None or isinstance(value, (bool, int, float)):
        return str(value)
    return repr(value)


def _number(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) or value in _NON_FINITE


class SweepWords:
    """A sweep's parameters, kinds, category labels and workers, as frames name them."""

    def __init__(self) -> None:
        self.name: str | None = None
        self.metric: str | None = None
        self.mode = "max"
        self.rule: str | None = None
        self.params: list[str] = []
        self.kinds: dict[str, str] = {}
        self.categories: dict[str, dict[str, int]] = {}  # param -> label -> index
        self.workers: dict[str, int] = {}
        self._described = False  # the space names the parameters

    def sweep(self, name, metric, mode, rule) -> None:
        """The sweep's own words."""
        self.name, self.metric, self.mode, self.rule = name, metric, mode, rule

    def describe(self, space: dict) -> bool:
        """Parameters and kinds from the sweep's ``space``; whether they were new."""
        params: dict[str, str] = {}
        labels: dict[str, list] = {}
        for name, spec in space.items():
            if name == "list" or spec.get("type") == "constant":
                continue
            params[name] = _KINDS.get(spec.get("type"), "number")
            labels[name] = spec.get("values") or []
        for config in space.get("list") or ():  # a list's: each key's values decide
            for name, value in (config or {}).items():
                if params.get(name) != "category":
                    params[name] = "number" if _number(value) else "category"
                labels.setdefault(name, []).append(value)
        if not params or (self._described and list(params) == self.params):
            return False
        self._described = True
        self.params, self.kinds = list(params), params
        self.categories = {}
        for name, kind in params.items():
            if kind == "category":
                self.categories[name] = {}
                for value in labels[name]:
                    self.categories[name].setdefault(label(value), len(self.categories[name]))
        return True

    def absorb(self, rows) -> bool:
        """Take the labels, workers (and, with no space, parameters) of ``rows``; whether new."""
        new = False
        for t in rows:
            if t.worker is not None and worker_name(t.worker) not in self.workers:
                self.workers[worker_name(t.worker)] = len(self.workers)
                new = True
            for name, value in t.config.items():
                if name not in self.kinds:
                    if self._described:
                        continue  # a constant, or a key the space does not name
                    # no space (a tracker fed no SweepStarted): the first value decides, and a
                    # word later in a parameter read as a number is a null cell
                    self.params.append(name)
                    self.kinds[name] = "number" if _number(value) else "category"
                    new = True
                if self.kinds[name] == "category":
                    labels = self.categories.setdefault(name, {})
                    if label(value) not in labels:
                        labels[label(value)] = len(labels)
                        new = True
        return new

    def meta(self) -> dict:
        """The frame's ``meta``."""
        return {
            "name": self.name,
            "metric": self.metric,
            "mode": self.mode,
            "rule": self.rule,
            "params": list(self.params),
            "kinds": dict(self.kinds),
            "categories": {p: list(labels) for p, labels in self.categories.items()},
            "statuses": list(STATUSES),
            "workers": list(self.workers),
        }

    def cell(self, name: str, value):
        """One parameter's cell: a category's index, else a rounded number (None: neither)."""
        if self.kinds.get(name) == "category":
            return None if value is None else self.categories[name].get(label(value))
        return r6(value)

    def columns(self, rows) -> dict:
        """``rows`` (TrialRecords) as the frame's columnar ``rows``."""
        code = {s: i for i, s in enumerate(STATUSES)}
        return {
            "id": [t.id for t in rows],
            "status": [code.get(str(t.status)) for t in rows],
            "step": [r6(t.step) for t in rows],
            "latest": [r6(t.value) for t in rows],
            "best": [r6(t.best) for t in rows],
            "worker": [
                None if t.worker is None else self.workers.get(worker_name(t.worker)) for t in rows
            ],
            "attempts": [t.attempts for t in rows],
            "moves": [t.moves for t in rows],  # its worker left under it: moved, not failed
            "params": {p: [self.cell(p, t.config.get(p)) for t in rows] for p in self.params},
        }
