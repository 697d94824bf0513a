"""Symbolic values to pytrees and back, for calls the tracer does not look inside.

`flatten_call_arguments` turns a call's symbolic arguments into what a
`FlatCall` needs: the pytree spec of `(args, kwargs)`, its leaves with every
tensor replaced by a slot, the tensor values the graph passes, and the
`nn.Module` inputs whose parameters and buffers follow them. Non-tensor
leaves are Python values of this call site (specialised: they are guarded
where they were read). User classes must be registered with
torch.utils._pytree; `register_constant` instances (and opaque value types
registered with `torch._library.opaque_object`) are guarded by equality.

`output_value` does the reverse for a call's result: the output tree seen
on fake tensors, with its tensor leaves replaced by graph values.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import torch
import torch.utils._pytree as pytree
from torch._library.opaque_object import is_opaque_value_type

from ..._core.flat_call import ModuleState, module_state_names
from ..objects import attributes
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


class TensorSlot:
    """Stands for the tensor leaf at `index` of the flat graph inputs while the spec is built."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class InvalidLeaf(Exception):
    """A value that is not a pytree the call accepts; `path` names it, `kind` its type."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(path)
        self.path = path
        self.kind = kind


@dataclass
class FlatArguments:
    in_spec: pytree.TreeSpec
    leaves: list[Any]
    tensor_positions: list[int]
    tensors: list[TensorValue]
    module_states: list[ModuleState] = field(default_factory=list)
    module_tensors: list[TensorValue] = field(default_factory=list)

    @property
    def graph_inputs(self) -> list[TensorValue]:
        return [*self.tensors, *self.module_tensors]


class _Flattener:
    def __init__(self, tracer: "Tracer") -> None:
        self.tracer = tracer
        self.tensors: list[TensorValue] = []
        self.module_states: list[ModuleState] = []
        self.module_tensors: list[TensorValue] = []

    def template(self, value: Value, path: str) -> Any:
        if isinstance(value, TensorValue):
            self.tensors.append(value)
            return TensorSlot(len(self.tensors) - 1)
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

    def _constant(self, value: ConstantValue, path: str) -> Any:
        real = value.value
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
        if _is_equality_constant(cls) and value.obj is not None and not value.overlay:
            # Assumed unmutated in the region, and equal instances behave alike: guard by equality.
            self.tracer.add_guard(value.source, "const", value.obj)
            return value.obj
        if cls not in pytree.SUPPORTED_NODES or not hasattr(value.obj if value.obj is not None else cls, "__dict__"):
            raise InvalidLeaf(path, cls.__qualname__)
        # A stand-in instance holding templates: the class's own flatten function picks its children.
        names = list(vars(value.obj)) if value.obj is not None else []
        names += [name for name in value.overlay if name not in names and value.overlay[name] is not None]
        shadow = cls.__new__(cls)
        for name in names:
            attr = attributes.lookup(self.tracer, value, name)
            if attr is not None:
                shadow.__dict__[name] = self.template(attr, f"{path}.{name}")
        return shadow


def _is_equality_constant(cls: type) -> bool:
    """Classes whose instances a call takes as constants, equal instances alike:
    `register_constant` pytrees and opaque value types."""
    return pytree.is_constant_class(cls) or is_opaque_value_type(cls)


def flatten_call_arguments(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> FlatArguments:
    """Raises `InvalidLeaf` for an argument that is not an accepted pytree."""
    flattener = _Flattener(tracer)
    template = (tuple(flattener.template(arg, f"args[{index}]") for index, arg in enumerate(args)),
                {key: flattener.template(arg, f"kwargs[{key!r}]") for key, arg in kwargs.items()})
    leaves, in_spec = pytree.tree_flatten(template)
    # Only the tensors a class's flatten function kept as children are inputs of the call.
    positions = [position for position, leaf in enumerate(leaves) if isinstance(leaf, TensorSlot)]
    tensors = [flattener.tensors[leaves[position].index] for position in positions]
    for position in positions:
        leaves[position] = None
    return FlatArguments(in_spec, leaves, positions, tensors, flattener.module_states,
                         flattener.module_tensors)


def check_output_leaves(output: Any) -> tuple[list[Any], pytree.TreeSpec]:
    """The output's leaves and spec; raises `InvalidLeaf` for a leaf that is not a tensor or primitive."""
    leaves, spec = pytree.tree_flatten(output)
    for index, leaf in enumerate(leaves):
        if not isinstance(leaf, (torch.Tensor, *PRIMITIVE_LEAF_TYPES)):
            raise InvalidLeaf(_leaf_path(output, index), type(leaf).__qualname__)
    return leaves, spec


def _leaf_path(output: Any, index: int) -> str:
    """`output[0]['a']` for the index-th leaf, or `output leaf {index}` for classes without key paths."""
    try:
        key_path, _ = pytree.tree_flatten_with_path(output)[0][index]
    except ValueError:
        return f"output leaf {index}"
    return "output" + pytree.keystr(key_path)


def output_value(leaves: list[Any], spec: pytree.TreeSpec, tensor_value: Callable[[int], Value]) -> Value:
    """The symbolic value of an output tree: tensor leaves from `tensor_value(i)` (the i-th
    tensor leaf), other leaves as the constants the trace saw."""
    values: list[Value] = []
    count = 0
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            values.append(tensor_value(count))
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
