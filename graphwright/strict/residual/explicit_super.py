"""Zero-argument `super()` written out, in code the residual machinery rewrites.

CPython's `super()` without arguments reads the frame that calls it: its `__class__` cell
and its first local. Resume code takes other parameters first (the live stack), and routed
code makes every call from the router's frame, so in both the call is written out as
`super(__class__, <first argument>)`, what CPython would compute; `liveness` counts the first
argument as read there.
"""
from __future__ import annotations

import functools
import types
from typing import Any

from bytecode import CellVar, FreeVar, Instr

from .instruction_index import real_instructions


@functools.lru_cache(maxsize=1024)
def zero_argument_supers(code: types.CodeType) -> frozenset[int]:
    """The offsets of the `LOAD_GLOBAL super` that starts each `super()` call without arguments."""
    if "__class__" not in code.co_freevars or code.co_argcount == 0:
        return frozenset()
    instructions, _ = real_instructions(code)
    return frozenset(inst.offset for inst, following in zip(instructions, instructions[1:])
                     if inst.opname == "LOAD_GLOBAL" and inst.argval == "super"
                     and following.opname == "PRECALL" and following.arg == 0)


class ExplicitSuper:
    """Rewrites the instructions of `code`, one at a time, in order; `cells_are_free`: the
    rewritten code reads the original's cell variables as free variables (resume code)."""

    def __init__(self, code: types.CodeType, cells_are_free: bool) -> None:
        self._code = code
        self._offsets = zero_argument_supers(code)
        self._cell = FreeVar if cells_are_free else CellVar
        self._widen = 0

    def rewrite(self, item: Instr, offset: int) -> tuple[Instr, list[Any]]:
        """The instruction to write for `item` (at `offset` in the original) and those to add
        after it: the two arguments after `LOAD_GLOBAL super`, and its PRECALL and CALL taking them."""
        if self._widen:
            self._widen -= 1
            return Instr(item.name, 2, location=item.location), []
        if offset not in self._offsets:
            return item, []
        self._widen = 2
        first = self._code.co_varnames[0]
        receiver = Instr("LOAD_DEREF", self._cell(first), location=item.location) \
            if first in self._code.co_cellvars else Instr("LOAD_FAST", first, location=item.location)
        return item, [Instr("LOAD_DEREF", FreeVar("__class__"), location=item.location), receiver]
