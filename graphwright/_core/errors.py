"""The error types users see, and their one text format.

Every error graphwright raises derives from `GraphwrightError` and carries a
title, an explanation, hints and the user's stack, so that the message says
what broke, where in the user's code, and how to fix it:

    Call to `graphwright.graph_break()`
      Explanation: User-inserted graph break. Message: None
      Hint: Remove the `graphwright.graph_break()` call.

      Developer debug context: Called `graphwright.graph_break()` with args `[]`, kwargs `{}`

    from user code:
       File "example.py", line 9, in func
        n = get_magic_num()

This module formats; it never decides what is an error.
"""
from __future__ import annotations

import traceback
from collections.abc import Sequence

from torch.fx.experimental import symbolic_shapes

from .user_stack import format_user_stack


class GraphwrightError(Exception):
    """Base of every error graphwright raises.

    >>> raise GraphwrightError("Bad input", explanation="...", hints=["Pass a tensor."])
    """

    def __init__(
        self,
        title: str,
        *,
        explanation: str = "",
        hints: Sequence[str] = (),
        debug_context: str = "",
        user_stack: Sequence[traceback.FrameSummary] = (),
    ) -> None:
        self.title = title
        self.explanation = explanation
        self.hints = list(hints)
        self.debug_context = debug_context
        self.user_stack = list(user_stack)
        super().__init__(title)

    @property
    def user_location(self) -> str:
        """`file:line` of the innermost user frame, or '' when unknown."""
        if not self.user_stack:
            return ""
        frame = self.user_stack[-1]
        return f"{frame.filename}:{frame.lineno}"

    def __str__(self) -> str:
        parts = [self.title]
        if self.explanation:
            parts.append(f"  Explanation: {self.explanation}")
        parts.extend(f"  Hint: {hint}" for hint in self.hints)
        if self.debug_context:
            parts.append("")
            parts.append(f"  Developer debug context: {self.debug_context}")
        if self.user_stack:
            parts.append("")
            parts.append("from user code:")
            parts.append(" " + format_user_stack(self.user_stack))
        return "\n".join(parts)


class Unsupported(GraphwrightError, RuntimeError):
    """The strict tracer met something it cannot capture (a graph break).

    Raised under `fullgraph=True`; otherwise the break splits the graph.
    `gb_id` is the stable id of the graph-break kind (e.g. "GB001"). A RuntimeError, as
    PyTorch's `Unsupported` is (code that catches that keeps working).
    """

    def __init__(self, title: str, *, gb_id: str = "", **details) -> None:
        self.gb_id = gb_id
        super().__init__(title, **details)


class TraceError(GraphwrightError):
    """The non-strict tracer could not record the program faithfully."""


class DataDependentError(TraceError):
    """Python control flow or a Python value depended on a fake tensor's data."""


class InvalidInputError(TraceError):
    """An input or output leaf the tracer cannot represent."""


class NonFakeInputError(TraceError):
    """A real tensor that is not an input met fake tensors during fake tracing."""


class MissingFakeKernelError(TraceError):
    """An operator has no fake/meta implementation, so fake tracing cannot run it."""


class InvalidMarkingError(GraphwrightError, ValueError):
    """A marking decorator (`leaf_function`, `nonstrict_trace`, `disallow_in_graph`, ...) applied
    in a way it cannot mean: a `mutates_args` entry naming no parameter, two exclusive markings,
    a leaf function called without its fake implementation."""


class LeafFunctionError(GraphwrightError, RuntimeError):
    """A `leaf_function` broke its contract while running: it mutated an input it did not
    declare, or returned another structure than its fake implementation."""


class ForbiddenCallError(GraphwrightError, AssertionError):
    """The traced program called a function that must run before compiling, never inside a
    compiled region (`mark_dynamic` and torch's other markings read by the next compilation);
    an AssertionError too, as PyTorch raises one."""


class BackendError(GraphwrightError):
    """A backend failed to compile or run a captured graph."""


class BackendRefusal(BackendError):
    """A backend declined, before compiling, a graph it cannot compile faithfully (AOT autograd
    and a tensor subclass). Under `fullgraph=False` the graph then runs as captured, as the
    `eager` backend runs it, with a warning; under `fullgraph=True` this is raised."""


class ConstraintViolationError(GraphwrightError, symbolic_shapes.ConstraintViolationError):
    """A dimension marked with `mark_dynamic` was forced to one size by the program (PyTorch's
    error of the same name too, so that code catching that one catches this)."""
