"""Tracing a graph into functional aten graphs: the joint forward+backward, or forward only.

`trace_signature` runs the graph once, functionalized, inside graphwright's
non-strict tracer on fake tensors, so in-place ops become functional ops and
every mutated input's final value becomes an extra output. What the run did
(`GraphMetadata`: mutated inputs, outputs that alias, which values require
grad) is read as soon as the graph returns, and it decides the rest of the
trace: when a forward value requires grad, tangents join the graph's inputs
and `torch.autograd.grad` on the differentiable forward values records the
backward ops into the same graph (the joint graph); otherwise the trace ends
with the forward values (the inference graph). Splitting the joint graph is
the partitioner's job.
"""
from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensor

from .._core.errors import BackendRefusal
from .._core.subclass_protocol import exact_fake_runs
from .._core.user_stack import user_frames_of_stack
from ..nonstrict.make_fx import LateInputs, trace_aten_graph
from . import jagged
from .desugar import SubclassBoundary
from .out_calls import OutCallWatcher
from .metadata import (
    GraphMetadata,
    TensorSpec,
    describe_run,
    from_functional,
    functionalization,
    laid_out_otherwise,
    functionalization_paused,
    to_functional,
)


def trace_signature(
    fn: Callable[..., Any], fakes: Sequence[Any], fake_mode, decompositions, *, grad_enabled: bool,
    boundary: SubclassBoundary | None = None, eager_outputs: Sequence[Any] | None = None,
) -> tuple[GraphMetadata, torch.fx.GraphModule]:
    """What `fn` does on `fakes`, and its aten graph for one call signature.

    The graph is the joint graph (its Python code not generated: it is
    partitioned, never run) when a forward value requires grad, else the
    inference graph. `fn` runs in the call's grad mode; `grad_enabled` says
    whether the signature differentiates at all. With a `boundary` (tensor
    subclasses among `fakes`), the graph takes and returns the subclasses'
    plain tensors (`desugar.py`), while `fn`, the metadata and autograd see
    the subclasses. `eager_outputs`: the strict tracer's values of the flat outputs, if known.

    >>> meta, gm = trace_signature(gm, fakes, fake_mode, None, grad_enabled=True)
    >>> any(meta.forward_requires_grad)  # True: gm is the joint graph
    """
    late = LateInputs()
    meta: GraphMetadata | None = None

    def joint(*args):
        nonlocal meta
        inputs = args if boundary is None else boundary.rebuild_inputs(args)
        with functionalization():
            with jagged.dispatch_for(boundary):
                functional_inputs = [to_functional(t) for t in inputs]
                with OutCallWatcher():
                    flat_outputs, out_spec = pytree.tree_flatten(fn(*functional_inputs))
                meta = describe_run(inputs, functional_inputs, flat_outputs, out_spec, grad_enabled=grad_enabled,
                                    eager_outputs=eager_outputs)
                values = meta.forward_values(functional_inputs, flat_outputs)
                if not any(meta.forward_requires_grad):
                    return _returned(_unwrapped_values(values, meta, boundary), len(values), boundary)
                if boundary is not None:  # the tangents' layouts, for this trace or the one after it
                    boundary.record_forward_values([from_functional(v) for v in values], meta.forward_requires_grad)
                if any(functional_inputs[i].requires_grad for i in meta.mutated_inputs):
                    raise _MutatesDifferentiableInput()
            # the late inputs are added by the recorder, the innermost mode
            tangents = late.add(lambda: _fake_tangents(meta.tangent_specs, fake_mode, boundary))
            with jagged.dispatch_for(boundary):
                return _with_gradients(values, meta, functional_inputs, tangents, boundary)

    primals = fakes if boundary is None else boundary.flat_inputs
    try:
        with exact_fake_runs(fake_mode, boundary is not None):
            gm = trace(joint, primals, fake_mode, decompositions, generate_code=False, late_inputs=late)
    except _MutatesDifferentiableInput:
        # The gradient must be taken with respect to such an input's value on entry: the graph
        # is traced again, mutating a clone of it (only the first run says which inputs).
        with fake_mode:
            tangents = _tangents(meta.tangent_specs, boundary)
        with exact_fake_runs(fake_mode, boundary is not None):
            return meta, trace(joint_function(fn, meta, len(primals), boundary), [*primals, *tangents], fake_mode,
                               decompositions, generate_code=False)
    if any(meta.forward_requires_grad):
        return meta, gm
    return meta, torch.fx.GraphModule(gm, gm.graph, class_name="forward")  # it runs: generate its code


class _MutatesDifferentiableInput(Exception):
    """The traced graph mutates an input that requires grad (the trace is abandoned)."""


class NoDerivative(Exception):
    """An operator between the inputs and a differentiable output has no derivative formula
    (`scatter` with `reduce=`), or its formula calls an operator a tensor subclass does not
    implement (a jagged tensor's `_nested_sum_backward`): eager runs its forward and raises only
    when its backward runs, so no joint graph exists for it."""


def _is_missing_derivative(error: RuntimeError) -> bool:
    # Autograd's NotImplemented node and the formulas' not_implemented() both say so.
    message = str(error)
    return "derivative for" in message and "not implemented" in message


def _fake_tangents(specs: Sequence[TensorSpec], fake_mode, boundary: SubclassBoundary | None) -> list[torch.Tensor]:
    with functionalization_paused(), fake_mode:
        return _tangents(specs, boundary)


