"""A Dask client that closes itself again when its handshake was crossed.

The scheduler greets a new client with ``stream-start``, sent in a batch it
flushes every 2 ms; whatever it tells *every* client (another client's
``cancel``, a key it no longer knows) can join that first batch.  Dask's
client then fails an ``assert`` on the batch's length and stays half made:
never closed, its event loop running, and already the process's default
client; the scheduler keeps that client too, its connection open.
:class:`LabkitClient` closes both instead and raises
:class:`CrossedHandshake`, which :func:`.connect.connect` tries again.
"""

from __future__ import annotations

import contextlib

from distributed import Client

from .dask_adapter import handshake_comms

__all__ = ["CrossedHandshake", "LabkitClient"]


class CrossedHandshake(Exception):
    """The scheduler's first message to a new client came with another client's."""


class LabkitClient(Client):
    """``distributed.Client``, connecting as Dask's own does or closing itself again."""

    def start(self, **kwargs):
        """Connect; a crossed handshake closes this client and raises ``CrossedHandshake``."""
        try:
            super().start(**kwargs)
        except AssertionError as exc:  # Dask's check that stream-start came alone
            # (see dask_adapter.handshake_comms)
            loop = self.loop  # the comms' own: they are aborted there, before it closes
            if loop is not None:
                for comm in handshake_comms(exc):
                    loop.add_callback(comm.abort)
            with contextlib.suppress(Exception):
                self.close()
            raise CrossedHandshake(
                "the scheduler's first message came batched with another client's"
            ) from exc
