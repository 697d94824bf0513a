"""Methods of the values the tracer models natively.

Tensor methods become `call_method` nodes (or a graph break when they need
data or run autograd); list and dict methods change the symbolic container
and report the mutation; methods of immutable constants are computed; module
iteration helpers return the modelled children; logger methods are recorded
for replay after the graph.
"""
from __future__ import annotations

import collections
import logging
import operator
from typing import TYPE_CHECKING

from ..guards.sources import AttrSource, ModuleDictSource
from ..interpreter import graph_breaks as gb
from . import classes, operations, output_calls, symbolic_numbers
from .values import (
    NONE,
    ConstantValue,
    ContextValue,
    DictValue,
    GeneratorValue,
    IteratorValue,
    ModuleValue,
    ObjectValue,
    SequenceValue,
    TensorValue,
    Value,
    key_value,
)

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_TENSOR_TO_PYTHON = frozenset({"item", "tolist", "numpy", "__bool__", "__int__", "__float__",
                               "__index__", "data_ptr", "untyped_storage", "storage"})
_TENSOR_AUTOGRAD = frozenset({"backward", "register_hook", "retain_grad"})
_STORAGE_QUERIES = frozenset({"storage_offset", "is_shared", "is_pinned"})
_OBJECT_METHODS = frozenset({"__setattr__", "__getattribute__", "__delattr__", "__init__", "__eq__", "__ne__"})


def call_method(tracer: "Tracer", receiver: Value, name: str, args: list[Value],
                kwargs: dict[str, Value]) -> Value:
    if name in _OBJECT_METHODS and isinstance(receiver, (ObjectValue, DictValue, SequenceValue, ModuleValue)):
        result = classes.call_builtin_method(tracer, receiver, name, args, kwargs)
        if result is not None:
            return result
    if isinstance(receiver, TensorValue):
        return _tensor_method(tracer, receiver, name, args, kwargs)
    if isinstance(receiver, SequenceValue):
        return _sequence_method(tracer, receiver, name, args, kwargs)
    if isinstance(receiver, DictValue):
        return _dict_method(tracer, receiver, name, args, kwargs)
    if isinstance(receiver, ConstantValue) and name == "__call__" and isinstance(receiver.value, type):
        from . import instances  # type.__call__ on a class: __new__ then __init__

        return instances.type_call(tracer, receiver.value, args, kwargs)
    if isinstance(receiver, ConstantValue):
        return _constant_method(tracer, receiver, name, args, kwargs)
    if isinstance(receiver, ModuleValue):
        return _module_method(tracer, receiver, name, args, kwargs)
    if isinstance(receiver, GeneratorValue):
        from ..interpreter import generators

        return generators.call_method(tracer, receiver, name, args)
    if isinstance(receiver, ContextValue) and name == "__exit__":
        from ..interpreter import contexts

        return contexts.exit_context(tracer, receiver)
    if isinstance(receiver, ObjectValue) and isinstance(receiver.obj, logging.Logger):
        return output_calls.call_logger_method(tracer, receiver, name, args, kwargs)
    raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"{receiver!r}.{name}()", name=name,
                             type=receiver.python_type().__name__)


def _tensor_method(tracer: "Tracer", tensor: TensorValue, name: str, args: list[Value],
                   kwargs: dict[str, Value]) -> Value:
    if name == "item" and tracer.data_dependence.scalars:
        return tracer.graph.call("call_method", "item", [tensor], {})
    if name == "tolist" and tracer.data_dependence.scalars:
        return _captured_scalars(tracer, tensor)
    if name in _TENSOR_TO_PYTHON:
        raise tracer.graph_break(gb.TENSOR_TO_PYTHON, f"Tensor.{name}()", what=f"Tensor.{name}()")
    if name in _TENSOR_AUTOGRAD:
        raise tracer.graph_break(gb.AUTOGRAD_CALL, f"Tensor.{name}()", name=f"Tensor.{name}")
    if name in _STORAGE_QUERIES and not args and not kwargs:
        return _storage_query(tracer, tensor, name)
    if name == "new_tensor" and args:  # data the graph computes: `torch.tensor` of it, as TorchDynamo
        made = symbolic_numbers.tensor_of_a_symbol(
            tracer, args[:1], {"dtype": ConstantValue(tensor.fake.dtype), "device": ConstantValue(tensor.fake.device),
                               **kwargs})
        if made is not None:
            return made
    if name in _SCALED_POINTWISE and isinstance(kwargs.get("value"), TensorValue) and len(args) == 2:
        return _scaled_pointwise_by_a_tensor(tracer, tensor, name, args, kwargs)
    return tracer.graph.call("call_method", name, [tensor, *args], kwargs)


