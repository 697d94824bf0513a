"""Symbolic values to pytrees and back, for calls the tracer does not look inside.

`flatten_call_arguments` turns a call's symbolic arguments into what a
`FlatCall` needs: the pytree spec of `(args, kwargs)`, its leaves with every
graph input replaced by a slot (tensors, and symbolic ints when the call
takes them), the values the graph passes, and the `nn.Module` inputs whose
parameters and buffers follow them. Other leaves are Python values of this
call site (specialised: they are guarded where they were read). User classes
must be registered with torch.utils._pytree, and what their flatten function
puts in a node's context must be a constant; `register_constant` instances
and opaque value types are guarded by equality, opaque reference types by
identity.

`output_value` does the reverse for a call's result: the output tree seen
on fake tensors, with its tensor (and symbolic) leaves replaced by graph values.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import torch
import torch.utils._pytree as pytree
from torch._library.opaque_object import is_opaque_reference_type, is_opaque_value_type

from ..._core.flat_call import ModuleState, module_state_names
from ..objects import attributes, operations
from ..objects.classes import builtin_base, is_instance_value
from ..objects.instances import fill, make_empty
from ..objects.values import (
    ConstantValue,
    DictValue,
    ModuleValue,
    ObjectValue,
    SequenceValue,
    TensorValue,
    Value,
)
from ..objects.wrap import is_constant

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

PRIMITIVE_LEAF_TYPES = (int, float, bool, str, complex, type(None), torch.dtype, torch.device,
                        torch.layout, torch.memory_format)
SYMBOLIC_LEAF_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)


class InputSlot:
    """Stands for the graph input at `index` of the flat inputs while the spec is built."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class InvalidLeaf(Exception):
    """A value that is not a pytree the call accepts; `path` names it, `kind` its type.

    `problem` says why: "type" (not a pytree), "context" (a registered class's flatten
    function put it in the node's context, which must be constant), "created_opaque" (an
    opaque reference object made inside the region)."""

    def __init__(self, path: str, kind: str, problem: str = "type") -> None:
        super().__init__(path)
        self.path = path
        self.kind = kind
        self.problem = problem


class _Rejected:
    """An attribute of a registered class that is no pytree: an error only if the class's
    flatten function keeps it (as a child, or in its context)."""

    __slots__ = ("leaf",)

    def __init__(self, leaf: InvalidLeaf) -> None:
        self.leaf = leaf


@dataclass
class FlatArguments:
    in_spec: pytree.TreeSpec
    leaves: list[Any]
    input_positions: list[int]
    inputs: list[Value]  # a TensorValue, or a ConstantValue holding a symbolic int
    module_states: list[ModuleState] = field(default_factory=list)
    module_tensors: list[TensorValue] = field(default_factory=list)

    @property
    def graph_inputs(self) -> list[Value]:
        return [*self.inputs, *self.module_tensors]


def example_value(value: Value) -> Any:
    """What a graph input is while tracing: a fake tensor, or a SymInt."""
    return value.fake if isinstance(value, TensorValue) else value.value