def _tangents(specs: Sequence[TensorSpec], boundary: SubclassBoundary | None) -> list[torch.Tensor]:
    """Contiguous tangents (the active fake mode's), flat; the runtime makes incoming gradients
    contiguous to match."""
    if boundary is not None:
        return boundary.fake_tangents()
    return [torch.empty(spec.shape, dtype=spec.dtype, device=spec.device) for spec in specs]


def _returned(outputs: Sequence[Any], num_values: int, boundary: SubclassBoundary | None) -> tuple:
    """What the traced function returns: `outputs`, or with a boundary their plain tensors."""
    return tuple(outputs) if boundary is None else boundary.flatten_outputs(outputs, num_values)


def _with_gradients(values: list, meta: GraphMetadata, functional_inputs: list, tangents: Sequence,
                    boundary: SubclassBoundary | None) -> tuple:
    """The forward values followed by one gradient per input (None where it needs none)."""
    differentiable = [v for v, rg in zip(values, meta.forward_requires_grad) if rg]
    wrt = [
        (i, t)
        for i, t in enumerate(functional_inputs)
        if isinstance(t, torch.Tensor) and t.requires_grad
    ]
    if boundary is not None:
        with functionalization_paused():
            tangents = boundary.rebuild_tangents(tangents)
    try:
        grads = torch.autograd.grad(
            differentiable,
            [t for _, t in wrt],
            grad_outputs=[to_functional(t) for t in tangents],
            allow_unused=True,
        )
    except NotImplementedError as error:  # a subclass without the backward's operator (jagged sum's)
        raise NoDerivative(str(error)) from error
    except RuntimeError as error:
        if _is_missing_derivative(error):
            raise NoDerivative(str(error)) from error
        raise
    grad_of_input: list[Any] = [None] * len(functional_inputs)
    for (i, _), grad in zip(wrt, grads):
        grad_of_input[i] = grad
    return _returned([*_unwrapped_values(values, meta, boundary), *(from_functional(g) for g in grad_of_input)],
                     len(values), boundary)


def _unwrapped_values(values: Sequence[Any], meta: GraphMetadata, boundary: SubclassBoundary | None) -> list:
    """The forward values as the graph returns them, those the user sees laid out as in eager.

    A functional wrapper has eager's strides, its value may not: a tensor written through a
    view (`out=` into `o.t()`) is rebuilt from the view's new value, transposed. Such a value
    is copied into eager's layout, where the runtime rebuilds views from it as eager made them
    (a plain tensor's: a subclass's inner tensors are laid out by its own operations).
    """
    inner = [from_functional(v) for v in values]
    for i in range(len(meta.mutated_inputs), len(values)):
        spec = meta.forward_specs[i]
        if spec is not None and isinstance(inner[i], FakeTensor) and laid_out_otherwise(spec.stride, inner[i]):
            with functionalization_paused():
                inner[i] = torch.empty_strided(inner[i].shape, spec.stride, dtype=inner[i].dtype,
                                               device=inner[i].device).copy_(inner[i])
    return inner


def joint_function(
    fn: Callable[..., Any], meta: GraphMetadata, num_inputs: int, boundary: SubclassBoundary | None = None,
) -> Callable[..., tuple]:
    """The function whose trace is the joint graph, for a graph known (`meta`) to mutate an
    input that requires grad.

    It takes `(*inputs, *tangents)` and returns the forward values followed
    by one gradient per input (None where the input needs none); with a
    `boundary`, all of them flat.
    """

    def joint(*args):
        inputs, tangents = args[:num_inputs], args[num_inputs:]
        if boundary is not None:
            inputs = boundary.rebuild_inputs(inputs)
        with functionalization(), jagged.dispatch_for(boundary):
            functional_inputs = [to_functional(t) for t in inputs]
            mutable_inputs = _clone_mutated(functional_inputs, meta)
            with OutCallWatcher():
                flat_outputs = pytree.tree_leaves(fn(*mutable_inputs))
            values = meta.forward_values(mutable_inputs, flat_outputs)
            return _with_gradients(values, meta, functional_inputs, tangents, boundary)

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


def trace(
    function: Callable[..., tuple], fake_args: Sequence[Any], fake_mode, decompositions,
    *, generate_code: bool = True, late_inputs: LateInputs | None = None,
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
        try:
            gm = trace_aten_graph(function, tuple(fake_args), decompositions, generate_code=generate_code,
                                  late_inputs=late_inputs)
        except RuntimeError as error:
            op = _op_without_functional_variant(error)
            if op is not None:
                raise _not_functionalized(f"`{op}`") from error
            raise
    _check_functional(gm)
    return gm


def _op_without_functional_variant(error: RuntimeError) -> str | None:
    """The op functionalization's fallback kernel refused: an in-place or out= op without a
    functional counterpart it knows (`polygamma_`, whose functional op takes `n` first)."""
    found = re.search(r"operator whose output has alias annotations: ([\w:.]+)\(", str(error))
    return found.group(1) if found else None


def _not_functionalized(what: str) -> BackendRefusal:
    return BackendRefusal(
        f"Ahead-of-time autograd could not functionalize {what}",
        explanation="The traced aten graph would still mutate a tensor in place, so running it would not match "
        "eager.",
        hints=["The graph runs as captured (as backend='eager' runs it), with the same results as eager.",
               "Report this program to graphwright."],
        user_stack=user_frames_of_stack(),
    )


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
            # a mutation functionalization did not see (`native_batch_norm`'s out= overload runs
            # the functional op, whose Python kernel updates the running statistics in place)
            raise _not_functionalized(f"`{target}`")


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
