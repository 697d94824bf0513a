"""The operator behind `leaf_function` calls: opaque to every tracer, the user's Python at run time.

A leaf call site is registered as a `LeafCall` under an integer handle; the
graph calls the custom operator `graphwright::leaf_call(handle, inputs)`,
whose real kernel runs the original function and whose fake kernel runs the
function registered with `register_fake`. Being an operator, it stays one
node in the aten graphs of ahead-of-time autograd too, and the function's
side effects happen on every call. The operator is functional: a function
declared with `mutates_args` runs on copies of those inputs, whose new values
are extra outputs that the graph copies back into the inputs.

Gradients: `graphwright::leaf_call_backward`, also opaque, runs the original
function again under autograd on the saved inputs and differentiates it, so
the function's side effects happen once more in the backward pass.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree

from .flat_call import ModuleState, apply_flat_call


class LeafCall:
    """One call site of a leaf function: how to rebuild its arguments from the flat inputs."""

    def __init__(self, fn: Callable, fake: Callable, in_spec: pytree.TreeSpec, leaves: list,
                 tensor_positions: Sequence[int], module_states: Sequence[ModuleState],
                 mutated: Sequence[int]) -> None:
        self.fn = fn
        self.fake = fake
        self.in_spec = in_spec
        self.leaves = leaves
        self.tensor_positions = tuple(tensor_positions)
        self.module_states = tuple(module_states)
        self.handle = next(_HANDLES)
        self.mutated = tuple(mutated)
        self.__name__ = "leaf_" + getattr(fn, "__name__", "fn")
        self.__qualname__ = self.__name__
        self.__module__ = __name__
        _SITES[self.handle] = self

    def run(self, fn: Callable, flat_inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The output's tensor leaves, then the new values of the mutated inputs."""
        inputs = list(flat_inputs)
        for index in self.mutated:
            inputs[index] = inputs[index].clone()
        output = apply_flat_call(fn, self.in_spec, self.leaves, self.tensor_positions, self.module_states,
                                 inputs)
        return _fresh_tensor_leaves(output, inputs) + [inputs[index] for index in self.mutated]

    def __call__(self, *flat_inputs: torch.Tensor) -> tuple:
        return tuple(leaf_call(self.handle, list(flat_inputs)))


_HANDLES = itertools.count()
_SITES: dict[int, LeafCall] = {}


def _fresh_tensor_leaves(output: Any, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """An operator may not return its inputs or views of them: such outputs are copied."""
    storages = {tensor.untyped_storage()._cdata for tensor in inputs if isinstance(tensor, torch.Tensor)}
    leaves = [leaf for leaf in pytree.tree_leaves(output) if isinstance(leaf, torch.Tensor)]
    return [leaf.clone() if leaf.untyped_storage()._cdata in storages else leaf for leaf in leaves]


@torch.library.custom_op("graphwright::leaf_call", mutates_args=())
def leaf_call(handle: int, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    site = _SITES[handle]
    return site.run(site.fn, inputs)


@leaf_call.register_fake
def _leaf_call_fake(handle: int, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    site = _SITES[handle]
    return site.run(site.fake, inputs)


@torch.library.custom_op("graphwright::leaf_call_backward", mutates_args=())
def leaf_call_backward(handle: int, inputs: list[torch.Tensor], grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """Gradients of the leaf call: the original function runs again, under autograd."""
    site = _SITES[handle]
    with _autograd_reenabled(), torch.enable_grad():
        leaves = [x.detach().requires_grad_(_differentiable(x)) for x in inputs]
        outputs = site.run(site.fn, leaves)
        pairs = [(out, grad) for out, grad in zip(outputs, grads) if out.requires_grad]
        wanted = [x for x in leaves if x.requires_grad]
        found = torch.autograd.grad([out for out, _ in pairs], wanted, [grad for _, grad in pairs],
                                    allow_unused=True) if pairs and wanted else [None] * len(wanted)
    found_by_leaf = dict(zip(map(id, wanted), found))
    return [_zeros_if_none(found_by_leaf.get(id(x)), x) for x in leaves]


@leaf_call_backward.register_fake
def _leaf_call_backward_fake(handle: int, inputs: list[torch.Tensor], grads: list[torch.Tensor]) -> list[torch.Tensor]:
    return [torch.empty_like(x) for x in inputs]


def _autograd_reenabled() -> Any:
    """An operator's kernel runs below autograd; recomputing gradients needs it back."""
    excluded = torch._C._dispatch_tls_local_exclude_set()
    for key in (torch._C.DispatchKey.AutogradOther, torch._C.DispatchKey.AutogradNestedTensor,
                torch._C.DispatchKey.AutogradCPU):
        excluded = excluded.remove(key)
    return torch._C._ForceDispatchKeyGuard(torch._C._dispatch_tls_local_include_set(), excluded)


def _differentiable(tensor: torch.Tensor) -> bool:
    return tensor.is_floating_point() or tensor.is_complex()


def _zeros_if_none(grad: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(like) if grad is None else grad


def _setup_context(ctx, inputs, output) -> None:
    handle, tensors = inputs
    ctx.handle = handle
    ctx.save_for_backward(*tensors)


def _backward(ctx, grads):
    inputs = list(ctx.saved_tensors)
    grads = [torch.zeros_like(g) if g is None else g for g in grads]
    computed = torch.ops.graphwright.leaf_call_backward(ctx.handle, inputs, grads)
    return None, [grad if _differentiable(x) else None for grad, x in zip(computed, inputs)]


leaf_call.register_autograd(_backward, setup_context=_setup_context)


# The user's Python runs for its side effects too: dead-code elimination must keep every call.
torch.fx.node.has_side_effect(torch.ops.graphwright.leaf_call.default)
