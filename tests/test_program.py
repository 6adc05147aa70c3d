"""Tests of labkit.program: step-wise programs, copying/pickling part-way, Spawn on Dask."""

from __future__ import annotations

import asyncio
import copy
import pickle
import sys
import threading

import cloudpickle
import numpy as np
import pytest

from labkit.errors import InputError, TaskError
from labkit.nodes import PCA
from labkit.program import (BREAK, DONE, INCOMPLETE, Break, BufferRepeat, Call, Loop, Popen,
                            Print, Program, ProgramError, Registers, Repeat, Seq, Spawn, Switch,
                            Weave)

DATA = np.random.default_rng(0).normal(size=(400, 4)) * [3.0, 2.0, 1.0, 0.1]


class Dataset:
    """Hands out consecutive 50-row chunks of DATA."""

    def __init__(self):
        self.i = 0

    def next(self):
        chunk = DATA[self.i:self.i + 50]
        self.i += 50
        return chunk


class Log:
    """Records what it is called with (picklable)."""

    def __init__(self):
        self.items = []

    def add(self, item):
        self.items.append(item)
        return item


def square(x):
    return x * x


def add_one(x):
    return x + 1


def pca_program(n=8):
    reg, dataset, pca = Registers(), Dataset(), PCA(output_dim=2)
    body = Seq([Call(dataset.next, store_to=reg("x")), Call(pca.train, reg("x"))])
    return Program(Seq([Repeat(n, body), Call(pca.stop_training)]), reg), pca


def the_pca(program):
    return program.find(Call)[-1].fn.__self__


def test_pca_program_matches_direct_training():
    program, pca = pca_program()
    assert program.run() is DONE
    assert program.steps == 17
    direct = PCA(output_dim=2)
    for i in range(8):
        direct.train(DATA[50 * i:50 * i + 50])
    direct.stop_training()
    np.testing.assert_allclose(pca.v, direct.v)
    np.testing.assert_allclose(pca.d, direct.d)


@pytest.mark.parametrize("copier", [copy.deepcopy, lambda p: pickle.loads(pickle.dumps(p))])
def test_copy_part_way_then_resume_gives_same_result(copier):
    reference, ref_pca = pca_program()
    reference.run()
    program, pca = pca_program()
    assert program.run(5) is INCOMPLETE
    clone = copier(program)
    assert clone.run() is DONE and program.run() is DONE
    cloned_pca = the_pca(clone)
    assert cloned_pca is not pca
    for node in (pca, cloned_pca):
        np.testing.assert_allclose(node.v, ref_pca.v)
        np.testing.assert_allclose(node.d, ref_pca.d)
    assert clone.steps == program.steps == 17


def test_step_protocol_and_step_after_done():
    log = Log()
    program = Program(Seq([Call(log.add, 1), Call(log.add, 2)]))
    program.start()
    assert program.step() is INCOMPLETE
    assert program.step() is DONE
    assert log.items == [1, 2] and program.result == 2
    with pytest.raises(ProgramError, match="finished program"):
        program.step()
    element = Call(log.add, 3)
    assert element.step() is DONE
    with pytest.raises(ProgramError, match="finished Call"):
        element.step()
    assert program.start().run() is DONE and log.items == [1, 2, 3, 1, 2]


def test_repeat_counter_and_loop_break():
    reg, log = Registers(), Log()
    program = Program(Seq([Repeat(3, Call(log.add, reg("i")), counter="i"),
                           Loop(Call(lambda: BREAK if len(log.items) >= 5 else log.add("x")))]),
                      reg)
    assert program.run() is DONE
    assert log.items == [0, 1, 2, "x", "x"]

    def stop():
        raise Break

    assert Program(Repeat(10, Seq([Call(log.add, "y"), Call(stop)]))).run() is DONE
    assert log.items[-1] == "y" and log.items.count("y") == 1


