"""PyTorch's control-flow and function-transform operators inside a compiled region.

One module per family, sharing `subgraphs` (a Python callable traced as a
subgraph with its own inputs): `control_flow` (torch.cond), `functorch`
(vmap, grad, vjp...), `functional_call`, `checkpoint` (activation checkpointing),
`autograd_function` (user torch.autograd.Function subclasses), `dtensor` (DTensor's conversions). `handler_for` gives the tracer the handler of a call,
keyed by the callable itself; a transformed function is a `TransformedFunction`
value, called through its `call`.
"""
from __future__ import annotations

from typing import Any, Callable

from . import autograd_function, checkpoint, control_flow, dtensor, functional_call, functorch
from .functorch import TransformedFunction, transformed_from_wrapper

_HANDLERS: dict[Any, Callable] = {**control_flow.HANDLERS, **functorch.HANDLERS, **checkpoint.HANDLERS,
                                **functional_call.HANDLERS}

__all__ = ["TransformedFunction", "handler_for", "transformed_from_wrapper"]


def handler_for(target: Any) -> Callable | None:
    """The handler `(tracer, args, kwargs) -> Value` of a call of `target`, or None. The
    handler of `MyFunction.apply` may return None: the call is then an opaque node."""
    if autograd_function.is_function_apply(target):
        return lambda tracer, args, kwargs: autograd_function.call_apply(tracer, target.__self__, args, kwargs)
    try:
        return _HANDLERS.get(target) or dtensor.handler_for(target)
    except TypeError:  # an unhashable callable
        return None
