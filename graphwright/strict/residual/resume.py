"""Resume functions: a function's own bytecode, continued from one instruction.

At a graph break the entry runs the graph so far and the breaking instruction
in Python, then calls a resume function for the rest. A resume function is a
new code object, assembled with the `bytecode` package from the original:

    def graphwright_resume_in_f_at_12(___stack0, ___stack1, x, y):
        <push ___stack0>, <PUSH_NULL>, <push ___stack1>   # the live stack, bottom first
        <re-enter `with torch.no_grad():`>                 # open grad/autocast blocks
        jump to the instruction after the break
        ... the original instructions, unchanged ...

The live locals become parameters under their own names; the original's
cell and free variables all become free variables, so the entry passes the
very cells the original frame had. Every original instruction stays in place,
exception table included, so `with` and `try` blocks around the rest behave
exactly as in the original. Resume code is made once per (code, instruction,
layout) and compiled on its first call like any function. A break inside a
resume function resumes from the original code again (`original_position`),
so resume functions never nest. Resuming a generator's code makes a generator
function: calling it gives a generator suspended where the original was.
"""
from __future__ import annotations

import dis
import inspect
import types
import weakref
from dataclasses import dataclass
from typing import Any

from bytecode import Bytecode, CellVar, FreeVar, Instr, Label

from .explicit_super import ExplicitSuper
from .instruction_index import real_instructions

_PROLOGUE = frozenset({"COPY_FREE_VARS", "MAKE_CELL", "RETURN_GENERATOR", "POP_TOP", "RESUME"})
_FAST_OPS = frozenset({"LOAD_FAST", "STORE_FAST", "DELETE_FAST"})
# resume code -> (the original code, resume offset -> original offset)
_ORIGINS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# original code -> {(offset, layout): resume code}
_MADE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class ReenteredContext:
    """A `with` block open at the break: `factory(*args)` makes an equivalent context manager."""

    factory: Any
    args: tuple


NULL_SLOT = "null"
VALUE_SLOT = "value"
SENT_SLOT = "sent"  # the value a suspended `yield` receives: None, as `next()` sends


@dataclass(frozen=True)
class ResumeLayout:
    """What the resume function receives: one entry per stack slot, bottom first (a value
    argument, a NULL, a context to re-enter, or the value sent to a resumed generator's
    `yield`), then the live locals by name."""

    stack: tuple[Any, ...]
    live_locals: tuple[str, ...]

    def stack_arguments(self) -> list[str]:
        return [f"___stack{index}" for index, slot in enumerate(self.stack) if slot == VALUE_SLOT]

    def parameters(self) -> list[str]:
        return self.stack_arguments() + [local_name(name) for name in self.live_locals]


def local_name(name: str) -> str:
    """The name resume code gives the original's local `name`: the same, unless it is no
    identifier (pytest's assertion rewriting makes locals named `@py_assert1`), which a
    parameter cannot be for `inspect.signature` and the entry's generated source."""
    if name.isidentifier():
        return name
    return "___local_" + "".join(char if char.isalnum() else "_" for char in name)


def original_position(code: types.CodeType, offset: int) -> tuple[types.CodeType, int]:
    """The user's code object and offset that `offset` in `code` (maybe resume code) runs."""
    origin = _ORIGINS.get(code)
    if origin is None:
        return code, offset
    return origin[0], origin[1][offset]


def original_code(code: types.CodeType) -> types.CodeType:
    """The user's code object that `code` (maybe resume code) continues."""
    origin = _ORIGINS.get(code)
    return code if origin is None else origin[0]


def resume_name(code: types.CodeType, offset: int) -> str:
    line = next((inst.positions.lineno for inst in dis.get_instructions(code)
                 if inst.offset >= offset and inst.positions and inst.positions.lineno), code.co_firstlineno)
    return f"graphwright_resume_in_{code.co_name}_at_{line}"


