"""`torch.cond(pred, true_fn, false_fn, operands)`: a branch the graph takes at run time.

With a tensor predicate (data-dependent: no graph break) or a symbolic one (a
`SymBool` over sizes), both branches are traced as subgraphs on the same
operands and the graph calls `torch.ops.higher_order.cond` with them (through
`_core/control_flow.py`), which every backend lowers (eager runs it; ahead-of-time autograd traces through it
with its autograd rule; Inductor compiles it). With a Python bool the branch is
chosen while tracing, as `torch.compile` does.

The branches must return the same structure of tensors with matching
metadata, and must not change anything outside themselves (GB040) but,
without grad mode, tensors in place (the operands, and tensors they read
from outside), as in PyTorch. An output that is one of the operands (or a
view of one) is refused under grad mode, as in PyTorch, and returned as a copy
without it: the result of a cond is always a new tensor, as under `torch.compile`.

`torch.ops.higher_order.map_impl(f, xs, args)` (what `functorch.experimental.control_flow.map`
calls) is unrolled over the leading size of `xs`, specialised as any size read as an int is:
`f` is inlined on each slice, as eager's dense implementation calls it, and the results
are stacked leaf by leaf. Under grad mode eager's map is one autograd.Function, whose
outputs all require grad when one does: a map with outputs that would not is refused.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ..._core.control_flow import cond
from ..interpreter import graph_breaks as gb
from ..objects import operations
from ..objects.values import ConstantValue, SequenceValue, TensorValue, Value
from . import subgraphs
from .subgraphs import Subgraph, flatten, is_graph_value, trace_subgraph

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_COND_FUNCTION = torch.cond


def call_cond(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`torch.cond(pred, true_fn, false_fn, operands=())`."""
    from ..interpreter import calls

    bound = subgraphs.bind_arguments(tracer, _COND_FUNCTION, args, kwargs)
    pred, true_fn, false_fn, operands = (bound[name] for name in ("pred", "true_fn", "false_fn", "operands"))
    if not isinstance(operands, SequenceValue) or operands.cls is not None:
        raise _refuse(tracer, f"`operands` must be a list or tuple, not a {operands.python_type().__name__}")
    items = list(operands.items)
    if isinstance(pred, ConstantValue) and not operations.is_symbolic(pred):
        # a Python predicate: the branch is known now (torch.compile specialises too)
        branch = true_fn if operations.truth(tracer, pred) else false_fn
        return calls.call_value(tracer, branch, items, {})
    if isinstance(pred, TensorValue):
        if pred.fake.numel() != 1:
            raise _refuse(tracer, f"a tensor predicate must have one element, not {pred.fake.numel()}")
    elif not (operations.is_symbolic(pred) and isinstance(pred.value, torch.SymBool)):
        raise _refuse(tracer, f"the predicate must be a bool, a SymBool or a one-element tensor, "
                              f"not a {pred.python_type().__name__}")
    for leaf in (leaf for item in items for leaf in flatten(item)[0]):
        if not (is_graph_value(leaf) or isinstance(leaf, ConstantValue) and type(leaf.value) is int):
            raise _refuse(tracer, f"operands may hold tensors and ints only, not a {leaf.python_type().__name__}")
    true = _branch(tracer, true_fn, items, "true_fn")
    false = _branch(tracer, false_fn, items, "false_fn")
    if subgraphs.tree_signature(true.output) != subgraphs.tree_signature(false.output):
        raise _refuse(tracer, "the two branches return different structures (or different constants)")
    lifted = merge_lifted(true, false)
    inputs = [*subgraphs.graph_arguments(items), *lifted]
    for branch in (true, false):
        subgraphs.take_inputs(branch, len(inputs) - len(lifted), lifted)
    changed = subgraphs.changed_inputs([true, false], inputs)
    for branch in (true, false):
        subgraphs.return_changed_inputs(branch, changed)
    fakes = [subgraphs.fake_value(value) for value in inputs]
    result = subgraphs.run_on_fakes(
        tracer, "torch.cond",
        lambda: cond(subgraphs.fake_value(pred), true.module, false.module, tuple(fakes)))
    graph = tracer.graph
    node_args = [pred, graph.add_submodule("cond_true", true.module),
                 graph.add_submodule("cond_false", false.module), SequenceValue(inputs, tuple)]
    outputs = graph.call_with_result(cond, node_args, result).items
    own_outputs = len(outputs) - len(changed)
    for index, new_value in zip(changed, outputs[own_outputs:]):
        graph.call("call_method", "copy_", [inputs[index], new_value], {})
    return true.rebuild(outputs[:own_outputs])


