"""A call to a `nonstrict_trace`-ed function: one opaque graph node, typed by a non-strict trace.

The strict tracer does not look inside the function. Its arguments are
flattened to a pytree spec and flat inputs (tensors and symbolic ints, then
module parameters and buffers, `pytree_values`); the function then runs once
under the non-strict tracer (`make_fx`) on the compilation's fake tensors,
which gives the output's structure and metadata, and records the body's
operations; the graph gets one node calling a `FlatCall` of the function on
the flat inputs, and the output is rebuilt around that node's results (its
tensors and symbolic sizes). Where the recording is faithful to autograd
(`nonstrict.replay`), ahead-of-time autograd replays it instead of running
the body again. Other non-tensor inputs and outputs, and the structure of
both, are specialised to this call site.

Reading a tensor that requires grad and is not an input, or mutating an
input, is legal but silently different from eager under ahead-of-time
autograd: each warns once, at the user's line.
"""
from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING, Any, Callable

import torch
import torch.utils._pytree as pytree
from torch._ops import OpOverload

from ..._core.errors import GraphwrightError
from ..._core.flat_call import FlatCall
from ..._core.user_stack import user_frames_of_traceback
from ...nonstrict import TRACE_RECORD_KEY, make_fx
from ...nonstrict.replay import replay, replayable
from ..interpreter.graph_breaks import GraphBreak, GraphBreakKind
from ..objects.values import Value
from . import marking_breaks as mb
from .pytree_values import (
    InvalidLeaf,
    check_output_leaves,
    example_value,
    flatten_call_arguments,
    is_graph_output,
    output_value,
)

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_WARNED: set[tuple[str, str]] = set()


def function_name(fn: Callable) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def call_nonstrict(tracer: "Tracer", fn: Callable, args: list[Value], kwargs: dict[str, Value]) -> Value:
    name = function_name(fn)
    try:
        flat = flatten_call_arguments(tracer, args, kwargs)
    except InvalidLeaf as leaf:
        kind = _INPUT_PROBLEMS[leaf.problem]
        raise tracer.graph_break(kind, f"input {leaf.path} of {name}: {leaf.kind}",
                                 path=leaf.path, name=name, type=leaf.kind) from None
    flat_call = FlatCall(fn, flat.in_spec, flat.leaves, flat.input_positions, flat.module_states)
    inputs = flat.graph_inputs
    fakes = [example_value(value) for value in inputs]
    output, gm = trace_on_fakes(tracer, flat_call.call_function, fakes, name)
    try:
        leaves, out_spec = check_output_leaves(output)
    except InvalidLeaf as leaf:
        raise tracer.graph_break(mb.NONSTRICT_INVALID_OUTPUT, f"{leaf.path} of {name}: {leaf.kind}",
                                 path=leaf.path, name=name, type=leaf.kind) from None
    results = tuple(leaf for leaf in leaves if is_graph_output(leaf))
    flat_call.out_spec = out_spec
    flat_call.output_positions = tuple(index for index, leaf in enumerate(leaves) if is_graph_output(leaf))
    flat_call.call_site = _call_site(tracer)
    if replayable(results, fakes):
        flat_call.traced_body = functools.partial(replay, gm, None)
    _warn_about_impurities(tracer, gm, name, len(flat.inputs))
    result = tracer.graph.call_with_result(flat_call, inputs, results)
    return output_value(leaves, out_spec, lambda index: result.items[index])


_INPUT_PROBLEMS = {"type": mb.NONSTRICT_INVALID_INPUT, "context": mb.NONSTRICT_OBJECT_IN_CONTEXT,
                   "created_opaque": mb.NONSTRICT_OPAQUE_CREATED}


def trace_on_fakes(tracer: "Tracer", call: Callable, fakes: list[torch.Tensor], name: str,
                   failure: GraphBreakKind = mb.NONSTRICT_TRACE_FAILED,
                   reads_constants: bool = True) -> tuple[Any, torch.fx.GraphModule]:
    """Run `call(*fakes)` under the non-strict tracer; its output (on fakes) and the graph.
    A real tensor that is not an input is a constant of the trace, or with `reads_constants`
    False an error. An exception is the graph break `failure`, its stack ending at the user's
    line that raised."""
    outputs: list[Any] = []

    def traced(anchor: torch.Tensor, *flat: Any) -> tuple:
        output = call(*flat)
        outputs.append(output)
        return tuple(leaf for leaf in pytree.tree_leaves(output) if is_graph_output(leaf))

    # make_fx traces on the fake mode of its first fake input: the anchor makes it the
    # compilation's, even for a call without tensor inputs.
    anchor = tracer.graph.fake_mode.from_tensor(torch.empty(0))
    try:
        gm = make_fx(traced, tracing_mode="fake", _allow_non_fake_inputs=reads_constants,
                     record_stack_traces=True)(anchor, *fakes)
    except GraphBreak:
        raise
    except Exception as error:
        raise _trace_failure(tracer, error, name, failure) from error
    return outputs[0], gm


def _trace_failure(tracer: "Tracer", error: Exception, name: str, failure: GraphBreakKind) -> GraphBreak:
    body_frames = user_frames_of_traceback(error.__traceback__)
    cause = error.__cause__
    if cause is not None:
        body_frames = body_frames or user_frames_of_traceback(cause.__traceback__)
    if isinstance(error, GraphwrightError):
        described = f"`{error.title}`: {error.explanation}" if error.explanation else f"`{error.title}`"
    else:
        described = f"`{type(error).__name__}: {error}`"
    explanation = failure.explanation.format(name=name, error=described)
    return GraphBreak(failure, explanation, f"{type(error).__name__} in {name}",
                      tracer.user_stack() + body_frames)


def _warn_about_impurities(tracer: "Tracer", gm: torch.fx.GraphModule, name: str, num_tensor_args: int) -> None:
    record = gm.meta[TRACE_RECORD_KEY]
    for constant in record.constants:
        if constant.requires_grad and not constant.is_module_state:
            _warn_once(constant.user_location or _call_site(tracer),
                       f"nonstrict_trace-ed function `{name}` reads a tensor that requires grad but is "
                       "not an input: it is a constant of the graph and gets no gradient through it. "
                       "Pass the tensor as an argument.")
    if _mutates_an_argument(gm, num_tensor_args):
        _warn_once(_call_site(tracer),
                   f"nonstrict_trace-ed function `{name}` mutates one of its inputs in place; other code "
                   "in the compiled region must not depend on the order of that mutation. "
                   "Return the new value instead.")


def _mutates_an_argument(gm: torch.fx.GraphModule, num_tensor_args: int) -> bool:
    """Whether an in-place op writes a tensor argument (module buffers, like batch-norm
    statistics, are state the module owns and may update)."""
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    arguments = set(placeholders[1:1 + num_tensor_args])  # after the anchor
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, OpOverload):
            continue
        schema = node.target._schema
        if not schema.is_mutable:
            continue
        for argument, value in zip(schema.arguments, node.args):
            written = argument.alias_info is not None and argument.alias_info.is_write
            if written and value in arguments:
                return True
    return False


def _call_site(tracer: "Tracer") -> str:
    stack = tracer.user_stack()
    return f"{stack[-1].filename}:{stack[-1].lineno}" if stack else ""


def _warn_once(location: str, message: str) -> None:
    if (location, message) in _WARNED:
        return
    _WARNED.add((location, message))
    filename, _, line = location.rpartition(":")
    if filename and line.isdigit():
        warnings.warn_explicit(message, UserWarning, filename, int(line))
    else:
        warnings.warn(message, UserWarning, stacklevel=2)