def test_weave_interleaves_round_robin():
    log = Log()
    weave = Weave(2, [Repeat(3, Call(log.add, "a")), Repeat(2, Call(log.add, "b"))])
    assert Program(weave).run() is DONE
    assert log.items == ["a", "b", "a", "b", "a"]
    log.items.clear()
    first = Weave(1, [Repeat(3, Call(log.add, "a")), Repeat(1, Call(log.add, "b"))])
    Program(first).run()
    assert log.items == ["a", "b"]


def test_buffer_repeat_collects_results():
    reg = Registers({"n": 0})
    bump = Seq([Call(add_one, reg("n"), store_to=reg("n")), Call(square, reg("n"))])
    program = Program(BufferRepeat(4, bump, store_to=reg("squares")), reg)
    program.run()
    assert reg["squares"] == [1, 4, 9, 16] and reg["n"] == 4


def test_switch_picks_branch_and_names_missing_key():
    reg, log = Registers({"mode": "b"}), Log()
    branches = {"a": Call(log.add, "A"), "b": Call(log.add, "B")}
    assert Program(Switch(reg("mode"), branches, store_to=reg("out")), reg).run() is DONE
    assert reg["out"] == "B"
    Program(Switch(lambda: "a", {"a": Call(log.add, "A")})).run()
    assert log.items == ["B", "A"]
    with pytest.raises(ProgramError, match="no branch for key 'z'"):
        Program(Switch(lambda: "z", {"a": Call(log.add, "A")})).run()


def test_print(capsys):
    reg = Registers({"x": 42})
    Program(Seq([Print("hello"), Print(reg("x"))]), reg).run()
    assert capsys.readouterr().out == "hello\n42\n"


def test_popen_exit_status_without_blocking():
    reg, log = Registers(), Log()
    script = "import sys, time; time.sleep(0.3); sys.exit(3)"
    weave = Weave(2, [Popen([sys.executable, "-c", script], store_to=reg("status")),
                      Loop(Call(lambda: BREAK if "status" in reg else log.add(1)))])
    program = Program(weave, reg)
    assert program.run() is DONE
    assert reg["status"] == 3
    assert len(log.items) > 10  # the counting calls went on while the process ran
    assert Program(Popen([sys.executable, "-c", "pass"], store_to="ok")).run() is DONE


def test_popen_running_cannot_be_copied_and_is_killed_by_weave():
    sleeper = Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    program = Program(Weave(1, [sleeper, Call(print, "quick")]))
    program.step()
    with pytest.raises(ProgramError, match="running Popen"):
        copy.deepcopy(program)
    assert program.run() is DONE  # the Call finishes the Weave, which kills the sleeper
    assert sleeper._proc is None


def test_spawn_runs_on_a_worker_and_merges_registers(dask_scheduler):
    reg = Registers({"x": 3, "y": 10, "untouched": "u"})
    fragment = Seq([Call(square, reg("x"), store_to=reg("x")),
                    Call(add_one, reg("y"), store_to=reg("z"))])
    spawn = Spawn([reg("x"), reg("y")], fragment, scheduler=dask_scheduler)
    log = Log()
    program = Program(Weave(1, [spawn, Loop(Call(log.add, 1))]), reg)
    assert program.run() is DONE
    assert reg["x"] == 9 and reg["z"] == 11 and reg["y"] == 10 and reg["untouched"] == "u"
    assert spawn.result == {"x": 9, "z": 11}


def test_spawn_names_missing_register_and_missing_scheduler(local_scheduler):
    reg = Registers({"x": 2})
    program = Program(Spawn(["x"], Call(square, reg("nope"))), reg)
    with pytest.raises(ProgramError, match="no scheduler"):
        program.run()
    program = Program(Spawn(["x"], Call(square, reg("nope")), scheduler=local_scheduler), reg)
    with pytest.raises(Exception, match="'nope'"):
        program.run()


