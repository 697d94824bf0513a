"""Recording PyTorch's higher-order operators (`torch.ops.higher_order.cond`) into a graph.

A higher-order operator takes functions as arguments. When one reaches the
`GraphRecorder` (ahead-of-time autograd traces a graph holding a `cond` node,
and its functionalization and autograd rules call the operator again with
wrapped or derived functions), each function argument is traced here, on the
operator's own operands, into a subgraph: a `GraphModule` held by the graph
under construction and read by a `get_attr` node. The call is then run one
level down (on the fake tensors, with the subgraphs) for its outputs, and
recorded as one node taking the subgraphs.

Which arguments are functions, and what each is called with, is the
operator's calling convention (`_FUNCTION_ARGUMENTS`); an operator without
one is refused with the error `make_fx` has always given. Only traces that
ask for it (`supports_higher_order_operators` on the recorder) see them: a
user's `make_fx` of eager `torch.cond` would otherwise go through `torch.compile`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import torch
import torch.fx
import torch.utils._pytree as pytree

from .symbolic_sizes import SymbolicSizeNodes
from .trace_record import TraceRecord

if TYPE_CHECKING:
    from .recorder import GraphRecorder

_cond = torch.ops.higher_order.cond

# operator -> (index of a function argument, the operands it is called with) for one call
_FUNCTION_ARGUMENTS: dict[Any, Callable[[tuple], list[tuple[int, tuple]]]] = {
    _cond: lambda args: [(1, tuple(args[3])), (2, tuple(args[3]))],
}


def record_higher_order(recorder: "GraphRecorder", operator: Any, args: tuple, kwargs: dict) -> Any:
    """Trace the function arguments of `operator(*args)` into subgraphs, run it, record it."""
    convention = _FUNCTION_ARGUMENTS.get(operator)
    if convention is None:
        # the text `translate_trace_exception` recognises
        raise NotImplementedError(f"There was no rule registered for HigherOrderOperator "
                                  f"{operator._name} and mode {recorder}")
    run_args = list(args)
    node_args = [recorder.graph_value(arg) for arg in args]
    for index, operands in convention(args):
        subgraph = trace_subgraph(recorder, args[index], operands)
        run_args[index] = subgraph
        node_args[index] = recorder.add_subgraph(f"{operator._name}_{_ROLE.get((operator, index), index)}",
                                                 subgraph)
    out = operator(*run_args, **kwargs)
    node = recorder.graph.create_node("call_function", operator, tuple(node_args),
                                      {key: recorder.graph_value(value) for key, value in kwargs.items()},
                                      name=operator._name)
    recorder.track_output(node, out)
    return out


_ROLE = {(_cond, 1): "true", (_cond, 2): "false"}


def trace_subgraph(recorder: "GraphRecorder", fn: Callable, operands: tuple) -> torch.fx.GraphModule:
    """`fn(*operands)` traced into a graph module of its own, one placeholder per operand leaf."""
    from .recorder import GraphRecorder

    graph = torch.fx.Graph()
    sizes = SymbolicSizeNodes(graph)
    inner = GraphRecorder(
        graph,
        TraceRecord(recorder.tracing_mode),
        sizes,
        fake_mode=recorder.fake_mode,
        decomposition_table=recorder.decompositions,
        allow_non_fake_inputs=recorder.allow_non_fake_inputs,
        named_constants={},
    )
    inner.supports_higher_order_operators = True
    for index, leaf in enumerate(pytree.tree_leaves(operands)):
        placeholder = graph.placeholder(f"arg{index}")
        if isinstance(leaf, torch.Tensor):
            placeholder.meta["val"] = inner.metadata_of(leaf)
            inner.track(leaf, placeholder)
            sizes.bind_tensor(placeholder, leaf)
        else:
            placeholder.meta["val"] = leaf
            if isinstance(leaf, torch.SymInt):
                sizes.bind_symbol(placeholder, leaf)
    with inner:
        out = fn(*operands)
    graph.output(inner.graph_value(out))
    graph.eliminate_dead_code()
    return torch.fx.GraphModule(inner.constants, graph)
