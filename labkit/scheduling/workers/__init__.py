"""Where a task runs: on a Dask worker, a thread here, or a process of an offload pool.

``running`` runs one task wherever it lands; what it is handed arrives by
``reference`` (threads of this process), in ``shared`` memory (processes of
this machine) or as a lazy block (``lazy_chunks``).  ``offload`` and
``pools`` are the processes for GIL-holding tasks, ``lifeline`` ends them
with their parent, ``closing`` tells long tasks their worker closes,
``blas`` holds BLAS to one thread while tasks share this process, and
``gathering`` batches what a long task sends back (a trial's reports, a
rank's), shared by the experiments' sinks and data_parallel's report stream.

It imports labkit.errors, labkit.events and, of its siblings, ``..tasks``'
callables and pickling and ``..dask``'s adapter and log filters; never the
routes or the schedulers.
"""
