"""Step-wise control-flow programs that can be copied and pickled part-way.

A program is a tree of elements (:class:`Call`, :class:`Seq`, :class:`Repeat`,
:class:`Loop`, :class:`Weave`, :class:`BufferRepeat`, :class:`Switch`,
:class:`Print`, :class:`Popen`, :class:`Spawn`).  Each element keeps its
execution state in plain data (``element.state``), never in a generator, so a
program stopped after any step can be deep-copied or pickled and resumed with
the same outcome.  Values flow through :class:`Registers`: ``reg("x")`` is a
reference resolved when a call runs, and ``store_to=reg("x")`` writes a result.

The room: :mod:`.status` (step statuses, errors) and :mod:`.copying` (copy and
pickle checks) at the bottom, then :mod:`.registers`, :mod:`.element` (the
element contract: what a parent may ask of a child), the elements
(:mod:`.control`, :mod:`.processes`) and :mod:`.driver` (the Program).  It
imports labkit.errors, labkit.constraints, labkit.events and labkit.runs;
a Spawn is handed its scheduler, so never labkit.scheduling, and never
labkit.views (the runner view reads a program, not the reverse).

What cannot be copied or pickled is named: ``pickle.dumps(program)`` of a
program holding a lambda raises a :class:`ProgramError` naming the element
(or register) and field, why, and the fix: a function defined at module
level, or ``cloudpickle.dumps(program)``, which pickles lambdas by value.

Examples
--------
>>> reg = Registers()
>>> total = []
>>> program = Program(Seq([Repeat(3, Call(total.append, reg("i")), counter=reg("i")),
...                        Call(sum, total, store_to=reg("s"))]), reg)
>>> program.run()
DONE
>>> reg["s"], program.steps
(3, 4)
>>> print(program)
Seq([
    Repeat(3, Call(list.append, reg('i')), counter=reg('i')),
    Call(sum, [0, 1, 2], store_to=reg('s')),
])
"""

from __future__ import annotations

from .control import BufferRepeat, Call, Loop, Print, Repeat, Seq, Switch, Weave
from .driver import Program
from .element import Element
from .processes import Popen, Spawn
from .registers import Ref, Registers
from .status import BREAK, DONE, INCOMPLETE, Break, ProgramError

__all__ = [
    "ProgramError",
    "Break",
    "INCOMPLETE",
    "DONE",
    "BREAK",
    "Registers",
    "Ref",
    "Element",
    "Call",
    "Seq",
    "Repeat",
    "Loop",
    "Weave",
    "BufferRepeat",
    "Switch",
    "Print",
    "Popen",
    "Spawn",
    "Program",
]
