"""The operator behind `leaf_function` calls: opaque to every tracer, the user's Python at run time.

A leaf call site is registered as a `LeafCall` under an integer handle; the
graph calls the custom operator `graphwright::leaf_call(handle, inputs)`,
whose real kernel runs the original function and whose fake kernel runs the
function registered with `register_fake`. Being an operator, it stays one
node in the aten graphs of ahead-of-time autograd too, and the function's
side effects happen on every call. `graphwright::leaf_call_mutating` is the
same operator for functions declared with `mutates_args`.
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
                 tensor_positions: Sequence[int], module_states: Sequence[ModuleState], mutates: bool) -> None:
        self.fn = fn
        self.fake = fake
        self.in_spec = in_spec
        self.leaves = leaves
        self.tensor_positions = tuple(tensor_positions)
        self.module_states = tuple(module_states)
        self.handle = next(_HANDLES)
        self.op = leaf_call_mutating if mutates else leaf_call
        self.__name__ = "leaf_" + getattr(fn, "__name__", "fn")
        self.__qualname__ = self.__name__
        self.__module__ = __name__
        _SITES[self.handle] = self

    def run(self, fn: Callable, flat_inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        output = apply_flat_call(fn, self.in_spec, self.leaves, self.tensor_positions, self.module_states,
                                 flat_inputs)
        return _fresh_tensor_leaves(output, flat_inputs)

    def __call__(self, *flat_inputs: torch.Tensor) -> tuple:
        return tuple(self.op(self.handle, list(flat_inputs)))


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


@torch.library.custom_op("graphwright::leaf_call_mutating", mutates_args=("inputs",))
def leaf_call_mutating(handle: int, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    site = _SITES[handle]
    return site.run(site.fn, inputs)


@leaf_call_mutating.register_fake
def _leaf_call_mutating_fake(handle: int, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    site = _SITES[handle]
    return site.run(site.fake, inputs)


# The user's Python runs for its side effects too: dead-code elimination must keep every call.
torch.fx.node.has_side_effect(torch.ops.graphwright.leaf_call.default)
torch.fx.node.has_side_effect(torch.ops.graphwright.leaf_call_mutating.default)
