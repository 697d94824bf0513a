"""`make_fx`: run a function once and record its aten operations as a graph.

The traced function runs as ordinary Python on real, fake or symbolic-size
tensors, with a `GraphRecorder` on top of the dispatch-mode stack. Python
control flow is taken once and specialised; side effects happen during the
trace only; everything that is not an input becomes a constant of the graph.
The resulting `torch.fx.GraphModule` is called like the original function:
its placeholders are the flattened input leaves, and generated pytree code
rebuilds the input and output structures around them.
"""
from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Iterator, Sequence
from typing import Any, Callable

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch._dispatch.python import enable_python_dispatcher
from torch._ops import OpOverload
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.fx.graph import _PyTreeCodeGen, _PyTreeInfo
from torch.utils._python_dispatch import _pop_mode_temporarily

from .._core import source_lines
from .._core.errors import InvalidInputError
from .._core.user_stack import user_frames_of_stack
from .inputs import (
    TRACING_MODES,
    argument_names,
    choose_fake_mode,
    flatten_inputs,
    tracing_value,
)
from .recorder import GraphRecorder
from .symbolic_sizes import SymbolicSizeNodes
from .trace_errors import translate_trace_exception
from .trace_record import TRACE_RECORD_KEY, TraceRecord


def make_fx(
    f: Callable[..., Any],
    decomposition_table: dict[OpOverload, Callable[..., Any]] | None = None,
    tracing_mode: str = "real",
    *,
    _allow_non_fake_inputs: bool = False,
    _higher_order_operators: bool = False,
    record_stack_traces: bool = False,
) -> Callable[..., torch.fx.GraphModule]:
    """Return a function that traces `f` on its arguments into a GraphModule.

    >>> def f(x, y):
    ...     return x + y
    >>> gm = graphwright.make_fx(f, tracing_mode="fake")(torch.randn(3), 3.14)
    >>> gm.print_readable()   # add = torch.ops.aten.add.Tensor(x_1, 3.14)

    `decomposition_table` maps operators to Python functions that replace
    them (their operations are recorded instead). `tracing_mode` is "real",
    "fake" or "symbolic". The graph module carries a `TraceRecord` in
    `gm.meta["nonstrict_trace"]`. `_higher_order_operators` records calls of
    higher-order operators with their functions traced into subgraphs
    (`higher_order.py`); ahead-of-time autograd asks for it. With
    `record_stack_traces`, each node's `meta["stack_trace"]` holds the lines of
    `f` (and of what it calls) that ran the operation, as in PyTorch's make_fx.
    """
    if tracing_mode not in TRACING_MODES:
        raise InvalidInputError(
            f"Unknown tracing_mode {tracing_mode!r}",
            explanation=f"make_fx traces in one of the modes {', '.join(TRACING_MODES)}.",
            hints=['Pass tracing_mode="real", "fake" or "symbolic".'],
            user_stack=user_frames_of_stack(),
        )

    def trace(*args: Any, **kwargs: Any) -> torch.fx.GraphModule:
        if kwargs:
            raise InvalidInputError(
                "make_fx takes positional arguments only",
                explanation=f"The traced function was called with keyword arguments "
                f"{', '.join(map(repr, kwargs))}; the graph's inputs are the positional ones.",
                hints=["Pass them positionally, or as one dict argument."],
                user_stack=user_frames_of_stack(),
            )
        return _trace(f, args, decomposition_table, tracing_mode, _allow_non_fake_inputs,
                      _higher_order_operators, record_stack_traces)

    return trace


def _trace(
    f: Callable[..., Any],
    args: tuple,
    decomposition_table: dict[OpOverload, Callable[..., Any]] | None,
    tracing_mode: str,
    allow_non_fake_inputs: bool,
    higher_order_operators: bool = False,
    record_stack_traces: bool = False,
) -> torch.fx.GraphModule:
    trace = _record(f, args, decomposition_table, tracing_mode, allow_non_fake_inputs, higher_order_operators,
                    record_stack_traces=record_stack_traces)
    trace.graph.set_codegen(_PyTreeCodeGen(_PyTreeInfo(trace.names, trace.in_spec, trace.out_spec)))
    name = type(f).__name__ if isinstance(f, torch.nn.Module) else getattr(f, "__name__", "f")
    gm = torch.fx.GraphModule(trace.constants, trace.graph, class_name=_class_name(name))
    gm.meta[TRACE_RECORD_KEY] = trace.record
    if tracing_mode == "symbolic":
        gm.shape_env = trace.record.shape_env  # where PyTorch's make_fx leaves it
    return gm


