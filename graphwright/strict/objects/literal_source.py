"""`eval` of constant source text that is a literal (`eval(repr(False))`, `eval("0x_f")`), and
the SyntaxError of constant text given to `exec`.

A literal's value follows from its text alone: no name is looked up, nothing is called, so
compiling and evaluating it now gives the value eval would give at run time, and text that
is no valid expression is the program's own SyntaxError. Any other expression would read
the caller's names (a graph break, as `eval` of it was before). `exec` compiles its text
before running any of it, so text that does not compile raises at the call, in the region.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from . import operations
from .values import ConstantValue, Value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_LITERAL_NODES = (ast.Expression, ast.Constant, ast.UnaryOp, ast.UAdd, ast.USub, ast.BinOp, ast.Add, ast.Sub,
                  ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Load)


def evaluate(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """The value of `eval(text)` when `text` is a constant literal's source; None otherwise."""
    if kwargs or len(args) != 1 or not isinstance(args[0], ConstantValue) \
            or type(args[0].value) not in (str, bytes):
        return None
    source = args[0].value
    try:
        code = compile(source.lstrip(b" \t" if isinstance(source, bytes) else " \t"), "<string>", "eval",
                       ast.PyCF_ONLY_AST)
    except (SyntaxError, ValueError) as error:  # ValueError: a NUL character in the text
        raise tracer.user_error(error, "eval(...)")
    if not all(isinstance(node, _LITERAL_NODES) for node in ast.walk(code)):
        return None
    try:
        value = eval(compile(code, "<string>", "eval"), {"__builtins__": {}})
    except Exception as error:  # e.g. a dict literal with an unhashable key
        raise tracer.user_error(error, "eval(...)")
    return operations.constant_result(value)


def check_exec_source(tracer: "Tracer", args: list[Value]) -> None:
    """Raise, as the program's own error, what compiling the constant text of `exec(text, ...)`
    raises; text that compiles runs in Python (the caller's graph break)."""
    if not args or not isinstance(args[0], ConstantValue) or type(args[0].value) not in (str, bytes):
        return
    try:
        compile(args[0].value, "<string>", "exec")
    except (SyntaxError, ValueError) as error:  # ValueError: a NUL character in the text
        raise tracer.user_error(error, "exec(...)")
