"""What one `make_fx` trace baked into its graph, for inspection afterwards.

`make_fx` stores a `TraceRecord` on the graph module as
`gm.meta["nonstrict_trace"]` (the key is `TRACE_RECORD_KEY`). It lists the
tensor constants the graph captured (globals, closures, module parameters)
and, in symbolic mode, the `ShapeEnv` whose guards say for which sizes the
graph is valid. Purity checks read it; the tracer only fills it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TRACE_RECORD_KEY = "nonstrict_trace"


@dataclass
class CapturedConstant:
    """A tensor the traced function read without receiving it as an input.

    `target` is the name of its get_attr node (and attribute of the graph
    module); `user_location` is the user's `file:line` where it was first used
    ('' when no user frame was on the stack). `from_literal` marks tensors the
    program wrote as literals (`torch.tensor([1, 2])`), which are constants by
    nature rather than hidden inputs; `is_module_state` marks the parameters
    and buffers of a traced `nn.Module`, which the caller handed over with it.
    """

    target: str
    requires_grad: bool
    is_parameter: bool
    from_literal: bool
    user_location: str
    is_module_state: bool = False


@dataclass
class TraceRecord:
    """The constants and shape assumptions of one non-strict trace.

    >>> gm = graphwright.make_fx(f, tracing_mode="symbolic")(x)
    >>> record = gm.meta["nonstrict_trace"]
    >>> [c.target for c in record.constants], record.shape_env.guards
    """

    tracing_mode: str
    constants: list[CapturedConstant] = field(default_factory=list)
    shape_env: Any = None