def _branch(tracer: "Tracer", function: Value, operands: list[Value], name: str) -> Subgraph:
    """One branch as a subgraph. Without grad mode an output that is an operand (or a view of one)
    is returned as a copy, and the branch may change its tensors in place; with it, both are
    refused, as in PyTorch (autograd would see an alias, or a mutation it cannot differentiate)."""
    grad_mode = torch.is_grad_enabled()
    branch = trace_subgraph(tracer, function, operands, purpose=f"A torch.cond branch (`{name}`)",
                            fresh_outputs=not grad_mode, mutable_inputs=not grad_mode)
    if grad_mode and any(isinstance(leaf, TensorValue) and subgraphs.aliases_input(branch, leaf)
                         for leaf in branch.output_leaves):
        raise _refuse(tracer, f"`{name}` returns one of its inputs or a view of one while grad mode is on "
                              "(return a clone)")
    return branch


def merge_lifted(*branches: Subgraph) -> list[Value]:
    """The outer values the branches read, each once, in order of first use."""
    merged: dict[Any, Value] = {}
    for branch in branches:
        for value in branch.lifted:
            merged.setdefault(subgraphs.lifted_key(value), value)
    return list(merged.values())


def call_map(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`map_impl(f, xs, args)`: `f(*slices of xs at i, *args)` for each i, each leaf stacked."""
    from ..interpreter import calls
    from ..objects import methods

    if len(args) != 3 or kwargs or not all(isinstance(arg, SequenceValue) for arg in args[1:]):
        raise _refuse(tracer, "expected map_impl(f, xs, args) with lists of tensors", op="map")
    function, xs, extra = args[0], list(args[1].items), list(args[2].items)
    if not xs or not all(isinstance(x, TensorValue) and x.fake.dim() > 0 for x in xs):
        raise _refuse(tracer, "`xs` must be tensors of at least one dimension", op="map")
    sizes = [operations.python_value(tracer, methods.call_method(tracer, x, "size", [ConstantValue(0)], {}),
                                     "the leading size of a map") for x in xs]
    if sizes[0] == 0 or any(size != sizes[0] for size in sizes):
        raise tracer.user_error(RuntimeError(f"Leading dimensions of mapped xs must be consistent and "
                                             f"nonzero. Got sizes {sizes}."))
    results = []
    for index in range(sizes[0]):
        slices = [methods.call_method(tracer, x, "select", [ConstantValue(0), ConstantValue(index)], {}) for x in xs]
        results.append(flatten(calls.call_value(tracer, function, [*slices, *extra], {})))
    leaves, rebuild = results[0]
    if any(len(other) != len(leaves) for other, _ in results) \
            or not all(isinstance(leaf, TensorValue) for other, _ in results for leaf in other):
        raise _refuse(tracer, "every call of `f` must return the same structure of tensors", op="map")
    stacked = [calls.call_constant(tracer, torch.stack,
                                   [SequenceValue([other[position] for other, _ in results], list)],
                                   {}) for position in range(len(leaves))]
    if torch.is_grad_enabled():
        # eager's map is one autograd.Function: every output requires grad if any input does
        needs = [leaf.fake.requires_grad for leaf in stacked]
        inputs_need = any(isinstance(leaf, TensorValue) and leaf.fake.requires_grad
                          for value in [*xs, *extra] for leaf in flatten(value)[0])
        if (any(needs) or inputs_need) and not all(needs):
            raise _refuse(tracer, "under grad mode some outputs of `f` do not depend on a tensor that requires "
                                  "grad (eager's map makes them all require grad)", op="map")
    return rebuild(stacked)


def _refuse(tracer: "Tracer", reason: str, op: str = "torch.cond") -> Exception:
    return tracer.graph_break(gb.HIGHER_ORDER_CALL, f"{op}: {reason}", op=op, reason=reason)


# the operator itself too: `torch.cond` called eagerly compiles a function calling it
HANDLERS = {_COND_FUNCTION: call_cond, torch.ops.higher_order.cond: call_cond,
            torch.ops.higher_order.map_impl: call_map}
