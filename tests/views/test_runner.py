"""The runner panel of a program: drawn from one writer thread, throttled, with working buttons."""

from __future__ import annotations

import asyncio

import pytest

import labkit as lk
from labkit.program import Call, Program, Registers, Repeat


def add(x, y):
    return x + y


def counting_program(n):
    reg = Registers({"total": 0})
    return Program(Repeat(n, Call(add, reg("total"), reg("i"), store_to=reg("total")),
                          counter=reg("i")), reg)


async def until(condition, timeout=10.0):
    """Yield to the loop until ``condition()`` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_runner_steps_in_background_and_draws_at_most_max_rate(comms, no_thread_leak):
    program = counting_program(3000)

    async def drive():
        panel = lk.runner(program, max_rate=10)
        assert not program.done  # the call returned before any step ran
        start = asyncio.get_running_loop().time()
        await program._ui["task"]
        return panel, asyncio.get_running_loop().time() - start

    panel, elapsed = asyncio.run(drive())
    panel._writer.stop()
    assert program.registers["total"] == sum(range(3000))
    status = comms.state(panel.status)["value"]
    assert "3000</b> steps" in status and "finished" in status
    assert "total" in comms.state(panel.registers)["value"]
    assert "4498500" in comms.state(panel.registers)["value"]
    # 3000 steps, but the status widget was redrawn only at the writer's rate
    updates = [u for u in comms.updates(panel.status) if "value" in u]
    assert len(updates) <= elapsed * 10 + 3, (len(updates), elapsed)
    assert comms.state(panel.buttons["Run"])["disabled"] is True
    panel.close()


def test_runner_buttons_step_pause_and_run(comms, no_thread_leak):
    program = counting_program(20000)
    panel = lk.runner(program, start=False)
    panel.buttons["Step"].click()
    panel.buttons["Step"].click()
    assert program.steps == 2

    async def drive():
        panel.buttons["Run"].click()
        await until(lambda: program.steps > 20)
        panel.buttons["Pause"].click()
        await until(lambda: not program.running)
        paused = program.steps
        await asyncio.sleep(0.05)
        assert program.steps == paused and not program.done
        panel.buttons["Run"].click()
        await until(lambda: program.done)

    asyncio.run(drive())
    assert program.registers["total"] == sum(range(20000))
    panel._writer.stop()
    assert "20000</b> steps" in comms.state(panel.status)["value"]
    panel.close()


def test_runner_shows_the_error_that_stopped_the_program(comms, no_thread_leak):
    def boom(_):
        raise RuntimeError("no more data")

    reg = Registers({"total": 0})
    program = Program(Repeat(5, Call(boom, reg("i")), counter=reg("i")), reg)

    async def drive():
        panel = lk.runner(program)
        await program._ui["task"]
        return panel

    panel = asyncio.run(drive())
    panel._writer.stop()
    text = comms.state(panel.registers)["value"]
    assert "no more data" in text and "labkit-runner-error" in text and "step 0" in text
    panel.close()


def test_runner_in_a_real_kernel_returns_at_once_and_keeps_the_notebook_usable(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    cells = [
        "import time, labkit as lk\n"
        "from labkit.program import Call, Program, Registers, Repeat\n"
        "reg = Registers({'n': 0})\n"
        "program = Program(Repeat(40, Call(time.sleep, 0.025)), reg)\n"
        "t0 = time.perf_counter()\n"
        "panel = lk.runner(program)\n"
        "panel",
        "returned_after = time.perf_counter() - t0\n"
        "print('returned', returned_after, 'steps', program.steps)",
        "import asyncio\n"
        "while not program.done:\n"
        "    await asyncio.sleep(0.05)\n"
        "print('done', program.steps, program.done)",
    ]
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells for o in c.outputs]
    widget = [o for o in nb.cells[0].outputs
              if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert widget, outputs  # the panel was displayed as a widget
    returned = nb.cells[1].outputs[0]["text"].split()
    assert float(returned[1]) < 0.5 and int(returned[3]) < 40  # the cell did not wait 1 s
    assert nb.cells[2].outputs[0]["text"].split() == ["done", "40", "True"]
