"""A code object's instructions as the analyses of residual code walk them.

`EXTENDED_ARG` prefixes are folded into the instruction they extend: a jump
or an exception handler whose target is a prefix (as CPython writes them in
long functions) lands on that instruction.
"""
from __future__ import annotations

import dis
import types


def real_instructions(code: types.CodeType) -> tuple[list[dis.Instruction], dict[int, int]]:
    """The instructions without `EXTENDED_ARG`, and the index of the instruction at every
    offset (a prefix's offset gives the instruction it extends)."""
    instructions: list[dis.Instruction] = []
    index_of: dict[int, int] = {}
    prefixes: list[int] = []
    for inst in dis.get_instructions(code):
        prefixes.append(inst.offset)
        if inst.opname != "EXTENDED_ARG":
            index_of.update(dict.fromkeys(prefixes, len(instructions)))
            instructions.append(inst)
            prefixes = []
    return instructions, index_of