def test_find_and_replace_add_a_hook():
    program, pca = pca_program(2)
    trains = program.find(pca.train)
    assert len(trains) == 1 and program.find(Repeat)[0].n == 2
    assert program.find(lambda e: isinstance(e, Call) and e.fn == pca.stop_training)
    hooked = Log()
    train = trains[0]
    train.replace_with(Seq([Call(hooked.add, program.registers("x")), train]))
    program.run()
    assert len(hooked.items) == 2 and pca.v is not None
    program.replace(program.element, Call(hooked.add, "root"))
    program.start().run()
    assert hooked.items[-1] == "root"


def test_str_prints_code():
    reg, dataset = Registers(), Dataset()
    program = Program(Seq([Repeat(10, Call(dataset.next, store_to=reg("x"))),
                           Weave(1, [Call(square, 2)]),
                           Switch(reg("m"), {"a": Print("a")})]), reg)
    text = str(program)
    assert "Repeat(10, Call(dataset.next, store_to=reg('x')))" in text
    assert "Weave(1, [" in text and "Call(square, 2)" in text
    assert "Switch(reg('m'), {" in text and "'a': Print('a')" in text


def test_clear_errors():
    with pytest.raises(InputError, match="Seq item 1"):
        Seq([Call(square, 1), "oops"])
    with pytest.raises(InputError, match="Repeat element"):
        Repeat(3, square)
    with pytest.raises(InputError, match="count"):
        Repeat(-1, Call(square, 1))
    with pytest.raises(InputError, match="n_required"):
        Weave(3, [Call(square, 1)])
    reg = Registers()
    with pytest.raises(ProgramError, match="register 'missing' is not set"):
        Program(Call(square, reg("missing")), reg).run()
    with pytest.raises(ProgramError, match="needs a Program's registers"):
        Call(square, 1, store_to="x").run()


def test_background_stepping_returns_at_once_and_finishes():
    log = Log()
    program = Program(Repeat(5, Call(log.add, 1)))
    seen = []
    program.subscribe(lambda p: seen.append(p.steps))

    async def drive():
        task = program.start_background()
        assert not program.done and program.running  # returned before any step
        await task

    asyncio.run(drive())
    assert program.done and len(log.items) == 5 and not program.running
    assert seen[-1] == 5 and set(range(6)) <= set(seen)  # at start, then after each step
    pickle.dumps(program)  # listeners and the task are not pickled


def test_pause_and_resume_background_stepping():
    log = Log()
    program = Program(Repeat(1000, Call(log.add, 1)))

    async def drive():
        task = program.start_background()
        while program.steps < 10:
            await asyncio.sleep(0)
        program.pause()
        await task
        paused_at = program.steps
        await asyncio.sleep(0.01)
        assert program.steps == paused_at < 1000 and not program.done
        await program.start_background()

    asyncio.run(drive())
    assert program.done and len(log.items) == 1000


def fails_on_three(i):
    if i == 3:
        raise ValueError("three is bad")
    return i


def test_a_failing_step_names_element_and_step_and_can_be_retried():
    reg = Registers()
    program = Program(Repeat(5, Call(fails_on_three, reg("i"), store_to=reg("last")),
                             counter=reg("i")), reg)
    with pytest.raises(TaskError, match="three is bad") as info:
        program.run()
    assert info.value.where["step"] == 3 and "fails_on_three" in info.value.where["element"]
    assert info.value.original_type == "ValueError" and reg["last"] == 2
    reg["i"] = 4  # fix the input; stepping again retries the same call
    assert program.run() is DONE and reg["last"] == 4


def test_background_error_is_kept_not_lost():
    program = Program(Seq([Call(fails_on_three, 3)]))

    async def drive():
        await program.start_background()

    asyncio.run(drive())
    assert isinstance(program.error, TaskError) and not program.running and not program.done


# -- copying and pickling what cannot be ------------------------------------------------------

class Locked:
    """Holds a lock: neither picklable nor deep-copyable."""

    def __init__(self):
        self.lock = threading.Lock()

    def value(self):
        return 1


