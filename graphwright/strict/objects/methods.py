"""Methods of the values the tracer models natively.

Tensor methods become `call_method` nodes (or a graph break when they need
data or run autograd; `numpy()` makes an array of the tensor); methods of NumPy
arrays are `numpy_arrays`'; list and dict methods change the symbolic container
and report the mutation; methods of immutable constants are computed; module
iteration helpers return the modelled children; logger methods are recorded
for replay after the graph.
"""
from __future__ import annotations

import inspect
import logging
import operator
from typing import TYPE_CHECKING

from ..guards.sources import AttrSource, ModuleDictSource
from ..interpreter import graph_breaks as gb
from . import (
    callable_attributes,
    classes,
    deques,
    descriptors,
    dict_views,
    dicts,
    exceptions,
    numpy_arrays,
    operations,
    output_calls,
    sets,
    storages,
    symbolic_numbers,
    text,
    torch_functions,
)
from .class_creation import made_class
from .python_errors import check_arguments, python_raises
from .values import (
    NONE,
    ArrayValue,
    ConstantValue,
    ContextValue,
    DescriptorValue,
    DequeValue,
    DictValue,
    DictViewValue,
    ExceptionValue,
    FunctionValue,
    GeneratorValue,
    IteratorValue,
    LazyIteratorValue,
    MethodValue,
    ModuleValue,
    ObjectValue,
    PartialValue,
    ScalarInstanceValue,
    SequenceValue,
    StorageValue,
    TensorValue,
    Value,
)

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_TENSOR_TO_PYTHON = frozenset({"item", "tolist", "numpy", "__bool__", "__int__", "__float__",
                               "__index__", "data_ptr", "storage"})
_TENSOR_AUTOGRAD = frozenset({"backward", "register_hook", "retain_grad"})
_STORAGE_QUERIES = frozenset({"storage_offset", "is_shared", "is_pinned"})
_OBJECT_METHODS = frozenset({"__setattr__", "__getattribute__", "__delattr__", "__init__", "__eq__", "__ne__"})


def call_method(tracer: "Tracer", receiver: Value, name: str, args: list[Value],
                kwargs: dict[str, Value]) -> Value:
    if isinstance(receiver, ExceptionValue) and name in exceptions.METHODS:
        return exceptions.call_method(tracer, receiver, name, args, kwargs)
    if name in _OBJECT_METHODS and isinstance(receiver, (ObjectValue, DictValue, SequenceValue, ModuleValue)):
        result = classes.call_builtin_method(tracer, receiver, name, args, kwargs)
        if result is not None:
            return result
    if isinstance(receiver, ScalarInstanceValue):  # str's or int's own method, on what the base holds
        return call_method(tracer, receiver.builtin, name, args, kwargs)
    if isinstance(receiver, (FunctionValue, MethodValue, PartialValue)):
        result = callable_attributes.call_slot(tracer, receiver, name, args, kwargs)
        if result is not None:
            return result
    if isinstance(receiver, TensorValue):
        return _tensor_method(tracer, receiver, name, args, kwargs)
    if isinstance(receiver, StorageValue):
        return storages.call_method(tracer, receiver, name, args, kwargs)
    if isinstance(receiver, DequeValue):
        return deques.call_method(tracer, receiver, name, args, kwargs)
    if isinstance(receiver, ArrayValue):
        return numpy_arrays.call_method(tracer, receiver, name, args, kwargs)
    if isinstance(receiver, SequenceValue):
        return _sequence_method(tracer, receiver, name, args, kwargs)
    if isinstance(receiver, DictValue):
        module = dicts if receiver.kind is dict else sets
        return module.call_method(tracer, receiver, name, args, kwargs)
    if isinstance(receiver, DictViewValue):
        return dict_views.call_method(tracer, receiver, name, args, kwargs)
    if isinstance(receiver, DescriptorValue):
        return descriptors.call_made_method(tracer, receiver, name, args, kwargs)
    if isinstance(receiver, ConstantValue) and name in ("__setattr__", "__delattr__") \
            and made_class(receiver.value) is not None:  # type's own, reached through super()
        from .builtin_calls import handler_for

        return handler_for(type.__dict__[name])(tracer, [receiver, *args], kwargs)
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
    if isinstance(receiver, (IteratorValue, LazyIteratorValue)) and name in ("__next__", "__iter__"):
        check_arguments(tracer, type(iter(())), name, args, kwargs)
        if name == "__iter__":
            return receiver
        item = operations.next_item(tracer, receiver)
        if item is None:
            raise tracer.user_error(StopIteration())
        return item
    raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"{receiver!r}.{name}()", name=name,
                             type=receiver.python_type().__name__)


