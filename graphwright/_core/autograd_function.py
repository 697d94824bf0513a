"""A user's `torch.autograd.Function` with traced forward and backward: the target of its node.

The strict tracer traces the user's `forward` (with its `ctx`) and `backward`
as subgraphs and records one node calling a `FunctionCall`: it applies an
autograd.Function whose forward runs the forward subgraph (which returns the
user's outputs, then the tensors the backward reads: those saved with
`save_for_backward` and those kept as `ctx` attributes) and whose backward runs
the backward subgraph on them and the output gradients. Under `eager` this is
autograd running the user's backward as traced; under ahead-of-time autograd
the joint trace calls the same backward, so the gradient graph is the user's.

A Function written with `setup_context` is mirrored by one written the same
way (functorch transforms accept only those), with the user's
`generate_vmap_rule`. It lives in layer 1 so that every layer reaches it.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class FunctionSpec:
    """The shapes of one traced Function call.

    The forward subgraph takes the first `num_forward_inputs` inputs and returns
    `num_outputs` outputs, then the other tensors the backward reads. The
    results at `saved` are the tensors the backward reads (`save_for_backward`'s
    and the `ctx` attributes'); the
    backward subgraph takes them, one gradient per output, then the inputs at
    `backward_inputs` (the outer tensors it reads), and returns a gradient for
    each input at `grad_positions`. Outputs at `non_differentiable` are marked so."""

    name: str
    num_forward_inputs: int
    num_outputs: int
    saved: tuple[int, ...]
    backward_inputs: tuple[int, ...]
    non_differentiable: tuple[int, ...]
    grad_positions: tuple[int, ...]


def _forward(spec: FunctionSpec, forward: Any, inputs: Sequence[Any]) -> tuple:
    return tuple(forward(*inputs[:spec.num_forward_inputs]))


def _setup(ctx: Any, spec: FunctionSpec, backward: Any, inputs: Sequence[Any], results: tuple) -> None:
    ctx.spec, ctx.backward_graph, ctx.num_inputs = spec, backward, len(inputs)
    ctx.save_for_backward(*(results[index] for index in spec.saved),
                          *(inputs[index] for index in spec.backward_inputs))
    ctx.mark_non_differentiable(*(results[index] for index in spec.non_differentiable),
                                *results[spec.num_outputs:])


def _backward(ctx: Any, grads: Sequence[Any]) -> tuple:
    spec = ctx.spec
    saved = ctx.saved_tensors
    count = len(spec.saved)
    computed = ctx.backward_graph(*saved[:count], *grads[:spec.num_outputs], *saved[count:])
    input_grads: list[Any] = [None] * ctx.num_inputs
    for position, grad in zip(spec.grad_positions, computed):
        input_grads[position] = grad
    return (None, None, None, *input_grads)


class _TracedFunction(torch.autograd.Function):
    """Written with `ctx` in forward, as the user's was."""

    @staticmethod
    def forward(ctx: Any, spec: FunctionSpec, forward: Any, backward: Any, *inputs: Any) -> tuple:
        results = _forward(spec, forward, inputs)
        _setup(ctx, spec, backward, inputs, results)
        return results

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        return _backward(ctx, grads)


class _TracedFunctionWithSetup(torch.autograd.Function):
    """Written with `setup_context`, as the user's was."""

    @staticmethod
    def forward(spec: FunctionSpec, forward: Any, backward: Any, *inputs: Any) -> tuple:
        return _forward(spec, forward, inputs)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
        spec, _, backward, *rest = inputs
        _setup(ctx, spec, backward, rest, output)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        return _backward(ctx, grads)


class _TracedFunctionWithVmapRule(_TracedFunctionWithSetup):
    generate_vmap_rule = True


class FunctionCall:
    """One call of a traced autograd.Function, as a graph node's target:
    `call(forward, backward, *inputs)` returns the user's outputs (tensors)."""

    def __init__(self, spec: FunctionSpec, setup_context: bool, generate_vmap_rule: bool) -> None:
        self.spec = spec
        self.function = (_TracedFunctionWithVmapRule if generate_vmap_rule else _TracedFunctionWithSetup) \
            if setup_context else _TracedFunction
        self.__name__ = self.__qualname__ = f"{spec.name}_apply"  # torch.fx names the node's global after it

    def __call__(self, forward: Any, backward: Any, *inputs: Any) -> tuple:
        results = self.function.apply(self.spec, forward, backward, *inputs)
        return tuple(results[:self.spec.num_outputs])

    def __repr__(self) -> str:
        return f"<traced autograd.Function {self.spec.name}>"
