"""A call to a `leaf_function`: one node that stays opaque at every level.

The arguments are flattened as for `nonstrict_trace` (`pytree_values`); the
registered fake implementation runs on the compilation's fake tensors for the
output's structure and metadata; the node calls the `graphwright::leaf_call`
operator (`_core/leaf_op.py`), so that the original Python runs at run time
under every backend. Non-tensor outputs are the fake's, fixed at trace time.
"""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable

from ..._core import rules
from ..._core.flat_call import apply_flat_call
from ..._core.leaf_op import LeafCall
from ..objects.values import DictValue, SequenceValue, TensorValue, Value
from . import marking_breaks as mb
from .nonstrict_calls import function_name, trace_on_fakes
from .pytree_values import (
    InvalidLeaf,
    check_output_leaves,
    flatten_call_arguments,
    output_value,
)

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer


def call_leaf(tracer: "Tracer", fn: Callable, args: list[Value], kwargs: dict[str, Value]) -> Value:
    info = rules.leaf_function_info(fn)
    name = function_name(fn)
    if info.fake is None:
        raise tracer.graph_break(mb.LEAF_MISSING_FAKE, f"leaf_function {name} without fake", name=name)
    try:
        flat = flatten_call_arguments(tracer, args, kwargs)
    except InvalidLeaf as leaf:
        raise tracer.graph_break(mb.LEAF_INVALID_IO, f"input {leaf.path} of {name}", name=name,
                                 what=f"input `{leaf.path}`", type=leaf.kind) from None
    mutated = _mutated_inputs(fn, info.mutates_args, args, kwargs, flat.tensors)
    site = LeafCall(info.fn, info.fake, flat.in_spec, flat.leaves, flat.tensor_positions,
                    flat.module_states, mutated)
    inputs = flat.graph_inputs

    def fake_call(*flat_inputs: Any) -> Any:
        return apply_flat_call(info.fake, flat.in_spec, flat.leaves, flat.tensor_positions,
                               flat.module_states, flat_inputs)

    output, _ = trace_on_fakes(tracer, fake_call, [value.fake for value in inputs], name, mb.LEAF_FAKE_FAILED)
    try:
        leaves, out_spec = check_output_leaves(output)
    except InvalidLeaf as leaf:
        raise tracer.graph_break(mb.LEAF_INVALID_IO, f"{leaf.path} of {name}", name=name,
                                 what=f"`{leaf.path}`", type=leaf.kind) from None
    with tracer.graph.fake_mode:
        tensors = site(*[value.fake for value in inputs])
    result = tracer.graph.call_with_result(site, inputs, tensors)
    num_outputs = len(tensors) - len(mutated)
    for index, new_value in zip(mutated, result.items[num_outputs:]):
        tracer.graph.call("call_method", "copy_", [inputs[index], new_value], {})
    return output_value(leaves, out_spec, lambda index: result.items[index])


def _mutated_inputs(fn: Callable, mutates_args: frozenset[str], args: list[Value],
                    kwargs: dict[str, Value], tensors: list[TensorValue]) -> list[int]:
    """Indices in `tensors` of the tensors inside the arguments named in `mutates_args`."""
    if not mutates_args:
        return []
    bound = inspect.signature(fn).bind(*args, **kwargs).arguments
    inside = {id(tensor) for name in mutates_args if name in bound for tensor in _tensors_in(bound[name])}
    return [index for index, tensor in enumerate(tensors) if id(tensor) in inside]


def _tensors_in(value: Value) -> list[TensorValue]:
    if isinstance(value, TensorValue):
        return [value]
    if isinstance(value, SequenceValue):
        return [tensor for item in value.items for tensor in _tensors_in(item)]
    if isinstance(value, DictValue):
        return [tensor for item in value.items.values() for tensor in _tensors_in(item)]
    return []

