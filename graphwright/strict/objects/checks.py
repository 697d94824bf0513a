"""`torch._check` and its family on traced values: facts about data-dependent values.

`torch._check(cond)` on a plain bool is checked now (a failing one raises the user's error,
as eager does, with the message its message function, traced, gives). On a symbolic condition (a comparison of `.item()` results or unbacked sizes)
it is called for real on the symbolic value, which tells the ShapeEnv the fact (so that later
code may branch on it), and the graph gets the aten operator that checks it at run time
(`_assert_scalar`, or `sym_constrain_range_for_size` for `_check_is_size`), which ahead-of-time
autograd traces too: a violated check raises RuntimeError at run time, as eager's would (with
the user's message; `_check_index` and friends raise their own error type in eager). Inside a
`try` block the program could catch that error, which it cannot from inside the graph: a break.

The questions user code asks the ShapeEnv about a symbol (`statically_known_true`,
`guard_or_false`, `has_static_value`...) are asked for real, of the symbol itself, at trace time:
their answer is what the compilation knows (a constant), never the symbol's Python code traced.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from torch.fx.experimental import symbolic_shapes

from ..interpreter import graph_breaks as gb
from ..interpreter.symbolic_sizes import SYMBOLIC_TYPES
from . import operations
from .values import NONE, ConstantValue, Value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

# each check and the argument that holds its condition (or size)
CHECKS = {torch._check: 0, torch._check_is_size: 0, torch._check_value: 0, torch._check_index: 0,
          torch._check_type: 0, torch._check_not_implemented: 0, torch._check_with: 1}

# questions about what the compilation knows of a symbol, each of one argument
SHAPE_QUERIES = (symbolic_shapes.statically_known_true, symbolic_shapes.statically_known_false,
                 symbolic_shapes.guard_or_true, symbolic_shapes.guard_or_false, symbolic_shapes.has_static_value,
                 symbolic_shapes.guard_scalar)


def call_query(tracer: "Tracer", query: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`query(symbol)` asked now, of the symbol the argument holds (or of a plain value)."""
    if len(args) != 1 or kwargs:
        raise tracer.graph_break(gb.UNSUPPORTED_CALLABLE, f"{query.__name__} with {len(args)} arguments",
                                 name=query.__name__)
    (argument,) = args
    symbolic = isinstance(argument, ConstantValue) and isinstance(argument.value, SYMBOLIC_TYPES)
    return ConstantValue(query(argument.value if symbolic else operations.python_value(tracer, argument)))


def call_check(tracer: "Tracer", check: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    position = CHECKS[check]
    condition = args[position] if len(args) > position else kwargs.get("cond", kwargs.get("i"))
    symbolic = isinstance(condition, ConstantValue) and isinstance(condition.value, SYMBOLIC_TYPES)
    leading = [operations.python_value(tracer, arg) for arg in args[:position]]
    if not symbolic:
        message = args[position + 1] if len(args) > position + 1 else kwargs.get("message")
        python_args = [*leading, operations.python_value(tracer, condition)]
        if message is not None and isinstance(message, ConstantValue):
            python_args.append(message.value)
        elif message is not None and not python_args[-1]:  # the user's message function, traced
            from ..interpreter import calls

            text = operations.python_value(tracer, calls.call_value(tracer, message, [], {}))
            python_args.append(lambda: text)
        try:
            check(*python_args)
        except Exception as error:
            raise tracer.user_error(error, f"{check.__name__}(...)")
        return NONE
    if _inside_try_block(tracer):
        raise tracer.graph_break(gb.DATA_DEPENDENT_BRANCH, f"{check.__name__} on a symbolic condition in a try block")
    node = tracer.graph.node_arg(condition)  # before the fact may turn the condition into True
    check(*leading, condition.value)  # the ShapeEnv learns the fact (a deferred runtime assert)
    if check is torch._check_is_size:
        tracer.graph.record(torch.ops.aten.sym_constrain_range_for_size.default, [node])
    else:
        message = args[position + 1] if len(args) > position + 1 else kwargs.get("message")
        text = message.value if isinstance(message, ConstantValue) and isinstance(message.value, str) \
            else _assertion_text(tracer, check, condition.value)
        tracer.graph.record(torch.ops.aten._assert_scalar.default, [node, text])
    return NONE


def _inside_try_block(tracer: "Tracer") -> bool:
    """Whether a `try` block of a running frame encloses the current instruction: a check that
    fails at run time raises inside the graph, where the program's handler cannot catch it."""
    from ..residual.split import open_with_blocks

    return any(open_with_blocks(frame.code, frame.instructions[frame.index - 1].offset) is None
               for frame in tracer.frames)


def _assertion_text(tracer: "Tracer", check: Any, condition: torch.SymBool) -> str:
    """What a failed check without a message says at run time: the fact, as PyTorch words it,
    and the user's line."""
    stack = tracer.user_stack()
    where = f" (`{check.__name__}` at {stack[-1].filename}:{stack[-1].lineno})" if stack else ""
    return f"Runtime assertion failed for expression {condition.node.expr}{where}"
