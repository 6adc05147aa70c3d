"""Tasks on the client: what a task is, its batch, the in-flight window, the ``Scheduler``.

The backend-free half of scheduling: ``callables`` (what users write),
``open_task`` (a task's book-keeping between its start and its outcome),
``pickling`` (what cannot be sent, named), ``results`` (result containers),
``window`` (the in-flight limits), ``starting`` (the task starter a batch
holds), ``batch``, ``batch_runs``, ``base`` (the ``Scheduler`` every backend
derives from) and ``local`` (``LocalScheduler``).

It imports labkit.errors, labkit.events, labkit.constraints and, of its
siblings, only what runs a task in this thread (``..workers.running``) and
reads Dask's types (``..dask.dask_adapter``, ``..dask.connect``'s limits).
"""