def lambda_programs():
    """``{case: (program, what the error names)}``: a lambda somewhere inside each."""
    reg = Registers({"n": 0})
    log = Log()
    return {
        "Call of a lambda": (Program(Seq([Call(log.add, 1), Call(lambda r: r + 1, 2),
                                          Call(log.add, 3)])), ("Call", "its fn", "lambda")),
        "lambda argument": (Program(Seq([Call(log.add, 1), Call(map, lambda r: r, [1]),
                                         Call(log.add, 3)])), ("Call", "args[0]", "lambda")),
        "lambda keyword": (Program(Seq([Call(log.add, 1), Call(sorted, [2, 1], key=lambda r: -r),
                                        Call(log.add, 3)])), ("Call", "kwargs['key']", "lambda")),
        "Switch on a lambda": (Program(Seq([Call(log.add, 1),
                                            Switch(lambda: "a", {"a": Call(log.add, "A")}),
                                            Call(log.add, 3)])), ("Switch", "selector")),
        "deep in a Repeat": (Program(Repeat(3, Seq([Call(log.add, 1), Call(lambda: 2)]))),
                             ("Call", "its fn", "lambda")),
        "local function": (Program(Seq([Call(log.add, 1), Call(local_function()),
                                        Call(log.add, 3)])), ("local_function.<locals>.inner",)),
        "register holds a lambda": (Program(Seq([Call(log.add, 1), Call(log.add, reg("n")),
                                                 Call(log.add, 3)]),
                                            Registers({"n": 0, "f": lambda: 1})),
                                    ("register 'f'", "lambda")),
    }


def local_function():
    def inner():
        return 2
    return inner


@pytest.mark.parametrize("case", list(lambda_programs()))
def test_pickling_a_lambda_part_way_names_the_element_and_the_fix(case):
    program, names = lambda_programs()[case]
    program.run(1)
    with pytest.raises(ProgramError) as info:
        pickle.dumps(program)
    message = str(info.value)
    assert all(name in message for name in names), message
    assert "module level" in message and "pickle with cloudpickle" in message
    if "register" not in case:
        assert "cloudpickle.dumps(program) works" in message
    assert isinstance(info.value.__cause__, (pickle.PicklingError, AttributeError))
    if "register" not in case:
        assert "element" in info.value.where and info.value.where["element"] in message
    clone = cloudpickle.loads(cloudpickle.dumps(program))  # as the message says
    assert clone.run() is DONE
    copy.deepcopy(program).run()  # a lambda copies (by reference)
    assert program.run() is DONE  # the failed pickle left the program as it was


def test_pickling_and_copying_something_locked_names_the_element():
    program = Program(Seq([Call(print, "x"), Call(Locked().value), Call(print, "y")]))
    program.run(1)
    with pytest.raises(ProgramError, match="cannot be pickled") as info:
        pickle.dumps(program)
    assert info.value.where["element"] == "Call(locked.value)"
    assert "its fn" in str(info.value) and "_thread.lock" in str(info.value)
    assert "cloudpickle cannot pickle it either" in str(info.value)
    with pytest.raises(ProgramError, match="cannot be copied") as info:
        copy.deepcopy(program)
    assert info.value.where["element"] == "Call(locked.value)"
    assert program.run() is DONE and program.steps == 3


def test_copying_a_register_that_cannot_be_copied_names_it():
    reg = Registers({"lock": threading.Lock(), "n": 1})
    program = Program(Call(add_one, reg("n"), store_to=reg("n")), reg)
    with pytest.raises(ProgramError, match="register 'lock'"):
        copy.deepcopy(program)
    with pytest.raises(ProgramError, match="register 'lock'"):
        pickle.dumps(program)
    assert program.run() is DONE and reg["n"] == 2


