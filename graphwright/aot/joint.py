"""Tracing a graph into functional aten graphs: the joint forward+backward, or forward only.

Both traces run the graph functionalized inside graphwright's `make_fx` on
fake tensors, so in-place ops become functional ops and every
mutated input's final value becomes an extra output. The joint trace then
calls `torch.autograd.grad` on the differentiable forward outputs with
tangent placeholders, which records the backward ops into the same graph.
What the traced functions return is fixed by `GraphMetadata`; splitting the
joint graph is the partitioner's job.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree

from .._core.errors import BackendError
from .._core.user_stack import user_frames_of_stack
from ..nonstrict.make_fx import trace_aten_graph
from .metadata import (
    GraphMetadata,
    TensorSpec,
    from_functional,
    functionalization,
    to_functional,
)


def _forward_values(fn, functional_inputs, meta: GraphMetadata) -> list[Any]:
    """Run `fn` and pick what the forward graph returns (see `GraphMetadata`)."""
    flat_outputs = pytree.tree_leaves(fn(*functional_inputs))
    return meta.forward_values(functional_inputs, flat_outputs)


def forward_function(fn: Callable[..., Any], meta: GraphMetadata) -> Callable[..., tuple]:
    """The function whose trace is the inference graph: inputs -> forward values."""

    def forward(*inputs):
        with functionalization():
            functional_inputs = [to_functional(t) for t in inputs]
            values = _forward_values(fn, functional_inputs, meta)
            return tuple(from_functional(v) for v in values)

    return forward


def joint_function(
    fn: Callable[..., Any], meta: GraphMetadata, num_inputs: int
) -> Callable[..., tuple]:
    """The function whose trace is the joint graph.

    It takes `(*inputs, *tangents)` and returns the forward values followed
    by one gradient per input (None where the input needs none).
    """

    def joint(*args):
        inputs, tangents = args[:num_inputs], args[num_inputs:]
        with functionalization():
            functional_inputs = [to_functional(t) for t in inputs]
            with torch.enable_grad():
                values = _forward_values(fn, _clone_mutated(functional_inputs, meta), meta)
            differentiable = [v for v, rg in zip(values, meta.forward_requires_grad) if rg]
            wrt = [
                (i, t)
                for i, t in enumerate(functional_inputs)
                if isinstance(t, torch.Tensor) and t.requires_grad
            ]
            grads = torch.autograd.grad(
                differentiable,
                [t for _, t in wrt],
                grad_outputs=[to_functional(t) for t in tangents],
                allow_unused=True,
            )
            grad_of_input: list[Any] = [None] * num_inputs
            for (i, _), grad in zip(wrt, grads):
                grad_of_input[i] = grad
            return tuple(from_functional(v) for v in [*values, *grad_of_input])

    return joint


def _clone_mutated(functional_inputs: list, meta: GraphMetadata) -> list:
    """Let the graph mutate clones of inputs that require grad.

    Gradients must be taken with respect to an input's value on entry;
    `autograd.grad` on a tensor mutated in place would give them with
    respect to its value after the mutation.
    """
    inputs = list(functional_inputs)
    for i in meta.mutated_inputs:
        if inputs[i].requires_grad:
            inputs[i] = inputs[i].clone()
    return inputs


def make_tangents(specs: Sequence[TensorSpec], fake_mode) -> list[torch.Tensor]:
    """Contiguous fake tangents; the runtime makes incoming gradients contiguous to match."""
    with fake_mode:
        return [torch.empty(spec.shape, dtype=spec.dtype, device=spec.device) for spec in specs]


def trace(
    function: Callable[..., tuple], fake_args: Sequence[Any], fake_mode, decompositions,
    *, generate_code: bool = True,
) -> torch.fx.GraphModule:
    """Trace `function` on fake arguments with graphwright's non-strict tracer.

    The compilation's fake mode is active throughout, so that tensors the
    graph creates (`torch.ones`) are fake even when no argument is a tensor.
    `generate_code=False` for a graph that is never run (the joint graph):
    its Python code is generated only if someone asks for it.
    """
    # A nonstrict_trace body may read tensors it was not given (globals, closures): they are
    # constants of the graph, as when the strict tracer typed the call.
    # oneDNN's fused recurrent kernels save a workspace that is undefined on the CPU, which a
    # traced backward cannot pass back: recurrent modules are traced through their generic
    # implementation (cells of matrix products), whose gradients are plain operators.
    with fake_mode, _generic_recurrent_kernels():
        gm = trace_aten_graph(function, tuple(fake_args), decompositions, generate_code=generate_code)
    _check_functional(gm)
    return gm


@contextlib.contextmanager
def _generic_recurrent_kernels() -> Iterator[None]:
    enabled = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        yield
    finally:
        torch._C._set_mkldnn_enabled(enabled)


def _check_functional(gm: torch.fx.GraphModule) -> None:
    """An input mutated inside the graph would escape the write-back logic: refuse it loudly.

    Mutations of the graph's own intermediates (some decompositions fill a
    fresh buffer in place) are harmless and stay.
    """
    for node in gm.graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
            continue
        if not target._schema.is_mutable:
            continue
        if any(_root(arg).op == "placeholder" for arg in _written_arguments(node)):
            raise BackendError(
                f"Ahead-of-time autograd could not functionalize `{target}`",
                explanation="The traced aten graph still mutates one of its inputs in place, so "
                "running it would not match eager.",
                hints=["Compile with backend='eager', or report this program to graphwright."],
                user_stack=user_frames_of_stack(),
            )


def _written_arguments(node: torch.fx.Node) -> list[torch.fx.Node]:
    written = []
    for i, argument in enumerate(node.target._schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        value = node.args[i] if i < len(node.args) else node.kwargs.get(argument.name)
        if isinstance(value, torch.fx.Node):
            written.append(value)
    return written


def _root(node: torch.fx.Node) -> torch.fx.Node:
    """The tensor a chain of views starts from."""
    while (
        node.op == "call_function"
        and isinstance(node.target, torch._ops.OpOverload)
        and node.target.is_view
        and isinstance(node.args[0], torch.fx.Node)
    ):
        node = node.args[0]
    return node