def trace_aten_graph(
    f: Callable[..., Any],
    args: tuple,
    decomposition_table: dict[OpOverload, Callable[..., Any]] | None,
    *,
    generate_code: bool = True,
    late_inputs: LateInputs | None = None,
) -> torch.fx.GraphModule:
    """`f(*args)` traced for ahead-of-time autograd: fake inputs, tensors `f` reads without
    receiving them as constants, higher-order operators into subgraphs.

    The graph module has the flat calling convention graph compilers expect (placeholders
    in, a tuple out) and no `TraceRecord` (code generators key their caches on the graph
    module's meta, which the record's shape environment would make unpicklable). With
    `generate_code=False` its Python code is generated when first needed (`.code`, a call):
    a joint graph is partitioned, never run. Through `late_inputs` `f` may add inputs to
    the graph while it runs.
    """
    trace = _record(f, args, decomposition_table, "real", allow_non_fake_inputs=True,
                    higher_order_operators=True, late_inputs=late_inputs)
    module_class = torch.fx.GraphModule if generate_code else _LazyGraphModule
    return module_class(trace.constants, trace.graph, class_name=_class_name(getattr(f, "__name__", "f")))


class LateInputs:
    """Inputs a function traced by `trace_aten_graph` adds to its graph while it runs, once
    the run so far has decided them (ahead-of-time autograd's tangents take the forward
    outputs' shapes).

    >>> late = LateInputs()
    >>> def f(x):
    ...     y = x.sin()
    ...     (t,) = late.add(lambda: [torch.empty(y.shape)])
    ...     return y * t
    >>> gm = trace_aten_graph(f, (fake_x,), None, late_inputs=late)  # placeholders: x, t
    """

    def __init__(self) -> None:
        self._trace: tuple[torch.fx.Graph, GraphRecorder, SymbolicSizeNodes] | None = None
        self._last: torch.fx.Node | None = None
        self._count = 0

    def _bind(self, graph: torch.fx.Graph, recorder: GraphRecorder, sizes: SymbolicSizeNodes) -> None:
        self._trace = (graph, recorder, sizes)
        placeholders = [node for node in graph.nodes if node.op == "placeholder"]
        self._last = placeholders[-1] if placeholders else None
        self._count = len(placeholders)

    def add(self, make: Callable[[], Sequence[Any]]) -> list[Any]:
        """`make()`'s values as further inputs of the graph, placed after the others; `make`
        runs with the recorder off (what it computes is not part of the graph)."""
        graph, recorder, sizes = self._trace
        with _pop_mode_temporarily() as mode:
            if mode is not recorder:
                raise RuntimeError("LateInputs.add called outside its trace, or under another mode")
            values = list(make())
        for value in values:
            where = graph.inserting_after(self._last) if self._last is not None else graph.inserting_before(None)
            with where:
                self._last = _add_placeholder(graph, recorder, sizes, value, f"arg{self._count}")
            self._count += 1
        return values


@dataclasses.dataclass
class _Trace:
    graph: torch.fx.Graph
    constants: dict[str, Any]
    record: TraceRecord
    names: list[str]
    in_spec: pytree.TreeSpec
    out_spec: pytree.TreeSpec


def _record(
    f: Callable[..., Any],
    args: tuple,
    decomposition_table: dict[OpOverload, Callable[..., Any]] | None,
    tracing_mode: str,
    allow_non_fake_inputs: bool,
    higher_order_operators: bool,
    late_inputs: LateInputs | None = None,
    record_stack_traces: bool = False,
) -> _Trace:
    """Run `f(*args)` under a `GraphRecorder`: the graph it recorded, without code yet."""
    names = argument_names(f, len(args))
    leaves, paths, in_spec = flatten_inputs(args, names)
    fake_mode = choose_fake_mode(tracing_mode, leaves)
    graph = torch.fx.Graph()
    record = TraceRecord(tracing_mode, shape_env=fake_mode.shape_env if fake_mode else None)
    sizes = SymbolicSizeNodes(graph)
    recorder = GraphRecorder(
        graph,
        record,
        sizes,
        fake_mode=fake_mode,
        decomposition_table=decomposition_table,
        allow_non_fake_inputs=allow_non_fake_inputs,
        named_constants=_module_tensor_names(f),
    )
    recorder.supports_higher_order_operators = higher_order_operators
    if record_stack_traces:
        recorder.live_stack = source_lines.LiveStack(sys._getframe())  # `f`'s frames lie above this one
    traced_leaves = [tracing_value(leaf, path, tracing_mode, fake_mode) for leaf, path in zip(leaves, paths)]
    for value, path in zip(traced_leaves, paths):
        _add_placeholder(graph, recorder, sizes, value, path)
    if late_inputs is not None:
        late_inputs._bind(graph, recorder, sizes)

    with _tracing_modes(fake_mode, recorder), _callers_containers(args, leaves, traced_leaves) as call_args:
        try:
            outputs = f(*call_args)
        except Exception as exc:
            error = translate_trace_exception(exc, tracing_mode)
            if error is None:
                raise
            raise error from exc
        out_leaves, out_spec = pytree.tree_flatten(outputs)
        graph.output(tuple(_output_value(recorder, leaf) for leaf in out_leaves))

    graph.eliminate_dead_code()
    # Constants only dead code read are not part of the graph.
    kept = {node.target for node in graph.nodes if node.op == "get_attr"}
    record.constants = [constant for constant in record.constants if constant.target in kept]
    return _Trace(graph, recorder.constants, record, names, in_spec, out_spec)