def test_programs_without_lambdas_still_pickle_and_copy_shallowly():
    program, _ = pca_program(2)
    program.run(2)
    assert pickle.loads(pickle.dumps(program, protocol=0)).run() is DONE
    element = Call(lambda: 1)
    assert copy.copy(element).fn is element.fn  # a shallow copy does not pickle


def test_spawn_of_a_lambda_names_the_element_and_step(local_scheduler):
    reg = Registers({"x": 2})
    program = Program(Seq([Call(square, 3),
                           Spawn(["x"], Call(lambda x: x + 1, reg("x"), store_to=reg("x")),
                                 scheduler=local_scheduler)]), reg)
    with pytest.raises(ProgramError, match="lambda") as info:
        program.run()
    assert info.value.where["step"] == 1 and "<lambda>" in info.value.where["element"]


# -- wrong arguments --------------------------------------------------------------------------

BAD_ELEMENTS = {
    "Repeat True times": (lambda: Repeat(True, Call(print)), ("Repeat count", "True")),
    "Repeat 2.5 times": (lambda: Repeat(2.5, Call(print)), ("Repeat count", "2.5")),
    "Repeat counter 5": (lambda: Repeat(2, Call(print), counter=5), ("counter", "5")),
    "Weave needs True": (lambda: Weave(True, [Call(print)]), ("n_required", "True")),
    "Weave needs -1": (lambda: Weave(-1, [Call(print)]), ("n_required", "0..1", "-1")),
    "store_to a number": (lambda: Call(print, store_to=5), ("store_to", "5")),
    "Switch on a number": (lambda: Switch(5, {"a": Call(print)}), ("selector", "5")),
    "Spawn of a name": (lambda: Spawn("xy", Call(print)), ("Spawn", "'xy'")),
    "Spawn of numbers": (lambda: Spawn([1], Call(print)), ("Spawn", "[1]")),
    "Program registers a dict": (lambda: Program(Call(print), {"x": 1}),
                                 ("registers", "{'x': 1}")),
    "run -1 steps": (lambda: Program(Call(print)).run(-1), ("n_steps", "-1")),
    "run '5' steps": (lambda: Program(Call(print)).run("5"), ("n_steps", "'5'")),
    "element run nan steps": (lambda: Call(print).run(float("nan")), ("n_steps", "nan")),
    "find a string": (lambda: Program(Call(print)).find("print"), ("find", "'print'")),
    "replace what is not there": (lambda: Program(Call(print)).replace(Call(len), Call(print)),
                                  ("replace", "Call(len)")),
    "replace a number": (lambda: Program(Call(print)).replace(5, Call(print)), ("replace", "5")),
    "replace_with outside a program": (lambda: Call(len).replace_with(Call(print)),
                                       ("Call(len)", "not in a program")),
}


@pytest.mark.parametrize("case", BAD_ELEMENTS)
def test_bad_arguments_are_input_errors_naming_them(case):
    make, names = BAD_ELEMENTS[case]
    with pytest.raises(InputError) as info:
        make()
    assert all(name in str(info.value) for name in names), str(info.value)
    reg = Registers()
    assert Program(Repeat(np.int64(2), Call(add_one, 1, store_to="y")), reg).run() is DONE
    assert reg["y"] == 2


def exits_on_three(i):
    if i == 3:
        sys.exit(1)
    return i


def test_sys_exit_in_a_call_fails_the_step_named_and_can_be_retried():
    """``sys.exit()`` in an element's callable fails its step as any error does."""
    reg = Registers()
    program = Program(Repeat(5, Call(exits_on_three, reg("i"), store_to=reg("last")),
                             counter=reg("i")), reg)
    with pytest.raises(TaskError) as info:
        program.run()
    assert info.value.where["step"] == 3 and info.value.original_type == "SystemExit"
    reg["i"] = 4
    assert program.run() is DONE and reg["last"] == 4


