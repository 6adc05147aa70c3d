"""The client's side of a replica group on Dask workers: one rank a worker.

:mod:`.group` (the :class:`~labkit.data_parallel.replica_group.ReplicaGroup`
on Dask: set-up, state, close), :mod:`.tasks` (its tasks on the workers:
submitted, awaited, located), :mod:`.setup` (workers, payload, devices),
:mod:`.forming` (where the ranks meet and join their process group),
:mod:`.reach` (ranks that cannot reach each other, found in seconds),
:mod:`.steps` (client-fed steps sent ahead in commands), :mod:`.epochs`
(whole epochs on the workers, recovering from a lost worker),
:mod:`.blocks` (which rank reads which block of a Dask array),
:mod:`.copy_back` (the trained state copied to the client's model after a call),
:mod:`.saving` (checkpoints written by rank 0 and read by every rank at a location)
and :mod:`.stops` (why a stopped trial's scheduler stopped the group).

May import labkit.errors, labkit.events, labkit.scheduling, the shared modules
at the top of :mod:`labkit.data_parallel`, and :mod:`labkit.data_parallel.worker`
(the functions it sends to the workers); never :mod:`labkit.data_parallel.local`.
"""