def _tensor_method(tracer: "Tracer", tensor: TensorValue, name: str, args: list[Value],
                   kwargs: dict[str, Value]) -> Value:
    if name == "item" and tracer.data_dependence.scalars:
        return tracer.graph.call("call_method", "item", [tensor], {})
    if name == "tolist" and tracer.data_dependence.scalars:
        return _captured_scalars(tracer, tensor)
    if name == "numpy" and not args:
        return numpy_arrays.from_tensor(tracer, tensor, kwargs)
    if name == "untyped_storage" and not args and not kwargs:
        return storages.storage_of(tensor)
    if name == "as_subclass" and len(args) == 1 and not kwargs:
        return torch_functions.as_subclass(tracer, tensor, args[0])
    if name in _TENSOR_TO_PYTHON:
        raise tracer.graph_break(gb.TENSOR_TO_PYTHON, f"Tensor.{name}()", what=f"Tensor.{name}()")
    if name == "register_hook" and len(args) == 1 and not kwargs:
        from ..operators import tensor_hooks

        handle = tensor_hooks.register_hook(tracer, tensor, args[0])
        if handle is not None:
            return handle
    if name in _TENSOR_AUTOGRAD:
        brk = tracer.graph_break(gb.AUTOGRAD_CALL, f"Tensor.{name}()", name=f"Tensor.{name}")
        if name == "register_hook" and tensor.source is None and tensor.node.users:
            # A hook sees the whole gradient of the tensor, from every use. Split here, the graph
            # before would keep the uses it already made inside its own backward, out of the
            # hook's reach.
            brk.unsplittable = ("a hook registered on a tensor the graph computed and already used: the "
                                "function runs in plain Python (the functions it calls are compiled)")
        raise brk
    if name == "__iter__" and not args and not kwargs:
        return IteratorValue(operations.iterate(tracer, tensor))
    if name in _STORAGE_QUERIES and not args and not kwargs:
        return _storage_query(tracer, tensor, name)
    if name == "type" and not args and not kwargs:  # its name ("torch.FloatTensor"): metadata
        return ConstantValue(tensor.fake.type())
    if name == "type" and args and isinstance(args[0], ConstantValue) and isinstance(args[0].value, type):
        # a legacy tensor type (torch.HalfTensor) by its name, which the graph's code can spell
        args = [ConstantValue(f"{args[0].value.__module__}.{args[0].value.__name__}"), *args[1:]]
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
    if hasattr(sequence.kind, name):
        check_arguments(tracer, sequence.kind, name, args, kwargs)
    if sequence.kind is list and name in ("append", "extend", "insert", "pop", "clear", "reverse",
                                          "remove", "sort", "__setitem__", "__delitem__", "__iadd__", "__imul__"):
        tracer.side_effects.mutate(sequence)
        if name in ("__iadd__", "__imul__"):  # `+=` and `*=` as the method calls: the list itself
            if name == "__iadd__":
                operations.extend(tracer, sequence, args[0])
            else:
                count = operations.python_value(tracer, args[0], "a repetition count")
                with python_raises(tracer, "list.__imul__()"):  # Python's error for a count not an int
                    repeated = items * count
                items[:] = repeated
            return sequence
        if name == "append":
            items.append(args[0])
        elif name == "extend":
            operations.extend(tracer, sequence, args[0])
        elif name == "insert":
            index = operations.python_value(tracer, args[0], "an index")
            with python_raises(tracer, "list.insert()"):
                items.insert(index, args[1])
        elif name == "pop":
            index = operations.python_value(tracer, args[0], "an index") if args else -1
            with python_raises(tracer, "list.pop()"):
                return items.pop(index)
        elif name == "clear":
            items.clear()
        elif name == "reverse":
            items.reverse()
        elif name == "remove":
            items.pop(_index_of(tracer, items, args[0], "list.remove(x): x not in list"))
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
        if sequence.kind is tuple:
            message = "tuple.index(x): x not in tuple"
        elif operations.is_constant_tree(args[0]):
            message = f"{operations.python_value(tracer, args[0])!r} is not in list"
        else:
            message = "value is not in list"
        start, stop = [operations.python_value(tracer, arg, "an index") for arg in args[1:]] + [None] * (3 - len(args))
        with python_raises(tracer, f"{sequence.kind.__name__}.index()"):  # clamped as a slice's bounds
            positions = range(len(items))[start:stop]
        return ConstantValue(positions.start + _index_of(tracer, [items[i] for i in positions], args[0], message))
    if name == "count":
        found, index = 0, 0
        while index < len(items):  # CPython reads the length at each step: an `__eq__` may shrink it
            found += operations.items_equal(tracer, items[index], args[0], f"{sequence.kind.__name__}.count()")
            index += 1
        return ConstantValue(found)
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


