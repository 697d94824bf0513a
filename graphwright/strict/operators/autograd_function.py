"""User `torch.autograd.Function`s inside a region: forward and backward traced.

`MyFunction.apply(*args)` traces the user's `forward` (and `setup_context`, for
a Function written that way) as a subgraph, with grad mode off as autograd runs
it, on a `ctx` made in the region: an instance of PyTorch's `FunctionCtx`, whose
Python methods (`save_for_backward`, `mark_non_differentiable`, ...) store what
they are given as its attributes, plus `needs_input_grad` as the call decides
it. Then the user's `backward` is traced as a second subgraph, on a `ctx`
holding the same attributes with every tensor among them (and
`saved_tensors`) an input of that subgraph, and one gradient per output. The
graph calls a `FunctionCall` (`_core/autograd_function.py`) with both.

What is not modelled (a `vmap` or `jvp` staticmethod, `mark_dirty`,
`set_materialize_grads(False)`, keyword arguments, symbolic sizes among the
outputs or on `ctx`, a forward or backward that breaks the graph) keeps the
call as it was before: one node calling `MyFunction.apply`, which is still
correct (autograd runs the user's backward), only opaque.
"""
from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

import torch
from torch.autograd.function import FunctionCtx

from ..._core.autograd_function import FunctionCall, FunctionSpec
from ..interpreter import graph_breaks as gb
from ..objects import operations
from ..objects.values import ConstantValue, ObjectValue, SequenceValue, TensorValue, Value
from . import subgraphs
from .subgraphs import flatten, is_graph_value, trace_subgraph

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_APPLY = torch.autograd.Function.apply.__func__
_BASE = torch.autograd.function._SingleLevelFunction
# attributes FunctionCtx's methods store, and what they mean to the call
_MODELLED = frozenset({"to_save", "non_differentiable", "needs_input_grad", "materialize_grads"})
_REFUSED = {"dirty_tensors": "mark_dirty", "saved_for_forward": "save_for_forward"}


class NotModelled(Exception):
    """This Function call keeps its opaque node; the message says why."""


def is_function_apply(target: Any) -> bool:
    """`MyFunction.apply` for a subclass of torch.autograd.Function."""
    return type(target) is types.MethodType and target.__func__ is _APPLY and isinstance(target.__self__, type)