def resume_code(code: types.CodeType, offset: int, layout: ResumeLayout) -> types.CodeType:
    """The code of a function continuing `code` (a user's code object, never resume code) at
    the instruction at `offset`; made once, kept as long as `code` lives."""
    made = _MADE.setdefault(code, {})
    resumed = made.get((offset, layout))
    if resumed is None:
        resumed = made[(offset, layout)] = _assemble_resume_code(code, offset, layout)
    return resumed


def _assemble_resume_code(code: types.CodeType, offset: int, layout: ResumeLayout) -> types.CodeType:
    program = Bytecode.from_code(code, conserve_exception_block_stackdepth=True)
    real, _ = real_instructions(code)
    skipped = _prologue_length(real)
    supers = ExplicitSuper(code, cells_are_free=True)
    target = Label()
    body: list[Any] = []
    position = 0
    location = None
    for item in program:
        if isinstance(item, Instr):
            position += 1
            if position <= skipped:
                continue
            if real[position - 1].offset == offset:
                body.append(target)
                location = item.location
            item, added = supers.rewrite(item, real[position - 1].offset)
            if added:
                body += [item, *added]
                continue
            if isinstance(item.arg, CellVar):
                item = Instr(item.name, FreeVar(item.arg.name), location=item.location)
            elif item.name in _FAST_OPS and local_name(item.arg) != item.arg:
                item = Instr(item.name, local_name(item.arg), location=item.location)
        body.append(item)
    if location is None:
        raise ValueError(f"no instruction at offset {offset} in {code.co_name}")
    cells = list(code.co_cellvars) + list(code.co_freevars)
    prologue: list[Any] = []
    if cells:
        prologue.append(Instr("COPY_FREE_VARS", len(cells), location=location))
    if code.co_flags & inspect.CO_GENERATOR:  # calling the resume function makes the generator
        prologue += [Instr("RETURN_GENERATOR", location=location), Instr("POP_TOP", location=location)]
    prologue.append(Instr("RESUME", 0, location=location))
    arguments = iter(layout.stack_arguments())
    for slot in layout.stack:
        if slot == NULL_SLOT:
            prologue.append(Instr("PUSH_NULL", location=location))
        elif slot == VALUE_SLOT:
            prologue.append(Instr("LOAD_FAST", next(arguments), location=location))
        elif slot == SENT_SLOT:
            prologue.append(Instr("LOAD_CONST", None, location=location))
        else:
            prologue += _reenter(slot, location)
    prologue.append(Instr("JUMP_FORWARD", target, location=location))
    program.clear()
    program.extend(prologue + body)
    program.argnames = layout.parameters()
    program.argcount = len(program.argnames)
    program.posonlyargcount = program.kwonlyargcount = 0
    program.flags &= ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    program.cellvars = []
    program.freevars = cells
    program.name = program.qualname = resume_name(code, offset)
    resumed = program.to_code(compute_exception_stack_depths=False)  # the original depths hold
    new, _ = real_instructions(resumed)
    prologue_count = sum(1 for item in prologue if isinstance(item, Instr))
    _ORIGINS[resumed] = (code, {inst.offset: real[skipped + index].offset
                                for index, inst in enumerate(new[prologue_count:])})
    return resumed


def _prologue_length(real: list[dis.Instruction]) -> int:
    """How many leading instructions set up cells and the frame, up to the first RESUME."""
    for index, inst in enumerate(real):
        if inst.opname == "RESUME":
            return index + 1
        if inst.opname not in _PROLOGUE:
            return index
    return 0


def _reenter(context: ReenteredContext, location: Any) -> list[Instr]:
    """`with factory(*args):` up to the body: leaves `__exit__` on the stack as BEFORE_WITH does."""
    loads = [Instr("LOAD_CONST", arg, location=location) for arg in context.args]
    return [Instr("PUSH_NULL", location=location), Instr("LOAD_CONST", context.factory, location=location),
            *loads, Instr("PRECALL", len(loads), location=location),
            Instr("CALL", len(loads), location=location), Instr("BEFORE_WITH", location=location),
            Instr("POP_TOP", location=location)]


def make_resume_function(code: types.CodeType, f_globals: dict, closure: tuple | None) -> types.FunctionType:
    return types.FunctionType(code, f_globals, code.co_name, None, closure or None)