def _storage_query(tracer: "Tracer", tensor: TensorValue, name: str) -> Value:
    """What a tensor's storage is like, which the tensor guard does not check: asked of the real
    input, and guarded; of a tensor computed in the region, from its fake (a view's offset
    would depend on its base's, unguarded: a graph break)."""
    real = tracer.real_tensors.get(id(tensor))
    if real is None and name == "storage_offset":
        raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, "storage_offset() of a computed tensor",
                                 name="storage_offset()", type="Tensor computed in the compiled region")
    if real is None:
        return tracer.graph.call("call_method", name, [tensor], {})
    answer = getattr(real, name)()
    tracer.add_guard(tensor.source, "call", (name, (), answer))
    return ConstantValue(answer)


_SCALED_POINTWISE = {"addcdiv": operator.truediv, "addcdiv_": operator.truediv,
                     "addcmul": operator.mul, "addcmul_": operator.mul}


def _scaled_pointwise_by_a_tensor(tracer: "Tracer", tensor: TensorValue, name: str, args: list[Value],
                                  kwargs: dict[str, Value]) -> Value:
    """`x.addcdiv_(a, b, value=v)` with a tensor `v` (Adam's step size when its step counts are
    tensors): the operator takes a number, which a traced tensor is not, so it is written out
    as what it computes, `x.add_(a / b * v)`."""
    combined = tracer.graph.call("call_function", _SCALED_POINTWISE[name], args, {})
    scaled = tracer.graph.call("call_function", operator.mul, [combined, kwargs["value"]], {})
    return tracer.graph.call("call_method", "add_" if name.endswith("_") else "add", [tensor, scaled], {})


def _captured_scalars(tracer: "Tracer", tensor: TensorValue) -> Value:
    """`.tolist()` as graph values (unbacked symbols): one `item` per element, so that every
    backend (ahead-of-time autograd too) sees only `item` calls. A symbolic length is
    specialised (a list has a length)."""
    if tensor.fake.dim() == 0:
        return tracer.graph.call("call_method", "item", [tensor], {})
    rows = [tracer.graph.call("call_function", operator.getitem, [tensor, ConstantValue(index)], {})
            for index in range(int(tensor.fake.shape[0]))]
    return SequenceValue([_captured_scalars(tracer, row) for row in rows], list)


def _sequence_method(tracer: "Tracer", sequence: SequenceValue, name: str, args: list[Value],
                     kwargs: dict[str, Value]) -> Value:
    items = sequence.items
    if sequence.kind is list and name in ("append", "extend", "insert", "pop", "clear", "reverse",
                                          "remove", "sort", "__setitem__", "__delitem__"):
        tracer.side_effects.mutate(sequence)
        if name == "append":
            items.append(args[0])
        elif name == "extend":
            items.extend(operations.iterate(tracer, args[0]))
        elif name == "insert":
            items.insert(operations.python_value(tracer, args[0]), args[1])
        elif name == "pop":
            index = operations.python_value(tracer, args[0]) if args else -1
            return items.pop(index)
        elif name == "clear":
            items.clear()
        elif name == "reverse":
            items.reverse()
        elif name == "remove":
            items.pop(_index_of(tracer, items, args[0]))
        elif name == "sort":
            from . import builtin_calls

            keys = builtin_calls._sort_keys(tracer, items, kwargs.get("key"))
            reverse = bool(operations.python_value(tracer, kwargs.get("reverse", NONE)))
            items[:] = [items[i] for i in builtin_calls.sort_order(tracer, keys, reverse)]
        elif name == "__setitem__":
            operations.native_setitem(tracer, sequence, args[0], args[1])
        else:
            operations.native_delitem(tracer, sequence, args[0])
        return NONE
    if name == "index":
        return ConstantValue(_index_of(tracer, items, args[0]))
    if name == "count":
        return ConstantValue(sum(operations.is_same(tracer, item, args[0]) or
                                 (operations.is_constant_tree(item) and operations.is_constant_tree(args[0])
                                  and operations.python_value(tracer, item) == operations.python_value(tracer, args[0]))
                                 for item in items))
    if name == "copy":
        return SequenceValue(items, sequence.kind)
    if name == "__getitem__":
        return operations.native_getitem(tracer, sequence, args[0])
    if name == "__len__":
        return ConstantValue(len(items))
    if name == "__iter__":
        return IteratorValue(list(items))
    if name == "__contains__":
        return ConstantValue(operations.native_contains(tracer, sequence, args[0]))
    if name == "_asdict" and sequence.cls is not None:
        return DictValue(dict(zip(sequence.cls._fields, items)))
    if name == "_replace" and sequence.cls is not None:
        fields = list(sequence.cls._fields)
        replaced = list(items)
        for key, value in kwargs.items():
            replaced[fields.index(key)] = value
        return SequenceValue(replaced, tuple, cls=sequence.cls)
    raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"{sequence.kind.__name__}.{name}", name=name,
                             type=sequence.python_type().__name__)


