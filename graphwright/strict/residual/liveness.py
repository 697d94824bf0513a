"""Which local variables are live at an instruction: read later before being written.

A resume function takes only the live locals as arguments, so that dead values
are neither passed nor guarded (a dead tensor would otherwise be a graph input
and a reason to recompile). The analysis is the textbook backward dataflow
over CPython 3.11 instructions, with jumps, fall-through and exception
handlers as successors; cell variables are not fast locals and do not appear. A `super()`
without arguments reads the first argument.
"""
from __future__ import annotations

import dis
import functools
import types

from .explicit_super import zero_argument_supers
from .instruction_index import real_instructions

_ENDS_BLOCK = frozenset({"RETURN_VALUE", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
                         "JUMP_BACKWARD_NO_INTERRUPT"})
_READS = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK"})
_WRITES = frozenset({"STORE_FAST", "DELETE_FAST"})


@functools.lru_cache(maxsize=1024)
def _live_before(code: types.CodeType) -> dict[int, frozenset[str]]:
    instructions, index_of = real_instructions(code)
    handlers = dis._parse_exception_table(code)
    successors: list[list[int]] = []
    for index, inst in enumerate(instructions):
        following = []
        if inst.opname not in _ENDS_BLOCK and index + 1 < len(instructions):
            following.append(index + 1)
        if inst.opcode in dis.hasjrel or inst.opcode in dis.hasjabs:
            following.append(index_of[inst.argval])
        following += [index_of[entry.target] for entry in handlers if entry.start <= inst.offset < entry.end]
        successors.append(following)
    supers = zero_argument_supers(code)  # `super()` reads the first argument
    first_is_local = bool(supers) and code.co_varnames[0] not in code.co_cellvars
    live: list[frozenset[str]] = [frozenset()] * len(instructions)
    changed = True
    while changed:
        changed = False
        for index in reversed(range(len(instructions))):
            inst = instructions[index]
            after = frozenset().union(*(live[s] for s in successors[index]))
            if inst.opname in _WRITES:
                after = after - {inst.argval}
            if inst.opname in _READS or inst.offset in supers and first_is_local:
                after = after | {inst.argval if inst.opname in _READS else code.co_varnames[0]}
            if after != live[index]:
                live[index] = after
                changed = True
    return {inst.offset: live[index] for index, inst in enumerate(instructions)}


def live_locals(code: types.CodeType, offset: int) -> frozenset[str]:
    """The fast locals some path from the instruction at `offset` reads before writing."""
    return _live_before(code)[offset]