def _add_placeholder(
    graph: torch.fx.Graph, recorder: GraphRecorder, sizes: SymbolicSizeNodes, value: Any, path: str
) -> torch.fx.Node:
    placeholder = graph.placeholder(_placeholder_name(path))
    if isinstance(value, torch.Tensor):
        # A fake input is its own metadata: callers find their own tensor there.
        placeholder.meta["val"] = value if isinstance(value, FakeTensor) else recorder.metadata_of(value)
        recorder.track(value, placeholder)
        sizes.bind_tensor(placeholder, value)
    else:
        placeholder.meta["val"] = value
        if isinstance(value, torch.SymInt):
            sizes.bind_symbol(placeholder, value)
    return placeholder


@contextlib.contextmanager
def _tracing_modes(fake_mode, recorder: GraphRecorder):
    with contextlib.ExitStack() as stack:
        if fake_mode is not None:
            stack.enter_context(fake_mode)
            if fake_mode.shape_env is not None:
                # Some symbolic-size rules of aten operators live in the Python dispatcher.
                stack.enter_context(enable_python_dispatcher())
        stack.enter_context(recorder)
        yield


@contextlib.contextmanager
def _callers_containers(args: tuple, leaves: list, traced_leaves: list) -> Iterator[tuple]:
    """What the traced function is called with: the caller's own objects.

    In real mode they are passed as they are. In fake and symbolic modes each
    input tensor in the caller's lists and dicts is swapped for its traced
    counterpart for the run, and after it every traced counterpart of an
    input found in those containers is swapped back for the real tensor:
    side effects on the containers (a `pop`, an `append`) happen to the
    caller's objects during the trace, as the function would do them (the
    non-strict tracing seed's example 3). A tensor the function computed and
    stored there has no real value: it stays the fake it was. Tuples are
    rebuilt around the same mutable children.
    """
    traced_of = {id(leaf): traced for leaf, traced in zip(leaves, traced_leaves) if traced is not leaf}
    if not traced_of:
        yield args
        return
    real_of = {id(traced): leaf for leaf, traced in zip(leaves, traced_leaves) if traced is not leaf}
    swapped: list[Any] = []
    try:
        yield tuple(_swap_in(arg, traced_of, swapped) for arg in args)
    finally:
        for container in swapped:
            keys = range(len(container)) if isinstance(container, list) else list(container)
            for key in keys:
                real = real_of.get(id(container[key]))
                if real is not None:
                    container[key] = real


def _swap_in(value: Any, traced_of: dict[int, Any], swapped: list) -> Any:
    """`value` with its input tensors replaced by their traced counterparts: lists and dicts in
    place (recorded in `swapped`), other containers rebuilt."""
    if isinstance(value, torch.Tensor):
        return traced_of.get(id(value), value)
    if type(value) in (list, dict):
        keys = range(len(value)) if type(value) is list else list(value)
        for key in keys:
            value[key] = _swap_in(value[key], traced_of, swapped)
        swapped.append(value)
        return value
    if pytree.tree_is_leaf(value):
        return value
    children, spec = pytree.tree_flatten(value, is_leaf=lambda node: node is not value)
    return pytree.tree_unflatten([_swap_in(child, traced_of, swapped) for child in children], spec)


def _output_value(recorder: GraphRecorder, leaf: Any) -> Any:
    if isinstance(leaf, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return recorder.graph_value(leaf)
    if isinstance(leaf, (int, float, bool, complex, str, type(None), torch.dtype, torch.device)):
        return leaf
    kind = type(leaf).__qualname__
    raise InvalidInputError(
        f"Unsupported output type `{kind}` for make_fx",
        explanation=f"The traced function returned a `{kind}`, which is neither a tensor, a "
        "number, a string, None nor a registered pytree, so the graph cannot return it.",
        hints=[
            f"Register `{kind}` with torch.utils._pytree (register_pytree_node or "
            "register_dataclass), or return tensors and numbers.",
        ],
        user_stack=user_frames_of_stack(),
    )


def _module_tensor_names(f: Any) -> dict[int, str]:
    """The tensors a traced module holds, by id, with their qualified names.

    Parameters, buffers, and plain tensor attributes (a GraphModule keeps its
    constants that way) are the module's state, handed over with it.
    """
    if not isinstance(f, torch.nn.Module):
        return {}
    named: dict[int, str] = {}
    for name, tensor in (*f.named_parameters(remove_duplicate=False), *f.named_buffers(remove_duplicate=False)):
        named.setdefault(id(tensor), name)
    for prefix, module in f.named_modules(remove_duplicate=False):
        for attribute, value in vars(module).items():
            if isinstance(value, torch.Tensor):
                named.setdefault(id(value), f"{prefix}.{attribute}" if prefix else attribute)
    return named


def _placeholder_name(path: str) -> str:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in path).strip("_")
    return f"{cleaned}_1"


def _class_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"f_{cleaned}"