def call_apply(tracer: "Tracer", cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """The value of `cls.apply(*args)` with forward and backward traced, or None to keep the
    opaque call."""
    try:
        return _traced_apply(tracer, cls, args, kwargs)
    except (NotModelled, gb.GraphBreak):
        return None


def _method(tracer: "Tracer", cls: type, name: str) -> Value:
    """`cls.<name>` as autograd calls it: a staticmethod's function, or a classmethod's bound
    to the class (entmax's functions define `forward` and `backward` as classmethods); read as
    the trace sees the class (one made in the region holds the trace's functions)."""
    from ..objects import attributes, classes

    return attributes.load_attr(tracer, classes.class_value(cls), name)


def _traced_apply(tracer: "Tracer", cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if kwargs:
        raise NotModelled("keyword arguments")
    for method in ("vmap", "jvp"):
        if getattr(cls, method) is not getattr(_BASE, method, None) and \
                getattr(cls, method) is not getattr(torch.autograd.Function, method, None):
            raise NotModelled(f"a {method} staticmethod")
    setup = cls.setup_context is not _BASE.setup_context
    grad_enabled = torch.is_grad_enabled()
    needs_input_grad = tuple(isinstance(arg, TensorValue) and arg.fake.requires_grad and grad_enabled
                             for arg in args)
    made: dict[str, Any] = {}

    def forward(inner_args: list[Value], inner_kwargs: dict[str, Value]) -> Value:
        from ..interpreter import calls

        ctx = _context(needs_input_grad)
        forward_function = _method(tracer, cls, "forward")
        if setup:
            output = calls.call_value(tracer, forward_function, inner_args, {})
            calls.call_value(tracer, _method(tracer, cls, "setup_context"),
                             [ctx, SequenceValue(inner_args, tuple), output], {})
        else:
            output = calls.call_value(tracer, forward_function, [ctx, *inner_args], {})
        made["ctx"], made["output"] = ctx, output
        made["saved"] = _saved_tensors(ctx, output)
        return SequenceValue([output, SequenceValue(made["saved"].extras, tuple)], tuple)

    name = cls.__name__
    forward_graph = trace_subgraph(tracer, None, args, purpose=f"The forward of {name}", grad_enabled=False,
                                   call=forward)
    ctx, output, saved = made["ctx"], made["output"], made["saved"]
    outputs = [leaf for leaf in flatten(output)[0] if is_graph_value(leaf)]
    if not all(isinstance(leaf, TensorValue) for leaf in [*outputs, *saved.extras]):
        raise NotModelled("a symbolic size among the outputs")
    non_differentiable = _output_positions(ctx, "non_differentiable", outputs)
    grads: list[int] = []

    def backward(inner_args: list[Value], inner_kwargs: dict[str, Value]) -> Value:
        from ..interpreter import calls

        saved_inside, output_grads = inner_args
        backward_ctx = saved.for_backward(ctx, list(saved_inside.items), needs_input_grad)
        result = calls.call_value(tracer, _method(tracer, cls, "backward"), [backward_ctx, *output_grads.items], {})
        given = result.items if isinstance(result, SequenceValue) and result.cls is None else [result]
        if len(given) < len(args) or any(not operations.is_none(extra) for extra in given[len(args):]):
            raise NotModelled("a wrong number of gradients (autograd raises it in the backward)")
        for index, grad in enumerate(given[:len(args)]):
            if isinstance(grad, TensorValue) and isinstance(args[index], TensorValue):
                grads.append(index)
            elif not operations.is_none(grad):
                raise NotModelled(f"a gradient of type {grad.python_type().__name__}")
        return SequenceValue([given[index] for index in grads], tuple)

    with tracer.graph.fake_mode:
        fake_grads = [torch.empty_like(leaf.fake) for leaf in outputs]
    try:
        backward_graph = trace_subgraph(
            tracer, None, [SequenceValue(saved.tensors, tuple), SequenceValue(outputs, tuple)],
            purpose=f"The backward of {name}", grad_enabled=False, call=backward,
            example=lambda position, leaf: leaf.fake if position < len(saved.tensors)
            else fake_grads[position - len(saved.tensors)])
    except gb.UserException as raised:  # eager raises it in the backward, not here
        raise NotModelled(f"the backward raises {raised.debug_context}") from None
    own = subgraphs.graph_arguments(args)
    inputs = [*own, *forward_graph.lifted, *backward_graph.lifted]
    num_forward_inputs = len(own) + len(forward_graph.lifted)
    flat_position = _flat_positions(args)
    spec = FunctionSpec(name, num_forward_inputs, len(outputs), saved.positions(outputs),
                        tuple(range(num_forward_inputs, len(inputs))), non_differentiable,
                        tuple(flat_position[index] for index in grads))
    target = FunctionCall(spec, setup, bool(getattr(cls, "generate_vmap_rule", False)))
    fakes = [subgraphs.fake_value(value) for value in inputs]
    result = subgraphs.run_on_fakes(tracer, f"{name}.apply",
                                    lambda: target(forward_graph.module, backward_graph.module, *fakes))
    graph = tracer.graph
    node_args = [graph.add_submodule(f"{name}_forward", forward_graph.module),
                 graph.add_submodule(f"{name}_backward", backward_graph.module), *inputs]
    results = graph.call_with_result(target, node_args, result)
    replacements = iter(results.items)
    leaves, unflatten = flatten(output)
    return unflatten([next(replacements) if is_graph_value(leaf) else leaf for leaf in leaves])


def _context(needs_input_grad: tuple[bool, ...]) -> ObjectValue:
    ctx = ObjectValue(None, FunctionCtx)
    ctx.overlay["needs_input_grad"] = ConstantValue(needs_input_grad)
    return ctx


class _Saved:
    """The tensors the backward reads: `save_for_backward`'s and those among the `ctx`
    attributes, each once (`tensors`); `extras` are those the forward must return
    besides its outputs."""

    def __init__(self, ctx: ObjectValue, output: Value) -> None:
        self.attributes = {name: value for name, value in ctx.overlay.items() if name not in _MODELLED}
        to_save = ctx.overlay.get("to_save")
        self.to_save = [] if to_save is None else _items(to_save)
        self.tensors: list[TensorValue] = []
        for value in [*self.to_save, *self.attributes.values()]:
            for leaf in flatten(value)[0]:
                if isinstance(leaf, TensorValue) and not any(leaf.node is known.node for known in self.tensors):
                    self.tensors.append(leaf)
                elif operations.is_symbolic(leaf):
                    raise NotModelled("a symbolic size on ctx")
        output_nodes = {leaf.node for leaf in flatten(output)[0] if isinstance(leaf, TensorValue)}
        self.extras = [tensor for tensor in self.tensors if tensor.node not in output_nodes]

    def positions(self, outputs: list[TensorValue]) -> tuple[int, ...]:
        """Where each saved tensor is among the forward's results (outputs, then extras)."""
        results = [*outputs, *self.extras]
        return tuple(next(index for index, result in enumerate(results) if result.node is tensor.node)
                     for tensor in self.tensors)

    def for_backward(self, ctx: ObjectValue, inside: list[Value], needs_input_grad: tuple) -> ObjectValue:
        """A ctx for the backward: the forward's attributes, its tensors replaced by `inside`."""
        by_node = {tensor.node: replacement for tensor, replacement in zip(self.tensors, inside)}

        def replaced(value: Value) -> Value:
            leaves, unflatten = flatten(value)
            return unflatten([by_node.get(leaf.node, leaf) if isinstance(leaf, TensorValue) else leaf
                              for leaf in leaves])
        made = _context(needs_input_grad)
        for name, value in self.attributes.items():
            made.overlay[name] = replaced(value)
        made.overlay["saved_tensors"] = SequenceValue([replaced(value) for value in self.to_save], tuple)
        return made


def _saved_tensors(ctx: ObjectValue, output: Value) -> _Saved:
    for name, method in _REFUSED.items():
        if name in ctx.overlay:
            raise NotModelled(f"ctx.{method}")
    materialize = ctx.overlay.get("materialize_grads")
    if materialize is not None and not (isinstance(materialize, ConstantValue) and materialize.value):
        raise NotModelled("set_materialize_grads(False)")
    return _Saved(ctx, output)


def _items(value: Value) -> list[Value]:
    if isinstance(value, SequenceValue):
        return list(value.items)
    raise NotModelled(f"ctx.to_save is a {value.python_type().__name__}")


def _output_positions(ctx: ObjectValue, name: str, outputs: list[TensorValue]) -> tuple[int, ...]:
    marked = ctx.overlay.get(name)
    if marked is None:
        return ()
    nodes = {leaf.node for leaf in flatten(marked)[0] if isinstance(leaf, TensorValue)}
    return tuple(index for index, leaf in enumerate(outputs) if leaf.node in nodes)


def _flat_positions(args: list[Value]) -> dict[int, int]:
    """For each argument that is a tensor, its position among the call's flat graph inputs."""
    positions, count = {}, 0
    for index, arg in enumerate(args):
        if isinstance(arg, TensorValue):
            positions[index] = count
        count += sum(1 for leaf in flatten(arg)[0] if is_graph_value(leaf))
    return positions
