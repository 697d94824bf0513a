"""`tensor.register_hook(hook)` on a tensor the region computed, captured in the graph.

A hook sees the gradient of its tensor. For a tensor the graph computes, the
tensor becomes the output of `TensorHook`, an autograd Function that copies
it and applies the hook to the gradient in its backward; both
are traced as any user Function is (`autograd_function`), so the hook's work
lands in the backward graph and a hook with side effects is refused as a
subgraph with side effects. Modelled only where that is exactly what eager
does: the tensor has no use yet (a use made before the registration would
reach the graph's backward without passing the hook), is no view (its memory
is its own: the tensor is replaced by a copy), and the returned handle is
dropped (a handle kept could remove the hook later). Otherwise the caller
breaks the graph as before.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ..objects.values import ConstantValue, TensorValue, Value
from . import autograd_function

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer


class TensorHook(torch.autograd.Function):
    """A copy of a tensor whose backward applies `hook` to the gradient, as
    `Tensor.register_hook` does (a hook returning None leaves the gradient as it is). A copy,
    not a view: the region may change the tensor in place afterwards, which autograd refuses
    on a view a Function returned; as nothing else holds the tensor's memory, no one can tell."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, hook: Any) -> torch.Tensor:
        ctx.hook = hook
        return tensor.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        replaced = ctx.hook(grad)
        return (grad if replaced is None else replaced), None


def register_hook(tracer: "Tracer", tensor: TensorValue, hook: Value) -> Value | None:
    """The value of `tensor.register_hook(hook)` (its handle, dropped: None) with the hook in
    the graph, or None where that would not be what eager does."""
    frame = tracer.frames[-1]
    if tensor.source is not None or tensor.node.users or not tensor.fake.requires_grad or tensor.fake._is_view() \
            or frame.instructions[frame.index].opname != "POP_TOP":
        return None
    hooked = autograd_function.call_apply(tracer, TensorHook, [tensor, hook], {})
    if not isinstance(hooked, TensorValue):
        return None
    # every reference the region holds to the tensor now reads the hooked one
    tracer.graph.rebind(tensor, hooked)
    return ConstantValue(None)