def _index_of(tracer: "Tracer", items: list[Value], wanted: Value, message: str) -> int:
    for index, item in enumerate(items):
        if operations.contains(tracer, SequenceValue([item], list), wanted):
            return index
    raise tracer.user_error(ValueError(message))


def _constant_method(tracer: "Tracer", receiver: ConstantValue, name: str, args: list[Value],
                     kwargs: dict[str, Value]) -> Value:
    if name == "__iter__" and not args and not kwargs:  # `range(3).__iter__()`: an iterator we can step
        return IteratorValue(operations.iterate(tracer, receiver))
    if operations.is_symbolic(receiver):
        return symbolic_numbers.call_method(tracer, receiver, name, args, kwargs)
    if name == "format" and type(receiver.value) is str:
        later = text.format_method_later(tracer, receiver.value, args, kwargs)
        if later is not None:  # a symbolic number: formatted when the text is needed
            return later
    if name == "__instancecheck__" and isinstance(receiver.value, type) and len(args) == 1 and not kwargs:
        # type's own check (reached through super() from a metaclass's): by the value's class
        return ConstantValue(issubclass(args[0].python_type(), receiver.value))
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
        from ..interpreter import module_calls

        return module_calls.module_call(tracer, module, args, kwargs)
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
        table = ("_parameters" if "parameters" in name else "_buffers",)
    else:
        method = getattr(real, "named_modules" if name in ("modules", "named_modules") else "named_children")
        table = ()
    try:  # the walk's arguments as the method binds them (a wrong one is the user's TypeError)
        options = inspect.signature(getattr(real, name)).bind(
            *[operations.python_value(tracer, arg) for arg in args],
            **{key: operations.python_value(tracer, arg) for key, arg in kwargs.items()}).arguments
    except TypeError as error:
        raise tracer.user_error(error) from None
    prefix = options.pop("prefix", "")  # names only: the walk below goes from the module itself
    pairs = list(method(**options))
    _guard_tables(tracer, module, table, options.get("recurse", name in ("modules", "named_modules")
                                                                or bool(table)))
    entries = []
    for path, _ in pairs:
        value: Value = module
        for part in path.split(".") if path else []:
            value = attributes.load_attr(tracer, value, part)
        shown = f"{prefix}.{path}" if prefix and path else prefix or path
        entries.append(SequenceValue([ConstantValue(shown), value], tuple) if named else value)
    return IteratorValue(entries)

