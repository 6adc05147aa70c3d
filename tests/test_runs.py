"""Runs: one scope for everything that takes time; wait=False, await, callbacks, cancel."""

import asyncio
import threading
import time

import numpy as np
import pytest
import torch
from sklearn.linear_model import LinearRegression, Ridge

import labkit as lk
from labkit.ensemble import FoldIndex, Layer, ParallelEvaluation, ParallelProcessing
from labkit.events import RunFinished, RunStarted
from labkit.program import Call, Loop, Program, Registers, Repeat, Spawn, Weave
from tests import helpers
from tests.ensemble.reference import Sleepy
from tests.flows.cases import X

CHUNKS = [X[i * 100:(i + 1) * 100] for i in range(12)]


def test_await_a_run_while_the_loop_stays_free(dask_scheduler):
    flow = lk.ParallelFlow([helpers.SlowPCA(delay=0.05, output_dim=3)])
    ticks = []

    async def cell():
        run = flow.train([CHUNKS], scheduler=dask_scheduler, wait=False)

        async def ticker():
            while not run.done():
                ticks.append(time.monotonic())
                await asyncio.sleep(0.01)
        ticking = asyncio.ensure_future(ticker())
        result = await run
        await ticking
        return result

    assert asyncio.run(cell()) is None
    assert len(ticks) > 5, "awaiting the run blocked the event loop"
    assert not flow[0].is_training()


def test_await_raises_the_runs_error():
    async def cell():
        return await lk.runs.start("demo", [], lambda scope: 1 / 0, wait=False)
    with pytest.raises(ZeroDivisionError):
        asyncio.run(cell())


def test_done_callbacks_run_once_also_when_added_late():
    release = threading.Event()
    run = lk.runs.start("demo", [], lambda scope: release.wait(10) and 7, wait=False)
    seen = []
    run.add_done_callback(lambda r: seen.append(("early", r.result())))
    release.set()
    assert run.result(timeout=10) == 7
    run.add_done_callback(lambda r: seen.append(("late", r.status)))
    assert seen == [("early", 7), ("late", "finished")]
    assert not run.cancel()


def test_run_scope_brackets_the_run_with_its_events():
    seen = []
    source = lk.events.Observable()
    source.subscribe(seen.append)
    with lk.run_scope("train", [source, None, source], n_nodes=2) as scope:
        scope.emit(lk.events.DeviceStats("cpu:0", "device"))
    with pytest.raises(ValueError):
        with lk.run_scope("train", [source]):
            raise ValueError("boom")
    kinds = [type(e).__name__ for e in seen]
    assert kinds == ["RunStarted", "DeviceStats", "RunFinished", "RunStarted", "RunFinished"]
    assert seen[0].n_nodes == 2 and seen[2].ok and not seen[4].ok and "boom" in seen[4].error
    assert seen[0].run == seen[2].run != seen[3].run


def test_trainer_fit_without_waiting_and_cancelled(recorder):
    model = torch.nn.Linear(4, 1)
    data = [(torch.randn(16, 4), torch.randn(16, 1)) for _ in range(6)]
    with lk.DataParallelTrainer(model, torch.nn.functional.mse_loss,
                                torch.optim.SGD(model.parameters(), lr=0.01),
                                devices=["cpu:0", "cpu:1"]) as trainer:
        trainer.subscribe(recorder)
        run = trainer.fit(data, epochs=2, wait=False)
        history = run.result(timeout=60)
        assert [h["epoch"] for h in history] == [1, 2] and run.kind == "fit"
        assert [e.run for e in recorder.of(RunStarted)] == [run.id]
        assert recorder.of(RunFinished)[0].ok

        slow = [(torch.randn(16, 4), torch.randn(16, 1)) for _ in range(2000)]
        run = trainer.fit(slow, epochs=50, wait=False)
        time.sleep(0.2)
        assert run.cancel()
        with pytest.raises(lk.CancelledError):
            run.result(timeout=60)
        assert recorder.of(RunFinished)[-1].cancelled


def test_ensemble_map_stack_and_evaluate_without_waiting(dask_scheduler):
    rng = np.random.default_rng(0)
    Xs = rng.normal(size=(200, 3))
    ys = Xs @ [1.0, 2.0, 3.0] + rng.normal(scale=0.1, size=200)
    pp = ParallelProcessing(dask_scheduler)
    expected = ParallelProcessing().map(Layer([LinearRegression()], FoldIndex(3)), Xs, ys)
    run = pp.map(Layer([LinearRegression()], FoldIndex(3)), Xs, ys, wait=False)
    np.testing.assert_allclose(run.result(timeout=60), expected, rtol=1e-10)
    layers = [Layer([LinearRegression(), Ridge()], FoldIndex(3), name="a"),
              Layer([LinearRegression()], FoldIndex(2), name="b")]
    assert pp.stack(layers, Xs, ys, wait=False).result(timeout=60).shape == (200, 1)
    table = ParallelEvaluation(dask_scheduler).evaluate(
        [Ridge()], {"ridge": {"alpha": [0.1, 10.0]}}, Xs, ys, cv=3, wait=False).result(timeout=60)
    assert [row["params"]["alpha"] for row in table.rows] == [0.1, 10.0]


def test_ensemble_run_cancel_raises(dask_scheduler):
    slow = Layer([(f"s{i}", Sleepy(0.3)) for i in range(6)], FoldIndex(2))
    run = ParallelProcessing(dask_scheduler).map(slow, X[:100], X[:100, 0], wait=False)
    time.sleep(0.3)
    assert run.cancel()
    with pytest.raises(lk.CancelledError):
        run.result(timeout=60)
    assert dask_scheduler.total_open_tasks == 0


def test_program_runs_without_waiting_and_cancels_between_steps():
    seen = []
    program = Program(Repeat(3, Call(seen.append, 1)))
    run = program.run(wait=False)
    assert run.result(timeout=10) is lk.program.DONE and seen == [1, 1, 1]
    forever = Program(Loop(Call(time.sleep, 0.01)))
    run = forever.run(wait=False)
    time.sleep(0.1)
    assert run.cancel()
    with pytest.raises(lk.CancelledError):
        run.result(timeout=10)
    assert forever.steps > 0


def test_spawn_shares_its_scheduler_with_other_work(dask_scheduler):
    """A Spawn is a batch of its own: direct use of the scheduler meanwhile does not steal it."""
    reg = Registers({"x": 4})
    spawn = Spawn([reg("x")], Call(helpers.double, reg("x"), store_to=reg("x")),
                  scheduler=dask_scheduler)
    program = Program(Weave(1, [spawn, Loop(Call(time.sleep, 0.005))]), reg)
    program.step()                                    # the spawned task is submitted
    for v in range(5):
        dask_scheduler.add_task(v, helpers.double)
    assert sorted(dask_scheduler.get_results()) == [0, 2, 4, 6, 8]
    assert program.run() is lk.program.DONE and reg["x"] == 8
