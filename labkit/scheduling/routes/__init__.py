"""How a task and its outcome travel between the client and Dask's workers.

``transport`` (the ``Transport`` base class, its registry and task keys),
``routes`` (the built-in routes: in-process, shared memory, direct scatter,
graph), ``packing`` (quick in-process tasks several to a Dask task),
``dispatch`` (``Dispatcher``: the routes a ``DaskScheduler`` holds, walked for
each task) and ``outcomes`` (the one thread by which outcomes reach batches).

It imports labkit.errors and its sibling folders ``..tasks`` (open tasks,
the ``Scheduler``'s error rule), ``..workers`` (what runs a task) and
``..dask`` (the adapter, ``connect``); never ``..dask.dask_scheduler``.
"""
