"""Replicas on the devices of this process, one thread each: the in-process replica group.

A step is named steps, as ``torch.nn.parallel`` composes ``scatter``,
``replicate``, ``parallel_apply`` and ``gather``: *split* the batch by the
planned counts (the arithmetic in :mod:`labkit.data_parallel.split`),
*replicate* the model once a device (:mod:`.replicate`), *apply* the replicas
side by side on threads (:mod:`.parallel_apply`), *reduce* their gradients
into the model (:mod:`.reduce`); :mod:`.thread_group` composes them into the
:class:`~labkit.data_parallel.replica_group.ReplicaGroup` the trainer calls.

May import labkit.errors, labkit.events and the shared modules at the top of
:mod:`labkit.data_parallel`; never :mod:`labkit.data_parallel.dask` or
:mod:`labkit.data_parallel.worker` (nothing here needs Dask).
"""