def _index_of(tracer: "Tracer", items: list[Value], wanted: Value) -> int:
    for index, item in enumerate(items):
        if operations.contains(tracer, SequenceValue([item], list), wanted):
            return index
    raise tracer.user_error(ValueError("value is not in list"))


_SET_QUERIES = frozenset({"union", "intersection", "difference", "symmetric_difference", "issubset",
                          "issuperset", "isdisjoint"})
_SET_UPDATES = frozenset({"intersection_update", "difference_update", "symmetric_difference_update"})


def _set_algebra(tracer: "Tracer", members: DictValue, name: str, args: list[Value]) -> Value | None:
    """Set algebra on sets of constants, computed on the real sets; None when a set or an
    argument holds values the region made."""
    if not (operations.is_constant_tree(members) and all(operations.is_constant_tree(arg) for arg in args)):
        return None
    real = operations.python_value(tracer, members)
    others = [operations.python_value(tracer, arg) for arg in args]
    try:
        if name in _SET_QUERIES:
            return operations.constant_result(getattr(real, name)(*others))
        getattr(real, name)(*others)
    except Exception as error:
        raise tracer.user_error(error, f"set.{name}()")
    tracer.side_effects.mutate(members)
    members.items.clear()
    members.items.update({item: ConstantValue(item) for item in real})
    return NONE


def _dict_method(tracer: "Tracer", mapping: DictValue, name: str, args: list[Value],
                 kwargs: dict[str, Value]) -> Value:
    if mapping.kind is set and name in _SET_QUERIES | _SET_UPDATES and not kwargs:
        computed = _set_algebra(tracer, mapping, name, args)
        if computed is not None:
            return computed
    key = operations.hashable_key(tracer, args[0]) if args and name not in ("update",) else None
    if name == "get":
        found = mapping.lookup(key)
        return found if found is not None else args[1] if len(args) > 1 else NONE
    if name == "__getitem__":
        return operations.native_getitem(tracer, mapping, args[0])
    if name == "__contains__":
        return ConstantValue(mapping.lookup(key) is not None)
    items = mapping.items
    if name == "keys":  # a set-like view: iteration keeps the dict's order
        return DictValue({key: key_value(key) for key in items}, set)
    if name == "__iter__":
        return IteratorValue([key_value(k) for k in items])
    if name == "values":
        return SequenceValue(list(items.values()), list)
    if name == "items":
        return SequenceValue([SequenceValue([key_value(k), v], tuple) for k, v in items.items()], list)
    if name == "__len__":
        return ConstantValue(len(items))
    if name == "copy":
        if mapping.cls is collections.OrderedDict:
            return DictValue(items, cls=collections.OrderedDict)
        if mapping.cls is not None and classes.builtin_base(mapping.cls) is collections.OrderedDict:
            from . import instances  # OrderedDict.copy() is type(self)(self)

            return instances.call_class(tracer, mapping.cls, [mapping], {})
        return DictValue(items, mapping.kind)
    tracer.side_effects.mutate(mapping)
    if name in ("update", "__ior__"):
        items.update(operations.dict_items(tracer, args[0]) if args else {})
        items.update(kwargs)
        return NONE
    if name == "pop":
        if key in items:
            return items.pop(key)
        if len(args) > 1:
            return args[1]
        raise tracer.user_error(KeyError(key))
    if name == "setdefault":
        return items.setdefault(key, args[1] if len(args) > 1 else NONE)
    if name == "__setitem__":
        items[key] = args[1]
        return NONE
    if name == "__delitem__":
        operations.native_delitem(tracer, mapping, args[0])
        return NONE
    if name == "popitem" and mapping.kind is dict:
        if not items:
            raise tracer.user_error(KeyError("popitem(): dictionary is empty"))
        last = operations.python_value(tracer, args[0] if args else kwargs.get("last", ConstantValue(True)))
        popped = next(reversed(items)) if last else next(iter(items))
        return SequenceValue([ConstantValue(popped), items.pop(popped)], tuple)
    if name == "move_to_end" and mapping.cls is not None:
        last = operations.python_value(tracer, args[1] if len(args) > 1 else kwargs.get("last", ConstantValue(True)))
        if key not in items:
            raise tracer.user_error(KeyError(key))
        moved = items.pop(key)
        if last:
            items[key] = moved
        else:
            rest = dict(items)
            items.clear()
            items[key] = moved
            items.update(rest)
        return NONE
    if name == "clear":
        items.clear()
        return NONE
    if name in ("add",):
        items[key] = args[0]
        return NONE
    if name in ("discard", "remove"):
        items.pop(key, None)
        return NONE
    raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"dict.{name}", name=name,
                             type=mapping.python_type().__name__)


