"""Epoch loops of the data-parallel trainer: ``fit`` and ``evaluate``."""

from __future__ import annotations

import math
import time

import torch

from ..errors import InputError, LabkitError, pulled
from ..runs import start
from .bucketing import BucketBatch
from .guards import check_batch, check_batches, check_epochs
from .split import shares

__all__ = ["EpochLoops"]


class EpochLoops:
    """``fit`` and ``evaluate`` over batches, for a trainer with ``step`` and replicas."""

    def fit(self, batches, epochs: int = 1, wait: bool = True):
        """Train for ``epochs`` passes over ``batches`` (``(x, y)`` pairs, e.g. a DataLoader).

        A :class:`~labkit.data_parallel.bucketing.BucketBatch` (from
        :func:`~labkit.bucket_batches`) is stepped with its bucket key.

        Returns one record an epoch: ``epoch``, mean ``loss``, ``seconds``,
        ``samples_per_s``; with ``wait=False`` a :class:`~labkit.Run` whose
        ``result()`` is that list (``run.cancel()`` stops between two steps).
        An error names the epoch and batch; the steps before it are kept.
        With ``on_nonfinite="skip"`` a record also counts its ``skipped`` batches.
        """
        __tracebackhide__ = True
        check_batches(batches, check_epochs(epochs))
        self._check_open()

        def job(scope):
            self._reporter.fit_started(scope.id)
            history = []
            try:
                for epoch in range(epochs):
                    history.append(self._epoch(batches, epoch, scope))
            except BaseException:
                self._reporter.epoch_finished(ok=False)
                raise
            self._reporter.fit_finished()
            return history
        return start("fit", [self], job, wait=wait)

    def _epoch(self, batches, epoch: int, scope) -> dict:
        """One pass over the batches."""
        __tracebackhide__ = True
        n_batches = len(batches) if hasattr(batches, "__len__") else None
        self._reporter.epoch_started(epoch, n_batches, len(self.names))
        start_time, total, rows, skipped = time.perf_counter(), 0.0, 0, 0
        for b, batch in enumerate(pulled(batches, "batch", "the batches", epoch=epoch)):
            scope.check()
            x, y, key = _pair(batch, epoch, b)
            try:
                loss = self.step(x, y, bucket_key=key)
            except LabkitError as exc:
                raise exc.locate(epoch=epoch, batch=b)
            if not math.isfinite(loss):  # skipped under on_nonfinite="skip": not in the mean
                skipped += 1
                continue
            total, rows = total + loss * len(x), rows + len(x)
        if rows == 0 and not skipped:
            raise InputError("no batches to train on", epoch=epoch, argument="batches")
        self._reporter.epoch_finished()
        seconds = time.perf_counter() - start_time
        record = {"epoch": epoch, "loss": total / rows if rows else math.nan,
                  "seconds": seconds, "samples_per_s": rows / seconds}
        if self.on_nonfinite == "skip":
            record["skipped"] = skipped
        return record

    def evaluate(self, batches, metrics: dict | None = None) -> dict[str, float]:
        """Mean loss and ``metrics`` over ``batches``, the replicas evaluating in parallel.

        ``metrics`` maps names to ``fn(outputs, targets)`` giving a mean over
        rows (e.g. accuracy); every value is weighted by rows.  Bucket batches
        run their bucket's modules.
        """
        __tracebackhide__ = True
        check_batches(batches, what="evaluate")
        self._check_open()
        fns = dict(metrics or {})
        fns["loss"] = self.loss_fn
        sums, rows = dict.fromkeys(fns, 0.0), 0
        modes = [r.training for r in self._eval_models()]
        for r in self._eval_models():
            r.eval()
        try:
            for b, batch in enumerate(pulled(batches, "batch", "the batches")):
                x, y, key = _pair(batch, None, b)
                check_batch(x, y, what="evaluate", batch=b)
                for name, value in self._evaluate_batch(x, y, fns, key).items():
                    sums[name] += value
                rows += len(x)
        finally:
            for r, mode in zip(self._eval_models(), modes):
                r.train(mode)
        if rows == 0:
            raise InputError("no batches to evaluate")
        return {name: total / rows for name, total in sums.items()}

    def _eval_models(self):
        """The replicas (or, with workers, the synced model)."""
        return self.replicas or [self.sync_model()]

    def _evaluate_batch(self, x, y, fns, key=None) -> dict[str, float]:
        """Row-weighted sums of each metric over one batch, split across the replicas."""
        models = self._eval_models()
        devices = self.devices if self.replicas else [next(models[0].parameters()).device]
        counts = shares(len(x), self._loads.shares(key) if self.replicas else [1.0])
        calls, start = [], 0
        for i, c in enumerate(counts):
            if c:
                where = {"device": self.names[i]} if self.replicas else {}
                module = self._buckets.get(i, key, **where)
                calls.append((i, _evaluator(module, devices[i], x[start:start + c],
                                            y[start:start + c], fns)))
            start += c
        threads = self._threads if self.replicas else None
        results = threads.run(calls) if threads else [fn() for _, fn in calls]
        return {name: sum(r[name] for r in results) for name in fns}


def _evaluator(model, device, x, y, fns):
    """A call computing row-weighted metric sums of ``model`` on ``(x, y)``."""
    def run():
        with torch.no_grad():
            out = model(x.to(device))
            yd = y.to(device)
            return {name: float(fn(out, yd)) * len(x) for name, fn in fns.items()}
    return run


def _pair(batch, epoch, b):
    """``(x, y, bucket key)`` of one batch (a pair or a BucketBatch), or a clear error."""
    if isinstance(batch, BucketBatch):
        return batch.x, batch.y, batch.key
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise InputError(f"a batch must be an (x, y) pair or an lk.BucketBatch, got "
                         f"{type(batch).__name__}", epoch=epoch, batch=b)
    return batch[0], batch[1], None
