"""A PCA whose chunks train only when a test lets them: a flow that runs until a page has
shown it running, however slow the machine.

The chunks take tickets in the order they start (a file made exclusively in the gate
folder, so across worker processes); the chunk with ticket ``k`` trains once the gate's
``allowed`` file holds a number above ``k`` (:func:`allow`).
"""

from __future__ import annotations

import os
import time

from labkit.nodes.pca import PCA

__all__ = ["GatedPCA", "allow"]

#: The longest a chunk waits for its turn (a test that failed may never open the gate).
LONGEST_WAIT = 300.0


def allow(gate: str, n: int) -> None:
    """Let the first ``n`` chunks to start train (written whole, then renamed into place)."""
    part = os.path.join(gate, "allowed.part")
    with open(part, "w") as f:
        f.write(str(n))
    os.replace(part, os.path.join(gate, "allowed"))


def _allowed(gate: str) -> int:
    """How many chunks may train now (0 before the first :func:`allow`)."""
    try:
        with open(os.path.join(gate, "allowed")) as f:
            return int(f.read())
    except (OSError, ValueError):
        return 0


def _ticket(gate: str) -> int:
    """This chunk's place among the chunks that started (the first free ticket's number)."""
    k = 0
    while True:
        try:
            os.close(os.open(os.path.join(gate, f"ticket-{k}"), os.O_CREAT | os.O_EXCL))
            return k
        except FileExistsError:
            k += 1


class GatedPCA(PCA):
    """A PCA whose chunks wait for their turn at ``gate``, then take ``delay`` seconds."""

    def __init__(self, gate: str = "", delay: float = 0.0, **kw):  # _fork gives none
        super().__init__(**kw)
        self.gate, self.delay = gate, delay

    def _fork(self):
        forked = super()._fork()
        forked.gate, forked.delay = self.gate, self.delay
        return forked

    def _train(self, x, *args):
        ticket = _ticket(self.gate)
        deadline = time.monotonic() + LONGEST_WAIT
        while _allowed(self.gate) <= ticket and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(self.delay)
        super()._train(x, *args)
