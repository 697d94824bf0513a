"""Turning what went wrong inside a traced program into graphwright errors.

Fake tensors fail in a few characteristic ways: a Python decision needs a
value they do not have, an operator has no fake kernel, raw memory is read.
This module recognises those exceptions and rewrites them as typed errors
that name the user's line and end with a hint. Anything else, the user's
own exceptions included, is not its business and passes through unchanged.
"""
from __future__ import annotations

import re

from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    UnsupportedOperatorException,
)
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from .._core.errors import (
    DataDependentError,
    GraphwrightError,
    MissingFakeKernelError,
    TraceError,
)
from .._core.user_stack import user_frames_of_traceback

_DATA_DEPENDENT = (
    DataDependentOutputException,
    DynamicOutputShapeException,
    GuardOnDataDependentSymNode,
)
_RAW_MEMORY_MESSAGES = ("Cannot access data pointer", "Cannot access storage")
_MISSING_KERNEL_MESSAGES = ("has no fake impl", "no fake impl", "does not have a meta")
_HIGHER_ORDER_OPERATOR = re.compile(r"no rule registered for HigherOrderOperator (\w+)")


def translate_trace_exception(exc: BaseException, tracing_mode: str) -> GraphwrightError | None:
    """The graphwright error for `exc`, or None when `exc` should pass through."""
    if isinstance(exc, GraphwrightError):
        return None
    user_stack = user_frames_of_traceback(exc.__traceback__)
    message = str(exc)
    if isinstance(exc, _DATA_DEPENDENT):
        return DataDependentError(
            "Data-dependent Python control flow or value on a fake tensor",
            explanation="The program needed the value of a tensor (a branch on it, "
            "`.item()`, `.tolist()`, or an output whose size depends on the data such as "
            f"`nonzero`), but {tracing_mode} tracing runs on fake tensors, which have no data.",
            hints=[
                'Use tracing_mode="real", or move the data-dependent decision out of the '
                "traced function and pass its result in.",
            ],
            debug_context=message,
            user_stack=user_stack,
        )
    if isinstance(exc, UnsupportedOperatorException) or (
        isinstance(exc, (RuntimeError, NotImplementedError))
        and any(text in message for text in _MISSING_KERNEL_MESSAGES)
    ):
        return MissingFakeKernelError(
            "Operator without a fake implementation",
            explanation=f"{tracing_mode.capitalize()} tracing computes every output's shape "
            "with the operator's fake (meta) kernel, and this operator has none.",
            hints=[
                "Register one with `torch.library.register_fake` for the operator, or use "
                'tracing_mode="real".',
            ],
            debug_context=message,
            user_stack=user_stack,
        )
    if isinstance(exc, RuntimeError) and any(text in message for text in _RAW_MEMORY_MESSAGES):
        return TraceError(
            "Raw memory access on a fake tensor",
            explanation="The program read a tensor's memory directly (`data_ptr()`, its "
            "storage). Non-strict tracing cannot follow raw memory access: it only sees "
            "operations on tensors, and fake tensors have no memory.",
            hints=[
                "Express the computation with tensor operations, or wrap the raw-memory code "
                "in a custom operator (torch.library.custom_op) with a fake implementation.",
            ],
            debug_context=message,
            user_stack=user_stack,
        )
    higher_order = _HIGHER_ORDER_OPERATOR.search(message)
    if isinstance(exc, NotImplementedError) and higher_order:
        name = higher_order.group(1)
        return TraceError(
            f"Higher-order operator `{name}` is not supported by make_fx",
            explanation=f"`torch.{name}` takes functions as arguments; the non-strict "
            "tracer records aten operations only and has no rule for tracing into them.",
            hints=[
                "Call the function directly instead (Python control flow is taken once "
                "and specialised while tracing).",
            ],
            debug_context=message.split(".Hint:")[0],
            user_stack=user_stack,
        )
    return None