def _constant_method(tracer: "Tracer", receiver: ConstantValue, name: str, args: list[Value],
                     kwargs: dict[str, Value]) -> Value:
    python_args = [operations.python_value(tracer, arg, f"{type(receiver.value).__name__}.{name}")
                   for arg in args]
    python_kwargs = {key: operations.python_value(tracer, arg) for key, arg in kwargs.items()}
    try:
        result = getattr(receiver.value, name)(*python_args, **python_kwargs)
    except Exception as error:
        raise tracer.user_error(error, f"{type(receiver.value).__name__}.{name}()")
    return operations.constant_result(result)


def _guard_tables(tracer: "Tracer", module: ModuleValue, tables: tuple[str, ...], recurse: bool) -> None:
    """Guard what a walk over the module's parameters, buffers or submodules saw: the names in
    each table (an entry registered or removed later changes the walk) and the entries that were
    None (skipped by the walk, until one is set)."""
    from .attributes import module_table_entry

    if module.source is None:
        return
    real = module.module
    for table in ("_modules", *tables):
        tracer.add_guard(AttrSource(module.source, table), "keys", tuple(getattr(real, table)))
        for key, entry in getattr(real, table).items():
            if entry is None:
                tracer.wrap(None, ModuleDictSource(module.source, table, key))
    if recurse:
        for key, child in real._modules.items():
            if child is not None:
                _guard_tables(tracer, module_table_entry(tracer, module, key), tables, recurse)


def _module_method(tracer: "Tracer", module: ModuleValue, name: str, args: list[Value],
                   kwargs: dict[str, Value]) -> Value:
    from . import attributes

    real = module.module
    if name == "__call__":  # nn.Module's, reached by super() from a class's own __call__
        from ..interpreter import calls

        return calls.module_call(tracer, module, args, kwargs)
    if name == "__getattr__":  # nn.Module's, reached by super(): its parameters, buffers, submodules
        key = operations.python_value(tracer, args[0])
        found = attributes.module_table_entry(tracer, module, key)
        if found is None:
            raise tracer.user_error(AttributeError(f"'{type(real).__name__}' object has no attribute '{key}'"))
        return found
    if name in ("items", "keys", "values"):
        keys = [item.value for item in attributes.module_children_for_iteration(tracer, module)]
        if name == "keys":
            return SequenceValue([ConstantValue(key) for key in keys], list)
        children = [attributes.module_item(tracer, module, key) for key in keys]
        if name == "values":
            return SequenceValue(children, list)
        return SequenceValue([SequenceValue([ConstantValue(k), c], tuple) for k, c in zip(keys, children)], list)
    named = name.startswith("named_")
    if name in ("parameters", "named_parameters", "buffers", "named_buffers"):
        method = getattr(real, name if named else "named_" + name)
        python_kwargs = {key: operations.python_value(tracer, arg) for key, arg in kwargs.items()}
        pairs = list(method(**python_kwargs))
        table = "_parameters" if "parameters" in name else "_buffers"
        _guard_tables(tracer, module, (table,), python_kwargs.get("recurse", True))
    else:
        method = getattr(real, "named_modules" if name in ("modules", "named_modules") else "named_children")
        pairs = list(method())
        _guard_tables(tracer, module, (), name in ("modules", "named_modules"))
    entries = []
    for path, _ in pairs:
        value: Value = module
        for part in path.split(".") if path else []:
            value = attributes.load_attr(tracer, value, part)
        entries.append(SequenceValue([ConstantValue(path), value], tuple) if named else value)
    return IteratorValue(entries)

