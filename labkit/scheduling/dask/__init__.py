"""The Dask cluster: reaching it, what it is, and the ``DaskScheduler`` that holds it.

``dask_adapter`` (everything labkit knows of Dask beyond its public API),
``connect`` (an address or a client, in bounded time), ``cluster`` (the
embedded cluster's kind and start), ``held`` (the cluster part a scheduler
holds: client, offload pool, BLAS hold, its workers), ``quiet`` (Dask's
logs), ``labkit_client`` (a client that survives a crossed handshake),
``main_guard``, ``worker_names`` and ``dask_scheduler``
(``DaskScheduler``: a cluster, its routes and their faults, held as parts).

It imports labkit.errors, labkit.events, labkit.constraints and its sibling
folders ``..tasks``, ``..workers`` and ``..routes``.
"""
