"""Data that already lives on the cluster is trained where it lies."""

import os

import dask
import dask.array as da
import numpy as np

import labkit as lk
from tests import helpers


def _block(block_id, client_pid, rows=300, cols=8):
    """A chunk made on a worker; refuses to be made in the client process."""
    if os.getpid() == client_pid:
        raise AssertionError("chunk was materialised on the client")
    return np.random.default_rng(block_id[0]).normal(size=(rows, cols))


def _dask_array(client_pid):
    return da.map_blocks(_block, client_pid=client_pid, chunks=((300,) * 6, (8,)),
                         dtype=np.float64)


def test_dask_array_trains_on_the_workers(dask_scheduler):
    arr = _dask_array(os.getpid())
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=3)])
    flow.train([arr], scheduler=dask_scheduler)
    local = arr.compute(scheduler=dask_scheduler.client.get)  # computed on the workers
    serial = lk.Flow([lk.nodes.PCA(output_dim=3)])
    serial.train([np.array_split(local, 6)])
    helpers.assert_nodes_equal(serial[0], flow[0])
    np.testing.assert_allclose(flow.execute(arr, scheduler=dask_scheduler), serial.execute(local),
                               rtol=1e-8, atol=1e-10)


def test_column_chunks_are_joined_into_whole_rows(dask_scheduler):
    x = np.random.default_rng(1).normal(size=(600, 6))
    arr = da.from_array(x, chunks=(150, 2))
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
    flow.train([arr], scheduler=dask_scheduler)
    serial = lk.Flow([lk.nodes.PCA(output_dim=2)])
    serial.train([x])
    helpers.assert_nodes_equal(serial[0], flow[0])


def test_futures_and_delayed_chunks(dask_scheduler):
    x = np.random.default_rng(2).normal(size=(800, 5))
    parts = np.array_split(x, 4)
    futures = dask_scheduler.client.scatter(parts[:2])
    delayed = [dask.delayed(np.array)(p) for p in parts[2:]]
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
    flow.train([futures + delayed], scheduler=dask_scheduler)
    serial = lk.Flow([lk.nodes.PCA(output_dim=2)])
    serial.train([parts])
    helpers.assert_nodes_equal(serial[0], flow[0])


def test_local_scheduler_takes_cluster_data_too(local_scheduler):
    x = np.random.default_rng(3).normal(size=(400, 4))
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
    flow.train([da.from_array(x, chunks=(100, 4))], scheduler=local_scheduler)
    serial = lk.Flow([lk.nodes.PCA(output_dim=2)])
    serial.train([x])
    helpers.assert_nodes_equal(serial[0], flow[0])