class _Flattener:
    def __init__(self, tracer: "Tracer", symbolic_inputs: tuple[type, ...]) -> None:
        self.tracer = tracer
        self.symbolic_inputs = symbolic_inputs
        self.inputs: list[Value] = []
        self.module_states: list[ModuleState] = []
        self.module_tensors: list[TensorValue] = []
        self.rejected: list[_Rejected] = []

    def template(self, value: Value, path: str) -> Any:
        if isinstance(value, TensorValue):
            return self._slot(value)
        if isinstance(value, ConstantValue):
            return self._constant(value, path)
        if is_instance_value(value) and not isinstance(value, ObjectValue) or \
                isinstance(value, DictValue) and value.cls is not None:
            return self._container_instance(value, path)
        if isinstance(value, SequenceValue):
            items = [self.template(item, f"{path}[{index}]") for index, item in enumerate(value.items)]
            if value.cls is not None:
                return value.cls(*items) if hasattr(value.cls, "_fields") else value.cls(items)
            return items if value.kind is list else tuple(items)
        if isinstance(value, DictValue) and value.kind is dict:
            return {key: self.template(item, f"{path}[{key!r}]") for key, item in value.items.items()}
        if isinstance(value, ModuleValue):
            return self._module(value, path)
        if isinstance(value, ObjectValue):
            return self._object(value, path)
        raise InvalidLeaf(path, value.python_type().__qualname__)

    def _slot(self, value: Value) -> InputSlot:
        self.inputs.append(value)
        return InputSlot(len(self.inputs) - 1)

    def _constant(self, value: ConstantValue, path: str) -> Any:
        real = value.value
        if operations.is_symbolic(value):
            # A size or an int that varies between calls: an input of the call, or specialised.
            if isinstance(real, self.symbolic_inputs):
                return self._slot(value)
            return operations.python_value(self.tracer, value)
        if isinstance(real, PRIMITIVE_LEAF_TYPES) or isinstance(real, enum.Enum):
            return real
        if _is_equality_constant(type(real)):
            return real
        raise InvalidLeaf(path, type(real).__qualname__)

    def _module(self, value: ModuleValue, path: str) -> torch.nn.Module:
        # The call runs this very module (its Python attributes are constants of the call):
        # another instance of the class needs its own graph.
        self.tracer.add_guard(value.source, "id", value.module)
        names = module_state_names(value.module)
        for name in names:
            current: Value = value
            for part in name.split("."):
                current = attributes.load_attr(self.tracer, current, part)
            if not isinstance(current, TensorValue):
                raise InvalidLeaf(f"{path}.{name}", current.python_type().__qualname__)
            self.module_tensors.append(current)
        self.module_states.append(ModuleState(value.module, names))
        return value.module

    def _container_instance(self, value: Value, path: str) -> Any:
        """A stand-in instance of a dict, list or tuple subclass (OrderedDict, a ModelOutput)
        holding templates, made as residual code rebuilds one: its class's own flatten
        function (it must be registered) picks its children."""
        cls = value.python_type()
        if cls not in pytree.SUPPORTED_NODES:
            raise InvalidLeaf(path, cls.__qualname__)
        base = builtin_base(cls)
        if isinstance(value, DictValue):
            contents: Any = {key: self.template(item, f"{path}[{key!r}]") for key, item in value.items.items()}
        else:
            contents = [self.template(item, f"{path}[{index}]") for index, item in enumerate(value.items)]
        state = {name: self.template(attr, f"{path}.{name}") for name, attr in self._attributes(value).items()}
        shadow = make_empty(cls, base, tuple(contents) if base is tuple else None)
        fill(shadow, base, None if base is tuple else contents, state)
        return shadow

    def _attributes(self, value: Value) -> dict[str, Value]:
        real = value.obj
        names = list(vars(real)) if real is not None and hasattr(real, "__dict__") else []
        names += [name for name in value.overlay if name not in names]
        found = {name: attributes.lookup(self.tracer, value, name) for name in names}
        return {name: attr for name, attr in found.items() if attr is not None}

    def _object(self, value: ObjectValue, path: str) -> Any:
        cls = value.cls
        unchanged = value.obj is not None and not value.overlay
        if _is_equality_constant(cls) and unchanged:
            # Assumed unmutated in the region, and equal instances behave alike: guard by equality.
            self.tracer.add_guard(value.source, "const", value.obj)
            return value.obj
        if is_opaque_reference_type(cls):
            if not unchanged:
                raise InvalidLeaf(path, cls.__qualname__, "created_opaque")
            self.tracer.add_guard(value.source, "id", value.obj)
            return value.obj
        if cls not in pytree.SUPPORTED_NODES or not hasattr(value.obj if value.obj is not None else cls, "__dict__"):
            raise InvalidLeaf(path, cls.__qualname__)
        # A stand-in instance holding templates: the class's own flatten function picks its children.
        names = list(vars(value.obj)) if value.obj is not None else []
        names += [name for name in value.overlay if name not in names and value.overlay[name] is not None]
        shadow = cls.__new__(cls)
        for name in names:
            attr = attributes.lookup(self.tracer, value, name)
            if attr is None:
                continue
            try:
                shadow.__dict__[name] = self.template(attr, f"{path}.{name}")
            except InvalidLeaf as leaf:
                shadow.__dict__[name] = rejected = _Rejected(leaf)
                self.rejected.append(rejected)
        return shadow


def _is_equality_constant(cls: type) -> bool:
    """Classes whose instances a call takes as constants, equal instances alike:
    `register_constant` pytrees and opaque value types."""
    return pytree.is_constant_class(cls) or is_opaque_value_type(cls)


def flatten_call_arguments(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value],
                           symbolic_inputs: tuple[type, ...] = SYMBOLIC_LEAF_TYPES) -> FlatArguments:
    """Raises `InvalidLeaf` for an argument that is not an accepted pytree. Symbolic values of
    the `symbolic_inputs` types are inputs of the call, the others specialised to their value."""
    flattener = _Flattener(tracer, symbolic_inputs)
    template = (tuple(flattener.template(arg, f"args[{index}]") for index, arg in enumerate(args)),
                {key: flattener.template(arg, f"kwargs[{key!r}]") for key, arg in kwargs.items()})
    leaves, in_spec = pytree.tree_flatten(template)
    for leaf in leaves:
        if isinstance(leaf, _Rejected):
            raise leaf.leaf
    for rejected in flattener.rejected:
        if _in_context(in_spec, rejected):
            leaf = rejected.leaf
            raise InvalidLeaf(leaf.path, leaf.kind, "context")
    # Only the values a class's flatten function kept as children are inputs of the call.
    positions = [position for position, leaf in enumerate(leaves) if isinstance(leaf, InputSlot)]
    inputs = [flattener.inputs[leaves[position].index] for position in positions]
    for position in positions:
        leaves[position] = None
    return FlatArguments(in_spec, leaves, positions, inputs, flattener.module_states, flattener.module_tensors)


