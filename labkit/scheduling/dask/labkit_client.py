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
        """Connect; a failed handshake closes this client, a crossed one as ``CrossedHandshake``."""
        try:
            super().start(**kwargs)
        except Exception as exc:
            # Dask leaves a failed handshake's comm open (the scheduler keeps a client
            # for it) and the client half made: both go here, whatever the failure.
            self._abandon(exc)
            if isinstance(exc, AssertionError):  # Dask's check that stream-start came alone
                raise CrossedHandshake(
                    "the scheduler's first message came batched with another client's"
                ) from exc
            raise

    def _abandon(self, exc: BaseException) -> None:
        """Abort the handshake's comms (see dask_adapter.handshake_comms) and close."""
        loop = self.loop  # the comms' own: they are aborted there, before it closes
        if loop is not None:
            for comm in handshake_comms(exc):
                loop.add_callback(comm.abort)
        with contextlib.suppress(Exception):
            self.close()
