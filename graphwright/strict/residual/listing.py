"""Readable listings of the code graphwright generates as bytecode: resume functions and
call-routed copies of user functions, as Python-like source next to their `dis` listing.

Neither has source of its own. A resume function is the user's bytecode run
from the instruction after a graph break, behind a short prologue that
rebuilds the live stack; a routed copy is the user's bytecode with every call
going through the call router. Their Python-like source is therefore the
user's own lines under a header saying what the generated code does around
them; the `dis` listing below it is the exact truth. Both keep the user's
file and line numbers, so a debugger steps through them in the user's file.
"""
from __future__ import annotations

import dis
import inspect
import io
import textwrap
import types
from typing import Any

from .call_routing import routed_from
from .resume import original_code


def generated_code(namespace: dict[str, Any]) -> list[types.CodeType]:
    """The generated code objects an entry refers to (directly, as a function, or compiled)."""
    found = []
    for value in namespace.values():
        if getattr(type(value), "_graphwright_compiled", False):  # a compiled wrapper: what it compiles
            value = value._graphwright_original
        code = value.__code__ if isinstance(value, types.FunctionType) else value
        if isinstance(code, types.CodeType) and _is_generated(code) and code not in found:
            found.append(code)
    return found


def _is_generated(code: types.CodeType) -> bool:
    return routed_from(code) is not None or original_code(code) is not code


def file_name(code: types.CodeType) -> str:
    """The dump file of generated `code`: its name, `routed_` first for a routed copy."""
    return f"{'routed_' if routed_from(code) is not None else ''}{code.co_name}.py"


def listing(code: types.CodeType) -> str:
    """Python-like source of generated `code`, then its bytecode."""
    out = io.StringIO()
    dis.dis(code, file=out)
    return f"{python_like(code)}\n\n# bytecode ({code.co_name}):\n{textwrap.indent(out.getvalue(), '#   ')}"


def python_like(code: types.CodeType) -> str:
    """The user's lines that generated `code` runs, under a header saying what it does around them."""
    routed = routed_from(code)
    body = code if routed is None else routed
    original = original_code(body)
    where = f"`{original.co_qualname}` ({original.co_filename}:{original.co_firstlineno})"
    lines = []
    if routed is not None:
        lines += [f"# {where} run as plain Python: its own bytecode, every call going through graphwright's",
                  "# call router, which calls user functions and modules through their compiled wrappers."]
    if original is body:
        return "\n".join(lines + [_source(original, original.co_firstlineno, indent="")])
    resumed_at, prologue = _prologue(body)
    lines += [f"# A resume function: {where} continued after a graph break, from the instruction after",
              f"# the one that broke, in line {resumed_at}. Its prologue pushes the live stack (the stack",
              "# arguments hold what the breaking instruction left) and re-enters open `with` blocks, then",
              f"# jumps into {original.co_name}'s own bytecode. What came before ran in the graph and the entry.",
              f"def {body.co_name}({', '.join(body.co_varnames[:body.co_argcount])}):",
              *(f"    # {line}" for line in prologue),
              f"    # from line {resumed_at} of {original.co_filename}:",
              _source(original, resumed_at, indent="    ")]
    return "\n".join(lines)


def _prologue(code: types.CodeType) -> tuple[int, list[str]]:
    """The line the resume function jumps to, and its prologue in words: the `with` blocks it
    re-enters and the stack it leaves for the resumed instruction."""
    instructions = list(dis.get_instructions(code))
    stack: list[str] = []
    said = []
    target = None
    for inst in instructions:
        if inst.opname in ("COPY_FREE_VARS", "RESUME", "PRECALL"):
            continue
        if inst.opname == "JUMP_FORWARD":
            target = inst.argval
            break
        if inst.opname == "LOAD_FAST":
            stack.append(inst.argval)
        elif inst.opname == "PUSH_NULL":
            stack.append("NULL")
        elif inst.opname == "LOAD_CONST":
            stack.append(getattr(inst.argval, "__qualname__", repr(inst.argval)))
        elif inst.opname == "CALL":  # [NULL, callable, *args]
            args = stack[len(stack) - inst.arg:]
            called = stack[-inst.arg - 1]
            del stack[-inst.arg - 2:]
            stack.append(f"{called}({', '.join(args)})")
        elif inst.opname == "BEFORE_WITH":
            manager = stack.pop()
            said.append(f"re-enters `with {manager}:`")
            stack += [f"<exit of {manager}>", "<entered>"]
        elif inst.opname == "POP_TOP":
            stack.pop()
    resumed_at = next((i.positions.lineno for i in instructions if i.offset == target and i.positions), None)
    said.append(f"stack on entry: [{', '.join(stack)}]")
    return resumed_at or code.co_firstlineno, said


def _source(code: types.CodeType, from_line: int, indent: str) -> str:
    """The user's lines of `code` from `from_line` on, re-indented under `indent`."""
    try:
        lines, first = inspect.getsourcelines(code)
    except (OSError, TypeError):
        return f"{indent}# (the source of {code.co_qualname} is not available)"
    if not first:  # a module's code
        first = 1
    chosen = lines[max(from_line - first, 0):]
    return textwrap.indent(textwrap.dedent("".join(chosen)), indent).rstrip()
