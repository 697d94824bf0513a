"""A call to a `leaf_function`: one node that stays opaque at every level.

The arguments are flattened as for `nonstrict_trace` (`pytree_values`); the
`mutates_args` expressions are resolved to flat inputs, and every flat input
is named as the user writes it (for the errors the call may raise at run
time). The registered fake implementation runs on the compilation's fake
tensors, as the real function will run at run time (inputs detached, the
declared mutated ones copied), for the output's structure and metadata. The
node calls the `graphwright::leaf_call` operator (`_core/leaf_op.py`), so that
the original Python runs at run time, once per call, under every backend.
Non-tensor outputs are the fake's, fixed at trace time.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable

import torch

from ..._core.errors import InvalidMarkingError
from ..._core.flat_call import apply_flat_call
from ..._core.leaf_function import (
    LeafFunctionInfo,
    leaf_function_info,
    named_input_tensors,
)
from ..._core.leaf_op import LeafCall
from ..._core.subclass_protocol import dispatches_itself
from ..interpreter.contexts import set_grad_mode
from ..objects.values import TensorValue, Value
from . import marking_breaks as mb
from .nonstrict_calls import function_name, trace_on_fakes
from .pytree_values import (
    FlatArguments,
    InvalidLeaf,
    check_output_leaves,
    example_value,
    flatten_call_arguments,
    is_graph_output,
    output_value,
)

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer


def call_leaf(tracer: "Tracer", fn: Callable, args: list[Value], kwargs: dict[str, Value]) -> Value:
    info = leaf_function_info(fn)
    name = function_name(fn)
    if info.fake is None:
        raise tracer.graph_break(mb.LEAF_MISSING_FAKE, f"leaf_function {name} without fake", name=name)
    try:
        flat = flatten_call_arguments(tracer, args, kwargs, symbolic_inputs=(torch.SymInt,))
    except InvalidLeaf as leaf:
        raise tracer.graph_break(mb.LEAF_INVALID_IO, f"input {leaf.path} of {name}", name=name,
                                 what=f"input `{leaf.path}`", type=leaf.kind) from None
    inputs = flat.graph_inputs
    fakes = [example_value(value) for value in inputs]
    try:
        mutated, names = _mutated_and_named(info, flat, fakes)
    except (InvalidMarkingError, TypeError) as error:
        raise tracer.user_error(error, raised_eagerly=True) from None
    for fake, input_name in zip(fakes, names):
        if dispatches_itself(fake):
            raise tracer.graph_break(mb.LEAF_SUBCLASS_INPUT, f"input {input_name} of {name}", name=name,
                                     what=f"input `{input_name}`", type=type(fake).__qualname__)
    sizes = [index for index, value in enumerate(inputs) if not isinstance(value, TensorValue)]
    site = LeafCall(info.fn, info.fake, info.name, flat.in_spec, flat.leaves, flat.input_positions,
                    flat.module_states, mutated, names, sizes)
    output, _ = trace_on_fakes(tracer, lambda *flat_inputs: site.run_fake(flat_inputs)[0], fakes, name,
                               mb.LEAF_FAKE_FAILED, reads_constants=False)
    try:
        leaves, out_spec = check_output_leaves(output)
    except InvalidLeaf as leaf:
        raise tracer.graph_break(mb.LEAF_INVALID_IO, f"{leaf.path} of {name}", name=name,
                                 what=f"`{leaf.path}`", type=leaf.kind) from None
    site.record_fake_output(output)
    with tracer.graph.fake_mode:
        tensors = site(*fakes)
    result = tracer.graph.call_with_result(site, inputs, tensors)
    num_tensors, num_outputs = len(site.fake_metadata), site.num_outputs
    if mutated:  # copied back out of autograd's sight, as the operator's kernel checks
        grad_enabled = torch.is_grad_enabled()
        set_grad_mode(tracer, False)
        for index, new_value in zip(mutated, result.items[num_outputs:]):
            tracer.graph.call("call_method", "copy_", [inputs[index], new_value], {})
        set_grad_mode(tracer, grad_enabled)
    # A scalar the fake computes from data comes back as a 0-dim tensor: its value is `.item()`.
    scalars = [tracer.graph.call("call_method", "item", [value], {})
               for value in result.items[num_tensors:num_outputs]]
    results = iter(result.items[:num_tensors])
    graph_values = [scalars.pop(0) if not isinstance(leaf, torch.Tensor) else next(results)
                    for leaf in leaves if is_graph_output(leaf)]
    return output_value(leaves, out_spec, graph_values.__getitem__)


def _mutated_and_named(info: LeafFunctionInfo, flat: FlatArguments,
                       fakes: Sequence[torch.Tensor]) -> tuple[list[int], list[str]]:
    """The flat inputs the `mutates_args` expressions name, and a name for every flat input,
    found on the call's arguments rebuilt around the fakes (module states swapped in)."""
    positions: dict[int, list[int]] = {}
    for index, fake in enumerate(fakes):
        positions.setdefault(id(fake), []).append(index)

    def resolve(*args: Any, **kwargs: Any) -> tuple[list[int], list[str]]:
        arguments = info.arguments(args, kwargs)
        names = [f"input {index}" for index in range(len(fakes))]
        for path, tensor in reversed(list(named_input_tensors(arguments))):
            for index in positions.get(id(tensor), ()):
                names[index] = path
        mutated = sorted({index for tensor in info.declared_tensors(arguments)
                          for index in positions.get(id(tensor), ())})
        return mutated, names

    return apply_flat_call(resolve, flat.in_spec, flat.leaves, flat.input_positions, flat.module_states, fakes)