def _in_context(spec: pytree.TreeSpec, rejected: _Rejected) -> bool:
    return _holds(spec.context, rejected) or any(_in_context(child, rejected) for child in spec.children_specs)


def _holds(context: Any, item: Any) -> bool:
    if context is item:
        return True
    if isinstance(context, (list, tuple, set, frozenset)):
        return any(_holds(part, item) for part in context)
    if isinstance(context, dict):
        return any(_holds(part, item) for part in (*context.keys(), *context.values()))
    return False


def is_graph_output(leaf: Any) -> bool:
    """An output leaf the graph computes: a tensor, or a symbolic size."""
    return isinstance(leaf, (torch.Tensor, *SYMBOLIC_LEAF_TYPES))


def check_output_leaves(output: Any, symbolic: bool = True) -> tuple[list[Any], pytree.TreeSpec]:
    """The output's leaves and spec; raises `InvalidLeaf` for a leaf that is not a tensor, a
    primitive, or (with `symbolic`) a symbolic size."""
    allowed = (torch.Tensor, *PRIMITIVE_LEAF_TYPES, *(SYMBOLIC_LEAF_TYPES if symbolic else ()))
    leaves, spec = pytree.tree_flatten(output)
    for index, leaf in enumerate(leaves):
        if not isinstance(leaf, allowed):
            raise InvalidLeaf(_leaf_path(output, index), type(leaf).__qualname__)
    return leaves, spec


def _leaf_path(output: Any, index: int) -> str:
    """`output[0]['a']` for the index-th leaf, or `output leaf {index}` for classes without key paths."""
    try:
        key_path, _ = pytree.tree_flatten_with_path(output)[0][index]
    except ValueError:
        return f"output leaf {index}"
    return "output" + pytree.keystr(key_path)


def output_value(leaves: list[Any], spec: pytree.TreeSpec, graph_value: Callable[[int], Value]) -> Value:
    """The symbolic value of an output tree: its tensors and symbolic sizes from `graph_value(i)`
    (the i-th of them), other leaves as the constants the trace saw."""
    values: list[Value] = []
    count = 0
    for leaf in leaves:
        if is_graph_output(leaf):
            values.append(graph_value(count))
            count += 1
        else:
            values.append(ConstantValue(leaf))
    return _as_value(pytree.tree_unflatten(values, spec))


def _as_value(tree: Any) -> Value:
    if isinstance(tree, Value):
        return tree
    if isinstance(tree, (dict, list, tuple)) and type(tree) not in (dict, list, tuple) \
            and not hasattr(type(tree), "_fields"):
        return _container_instance_value(tree)
    if type(tree) in (list, tuple) or isinstance(tree, tuple) and hasattr(type(tree), "_fields"):
        items = [_as_value(item) for item in tree]
        cls = None if type(tree) in (list, tuple) else type(tree)
        return SequenceValue(items, list if isinstance(tree, list) else tuple, cls=cls)
    if type(tree) is dict:
        return DictValue({key: _as_value(item) for key, item in tree.items()})
    if pytree.is_constant_class(type(tree)):
        return ConstantValue(tree)
    instance = ObjectValue(None, type(tree))
    for name, item in vars(tree).items():
        instance.overlay[name] = _as_value(item)
    return instance


def _container_instance_value(tree: Any) -> Value:
    """An output instance of a dict, list or tuple subclass: its items (read through its
    builtin base) in the value, its attributes in the overlay."""
    cls = type(tree)
    base = builtin_base(cls)
    if isinstance(tree, dict):
        value: Value = DictValue({key: _as_value(dict.__getitem__(tree, key)) for key in base.__iter__(tree)},
                                 cls=cls)
    else:
        value = SequenceValue([_as_value(item) for item in base.__iter__(tree)],
                              list if isinstance(tree, list) else tuple, cls=cls)
    for name, item in getattr(tree, "__dict__", {}).items():  # not leaves: None fields, constants
        value.overlay[name] = ConstantValue(item) if is_constant(item) else _as_value(item)
    return value