def test_weaving_one_element_with_itself_is_refused_when_made():
    """``Weave(None, [c, c])`` failed mid-run ("step() on a finished Call")."""
    c = Call(print, 1)
    for woven in ([c, c], [Seq([c]), Repeat(2, c)], [Weave(None, [c, Call(print, 2)]), c]):
        with pytest.raises(InputError, match="Weave items 0 and 1 both hold the same element"):
            Weave(None, woven)
    Weave(None, [c, copy.deepcopy(c)])            # a copy is an element of its own


def test_an_element_reused_one_after_the_other_runs_each_time():
    out = []
    c = Call(out.append, 1)
    program = Program(Seq([c, c, Repeat(2, c), Switch(lambda: "a", {"a": c, "b": c})]),
                      Registers())
    assert program.run() is DONE and out == [1] * 5


def test_a_replace_with_that_weaves_an_element_with_itself_fails_before_a_step():
    from labkit.program import ProgramError
    a, b = Call(print, 1), Call(print, 2)
    program = Program(Weave(None, [a, Seq([b])]), Registers())
    b.replace_with(a)
    with pytest.raises(ProgramError, match="same element"):
        program.run()


# -- the element contract --------------------------------------------------------------------

def contract_program():
    """A program with one element of each kind (Spawn has no scheduler: it is not run)."""
    reg = Registers({"k": "a"})
    root = Seq([Call(add_one, 1, store_to="x"), Print(reg("x")),
                Repeat(2, Call(add_one, 2)), BufferRepeat(2, Call(add_one, 3)),
                Loop(Call(lambda_free_break)), Weave(None, [Call(add_one, 4), Call(add_one, 5)]),
                Switch("k", {"a": Call(add_one, 6)}), Popen(["true"]),
                Spawn(["x"], Call(add_one, 7))])
    return Program(root, reg), root


def lambda_free_break():
    return BREAK


def test_every_element_honours_the_public_contract():
    """What a parent asks of a child is public: parents, registers, code(), where(), bind()."""
    from labkit.program.element import Element
    program, root = contract_program()
    kinds = set()
    for element in root.walk():
        kinds.add(type(element))
        assert element.registers is program.registers            # bound by the Program
        holders = [p for p in element.parents if any(c is element for c in p.children)]
        assert holders == element.parents and len(holders) == 1  # linked both ways
        assert element.code() == str(element) and element.code().startswith(type(element).__name__)
        assert element.where() == {"element": element.code()[:200]}
    assert root.parents == [program]
    assert kinds == {Seq, Call, Print, Repeat, BufferRepeat, Loop, Weave, Switch, Popen, Spawn}
    assert all(issubclass(kind, Element) for kind in kinds)
    other = Registers()
    loose = Call(add_one, 1)
    loose.bind(other)
    assert loose.registers is other
    loose.bind(Registers())                                       # the first binding stays
    assert loose.registers is other


def test_copying_knows_elements_and_registers_only_as_self_checking():
    """copying.py sits below element.py and registers.py (no import circle): it stops a trial
    pickle at anything SelfChecking, which elements and registers are."""
    import labkit.program.copying as copying
    from labkit.program.element import Element
    assert issubclass(Element, copying.SelfChecking)
    assert issubclass(Registers, copying.SelfChecking)
    assert not any(name in vars(copying) for name in ("Element", "Registers"))


class ThirdPartyPickler(pickle.Pickler):
    """A pickler of another module (as cloudpickle's): it decides about functions itself."""

    def dump(self, obj):
        return super().dump(obj)                                  # Python code, as cloudpickle's


def test_only_pickles_own_picklers_are_checked_for_functions_by_name():
    import io
    program = Program(Call(lambda: 1))
    with pytest.raises(ProgramError, match="lambda"):
        pickle.dumps(program)
    with pytest.raises(ProgramError, match="lambda"):
        pickle._Pickler(io.BytesIO()).dump(program)               # pickle's Python pickler
    with pytest.raises(Exception) as info:                        # pickle's own error, not ours
        ThirdPartyPickler(io.BytesIO()).dump(program)
    assert not isinstance(info.value, ProgramError)
