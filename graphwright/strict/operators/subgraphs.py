"""Tracing a Python callable as a subgraph with its own inputs.

The mechanism every operator in this package shares (the branches of
`torch.cond`, the function of a `vmap` or `grad`, a checkpointed function, the
forward and backward of an `autograd.Function`): `trace_subgraph` runs the
function's bytecode on placeholders of a new graph, a `SubgraphBuilder`
standing in for the tracer's graph meanwhile, and returns a `Subgraph`: the
graph module, the outer values it reads, and its output structure.

A value of an enclosing graph used inside is lifted where it is used: it
becomes an extra placeholder after the function's own inputs, and the outer
value an extra input of the call (through every level of nesting). Graph
inputs first read inside are inputs of the whole compilation. The function
must leave the world as it found it: effects on objects made before it
(`SideEffects.scope`) and in-place changes of its inputs are graph breaks
naming the user's line, unless the operator lets the function change its tensor inputs in place.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import torch
from torch._dispatch.python import enable_python_dispatcher

from ..interpreter import graph_breaks as gb
from ..interpreter.graph_builder import GraphBuilder
from ..interpreter.symbolic_sizes import SYMBOLIC_TYPES, SymbolicSizes
from ..objects import operations
from ..objects.values import ConstantValue, DictValue, SequenceValue, TensorValue, Value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer


class _SubgraphSizes(SymbolicSizes):
    """The symbolic sizes of a subgraph: its own nodes, and symbols lifted from outside."""

    def __init__(self, shape_env: Any, builder: "SubgraphBuilder") -> None:
        super().__init__(shape_env)
        self.builder = builder

    def node_arg(self, value: Any) -> Any:
        try:
            return super().node_arg(value)
        except KeyError:
            if not isinstance(value, SYMBOLIC_TYPES):
                raise
            placeholder = self.builder.lift(self.builder.parent.symbolic.node_arg(value), value)
            self.register(placeholder, value)
            return placeholder


class SubgraphBuilder(GraphBuilder):
    """The graph of one function traced as a subgraph, inside the graph of `parent`."""

    def __init__(self, parent: GraphBuilder, on_break: Callable[..., Exception], purpose: str,
                 mutable_inputs: bool = False) -> None:
        super().__init__(on_break)
        self.parent = parent
        self.origin = parent.origin
        self.purpose = purpose
        self.mutable_inputs = mutable_inputs
        self.mutated_storages: set[int] = set()  # the inputs' storages it changed (`mutable_inputs`)
        self.dynamic_all, self.dynamic_dims = parent.dynamic_all, parent.dynamic_dims
        self.fake_mode = parent.fake_mode
        self.symbolic = None if parent.symbolic is None else _SubgraphSizes(parent.symbolic.shape_env, self)
        self.lifted: list[Value] = []  # outer values, in the order of their placeholders
        self._lifted_nodes: dict[torch.fx.Node, torch.fx.Node] = {}
        self._input_storages: set[int] = set()  # the inputs' storages, by address of their impl

    # graph inputs belong to the whole compilation
    def add_input(self, real: torch.Tensor, source: Any) -> TensorValue:
        return self.parent.add_input(real, source)

    def add_scalar_input(self, real: int | float, source: Any) -> ConstantValue:
        return self.parent.add_scalar_input(real, source)

    def wants_symbolic_scalar(self, source: Any, real: int | float) -> bool:
        return self.parent.wants_symbolic_scalar(source, real)

    def own_input(self, name: str, example: Any) -> torch.fx.Node:
        """A placeholder for one of the function's own inputs (made before any operation)."""
        node = self._named(self.graph.placeholder(self._unique_name(name)))
        node.meta["example_value"] = example
        if isinstance(example, torch.Tensor):
            self._input_storages.add(example.untyped_storage()._cdata)
        elif self.symbolic is not None and isinstance(example, SYMBOLIC_TYPES):
            self.symbolic.register(node, example)
        return node

    def lift(self, outer: torch.fx.Node, example: Any) -> torch.fx.Node:
        """The placeholder standing for `outer`, a node of an enclosing graph."""
        placeholder = self._lifted_nodes.get(outer)
        if placeholder is None:
            if not self._encloses(outer.graph):
                raise self._on_break(gb.SUBGRAPH_SIDE_EFFECT, f"value of {outer.name} escaped its subgraph",
                                     what="a value computed inside another subgraph", purpose=self.purpose)
            if self._first_op is None:
                placeholder = self._named(self.graph.placeholder(self._unique_name(outer.name)))
            else:
                with self.graph.inserting_before(self._first_op):
                    placeholder = self._named(self.graph.placeholder(self._unique_name(outer.name)))
            placeholder.meta["example_value"] = example
            self._lifted_nodes[outer] = placeholder
            if isinstance(example, torch.Tensor):
                self.lifted.append(TensorValue(outer, example))
                self._input_storages.add(example.untyped_storage()._cdata)
            else:
                self.lifted.append(ConstantValue(example))
        return placeholder

    def aliases_input(self, value: TensorValue) -> bool:
        """Whether `value` is (or views) an input of the subgraph or a value from outside it."""
        return value.node.graph is not self.graph or value.fake.untyped_storage()._cdata in self._input_storages

    def fresh(self, value: Value) -> Value:
        """`value`, or a copy of it when it is (or views) an input of the subgraph."""
        if isinstance(value, TensorValue) and self.aliases_input(value):
            return self.call("call_method", "clone", [value], {})
        return value

    @staticmethod
    def _named(placeholder: torch.fx.Node) -> torch.fx.Node:
        """The placeholder with its argument named as its node: torch.fx renames a node whose
        name an operation already took, and the generated code must not confuse the two."""
        placeholder.target = placeholder.name
        return placeholder

    def _encloses(self, graph: torch.fx.Graph) -> bool:
        builder: GraphBuilder | None = self.parent
        while builder is not None:
            if builder.graph is graph:
                return True
            builder = getattr(builder, "parent", None)
        return False

    def _tensor_node(self, tensor: TensorValue) -> torch.fx.Node:
        if tensor.node.graph is self.graph:
            return tensor.node
        return self.lift(tensor.node, tensor.fake)

    def _node_arg(self, value: Value | torch.fx.Node) -> Any:
        if isinstance(value, torch.fx.Node):
            return value
        return self._convert(value, self._tensor_node, None, "")

    def register_sizes(self, value: TensorValue) -> None:
        if self.symbolic is None:
            return
        for index, size in enumerate(value.fake.shape):
            if isinstance(size, torch.SymInt) and not self.symbolic.knows(size):
                node = self._create_node("call_method", "size", [self._tensor_node(value), index], {})
                self.symbolic.register(node, size)

    def call(self, kind: str, target: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
        tensors = [leaf for arg in [*args, *kwargs.values()] for leaf in flatten(arg)[0]
                   if isinstance(leaf, TensorValue)]
        versions = [tensor.fake._version for tensor in tensors]
        result = super().call(kind, target, args, kwargs)
        for tensor, version in zip(tensors, versions):
            storage = tensor.fake.untyped_storage()._cdata
            if tensor.fake._version != version and storage in self._input_storages:
                if self.mutable_inputs:
                    self.mutated_storages.add(storage)
                    continue
                name = target if kind == "call_method" else getattr(target, "__name__", repr(target))
                raise self._on_break(gb.SUBGRAPH_SIDE_EFFECT, f"in-place {name} on an input",
                                     what=f"an in-place change (`{name}`) of one of its inputs",
                                     purpose=self.purpose)
        return result


@dataclass
class Subgraph:
    """A function traced as a subgraph.

    The module takes the function's own inputs (the tensor and symbolic leaves
    of its arguments, in order), then one input per `lifted` value; it returns
    `output_leaves`, the graph values among the leaves of `output` (what the
    function returned, as the tracer saw it inside)."""

    module: torch.fx.GraphModule
    lifted: list[Value]
    output: Value
    output_leaves: list[Value]
    builder: SubgraphBuilder

    def rebuild(self, outer_leaves: list[Value]) -> Value:
        """The output structure with the graph values replaced by `outer_leaves`, in order."""
        replacements = iter(outer_leaves)
        leaves, unflatten = flatten(self.output)
        return unflatten([next(replacements) if is_graph_value(leaf) else leaf for leaf in leaves])


def is_graph_value(value: Value) -> bool:
    return isinstance(value, TensorValue) or operations.is_symbolic(value)


def flatten(value: Value) -> tuple[list[Value], Callable[[list[Value]], Value]]:
    """The leaves of a tree of lists, tuples (named too) and dicts, and a function that makes
    the same tree around new leaves."""
    if isinstance(value, SequenceValue) and (value.cls is None or hasattr(value.cls, "_fields")):
        parts = [flatten(item) for item in value.items]

        def rebuild_sequence(leaves: list[Value]) -> Value:
            return SequenceValue(_rebuild_parts(parts, leaves), value.kind, cls=value.cls)
        return [leaf for part in parts for leaf in part[0]], rebuild_sequence
    if isinstance(value, DictValue) and value.kind is dict and value.cls is None:
        keys = list(value.items)
        parts = [flatten(value.items[key]) for key in keys]

        def rebuild_dict(leaves: list[Value]) -> Value:
            return DictValue(dict(zip(keys, _rebuild_parts(parts, leaves))))
        return [leaf for part in parts for leaf in part[0]], rebuild_dict
    return [value], lambda leaves: leaves[0]


def _rebuild_parts(parts: list, leaves: list[Value]) -> list[Value]:
    items, position = [], 0
    for part_leaves, rebuild in parts:
        items.append(rebuild(leaves[position:position + len(part_leaves)]))
        position += len(part_leaves)
    return items


def trace_subgraph(tracer: "Tracer", function: Value, args: list[Value], kwargs: dict[str, Value] | None = None,
                   *, purpose: str, example: Callable[[int, TensorValue], torch.Tensor] | None = None,
                   grad_enabled: bool | None = None, fresh_outputs: bool = False, mutable_inputs: bool = False,
                   call: Callable[[list[Value], dict[str, Value]], Value] | None = None) -> Subgraph:
    """Trace `function(*args, **kwargs)` as a subgraph of the tracer's current graph.

    Each tensor leaf of the arguments becomes a placeholder whose fake tensor is
    `example(position, leaf)` (default: the leaf's own; `position` counts the
    leaves of the positional, then the keyword arguments), each symbolic number
    one of its own; other leaves stay constants. `purpose` names the function in messages
    ("A torch.cond branch"). `grad_enabled` is the grad mode it runs under
    (default: the current one). With `fresh_outputs`, an output that is an input
    (or a view of one) is returned as a copy. With `mutable_inputs`, it may change its tensor
    inputs (its own and those read from outside) in place: see `return_changed_inputs`. `call(args, kwargs)`, when given,
    is what runs inside instead of calling `function`."""
    from ..interpreter import calls

    kwargs = kwargs or {}
    parent = tracer.graph
    builder = SubgraphBuilder(parent, tracer.graph_break, purpose, mutable_inputs)

    def refuse(what: str) -> Exception:
        return tracer.graph_break(gb.SUBGRAPH_SIDE_EFFECT, what, what=what, purpose=purpose)

    grad_mode = torch.is_grad_enabled()
    tracer.graph = builder
    try:
        with tracer.side_effects.scope(refuse):
            positions = iter(range(1 << 62))
            inner_args = [_own_inputs(builder, arg, example, f"arg{index}", positions)
                          for index, arg in enumerate(args)]
            inner_kwargs = {key: _own_inputs(builder, arg, example, key, positions) for key, arg in kwargs.items()}
            if grad_enabled is not None:
                torch._C._set_grad_enabled(grad_enabled)
            if call is not None:
                output = call(inner_args, inner_kwargs)
            else:
                output = calls.call_value(tracer, function, inner_args, inner_kwargs)
            leaves, _ = flatten(output)
            output_leaves = [leaf for leaf in leaves if is_graph_value(leaf)]
            if fresh_outputs:
                output_leaves = [builder.fresh(leaf) for leaf in output_leaves]
            module = builder.finish(output_leaves)
    finally:
        torch._C._set_grad_enabled(grad_mode)
        tracer.graph = parent
    return Subgraph(module, builder.lifted, output, output_leaves, builder)


def _own_inputs(builder: SubgraphBuilder, value: Value, example: Callable | None, name: str,
                positions: Any) -> Value:
    leaves, unflatten = flatten(value)
    inner = []
    for index, leaf in enumerate(leaves):
        position = next(positions)
        label = name if len(leaves) == 1 else f"{name}_{index}"
        if isinstance(leaf, TensorValue):
            fake = leaf.fake if example is None else example(position, leaf)
            made = TensorValue(builder.own_input(label, fake), fake)
            made.cls = leaf.cls
            inner.append(made)
        elif operations.is_symbolic(leaf):
            builder.own_input(label, leaf.value)
            inner.append(leaf)
        else:
            inner.append(leaf)
    return unflatten(inner)


def aliases_input(subgraph: Subgraph, value: TensorValue) -> bool:
    """Whether an output of `subgraph` is (or views) one of its inputs."""
    return subgraph.builder.aliases_input(value)


def lifted_key(value: Value) -> Any:
    """What identifies an outer value read by subgraphs: its node, or its symbol."""
    if isinstance(value, TensorValue):
        return value.node
    return value.value.node.expr


def take_inputs(subgraph: Subgraph, num_own: int, lifted: list[Value]) -> None:
    """Make `subgraph` take `lifted` after its own inputs (those of other subgraphs of the same
    call too, unused): sibling subgraphs then share one calling convention."""
    graph = subgraph.module.graph
    placeholders = [node for node in graph.nodes if node.op == "placeholder"]
    current = dict(zip((lifted_key(value) for value in subgraph.lifted), placeholders[num_own:]))
    first_operation = next(node for node in graph.nodes if node.op != "placeholder")
    for index, value in enumerate(lifted):
        with graph.inserting_before(first_operation):
            node = SubgraphBuilder._named(graph.placeholder(f"lifted_{index}"))
        node.meta["example_value"] = fake_value(value)
        old = current.get(lifted_key(value))
        if old is not None:
            old.replace_all_uses_with(node)
    for old in current.values():
        graph.erase_node(old)
    subgraph.module.recompile()
    subgraph.lifted = list(lifted)


def changed_inputs(subgraphs: list[Subgraph], inputs: list[Value]) -> list[int]:
    """The positions among `inputs` (the shared calling convention of sibling `subgraphs`) of the
    tensors one of them changes in place."""
    changed = set().union(*(subgraph.builder.mutated_storages for subgraph in subgraphs))
    return [index for index, value in enumerate(inputs)
            if isinstance(value, TensorValue) and value.fake.untyped_storage()._cdata in changed]


def return_changed_inputs(subgraph: Subgraph, positions: list[int]) -> None:
    """Make `subgraph` change copies of its inputs at `positions` instead, and return the copies
    after its outputs: its caller copies them back into the inputs after the call, so that the
    operator calling it stays functional (ahead-of-time autograd and Inductor take no operator
    whose subgraphs change their inputs)."""
    graph = subgraph.module.graph
    placeholders = [node for node in graph.nodes if node.op == "placeholder"]
    first_operation = next(node for node in graph.nodes if node.op != "placeholder")
    copies = []
    for index in positions:
        original = placeholders[index]
        with graph.inserting_before(first_operation):
            copy = graph.call_method("clone", (original,))
        copy.meta["example_value"] = original.meta["example_value"]
        original.replace_all_uses_with(copy, delete_user_cb=lambda user, copy=copy: user is not copy)
        copies.append(copy)
    output = graph.output_node()
    output.args = (tuple(output.args[0]) + tuple(copies),)
    graph.lint()
    subgraph.module.recompile()


def tree_signature(value: Value) -> Any:
    """The structure of a tree of values with its constant leaves: equal for trees that
    differ only in their graph values."""
    if isinstance(value, SequenceValue) and (value.cls is None or hasattr(value.cls, "_fields")):
        return (value.kind, value.cls, tuple(tree_signature(item) for item in value.items))
    if isinstance(value, DictValue) and value.kind is dict and value.cls is None:
        return ("dict", tuple((key, tree_signature(item)) for key, item in value.items.items()))
    if is_graph_value(value):
        return "graph value"
    if isinstance(value, ConstantValue):
        return ("constant", type(value.value), repr(value.value))
    return ("object", id(value))


def bind_arguments(tracer: "Tracer", function: Callable, args: list[Value],
                   kwargs: dict[str, Value]) -> dict[str, Value]:
    """The call's arguments by parameter name, as `function` (a real Python function) binds
    them; defaults as values. A call that does not bind raises the program's TypeError."""
    try:
        bound = inspect.signature(function).bind(*args, **kwargs)
    except TypeError as error:
        raise tracer.user_error(error, f"{function.__name__}(...)")
    bound.apply_defaults()
    values = {}
    for name, value in bound.arguments.items():
        kind = bound.signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            values[name] = SequenceValue(list(value), tuple)
        elif kind is inspect.Parameter.VAR_KEYWORD:
            values[name] = DictValue(dict(value))
        else:
            values[name] = value if isinstance(value, Value) else operations.constant(value)
    return values


def graph_arguments(subgraph_inputs: list[Value]) -> list[Value]:
    """The graph values among the leaves of a call's arguments: the subgraph's own inputs, in order."""
    return [leaf for value in subgraph_inputs for leaf in flatten(value)[0] if is_graph_value(leaf)]


def fake_value(value: Value) -> Any:
    """What a value is on fake tensors (for running an operator at trace time)."""
    if isinstance(value, TensorValue):
        return value.fake
    if isinstance(value, ConstantValue):
        return value.value
    if isinstance(value, SequenceValue):
        return value.kind(fake_value(item) for item in value.items)
    if isinstance(value, DictValue):
        return {key: fake_value(item) for key, item in value.items.items()}
    raise TypeError(f"no fake value for {value!r}")


def run_on_fakes(tracer: "Tracer", name: str, run: Callable[[], Any]) -> Any:
    """`run()` in the compilation's fake mode: the fake result of an operator call made here."""
    graph = tracer.graph
    try:
        with graph.fake_mode, enable_python_dispatcher():  # as GraphBuilder.call runs operators
            return run()
    except gb.GraphBreak:
        raise
    except Exception as error:
        brk = tracer.graph_break(gb.FAKE_TENSOR_ERROR, f"{type(error).__name__}: {error}",
                                 op=name, error=f"{type(error).__name__}: {error}")
        brk.user_error = error
        raise brk from error
