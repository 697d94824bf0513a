"""Attribute access on symbolic values, following Python's lookup rules per kind.

Tensor metadata is read from the fake tensor (sizes are static); module
attributes are read through to the real module by source, with the overlay
of stores made while tracing taking precedence; instances of user classes
(and of dict and list subclasses) follow Python's object protocol, modelled
in `classes`; methods become bound function values (inlined when called) or
`MethodValue`s for natively modelled receivers. Stores go to `SideEffects`,
never to the real object.
"""
from __future__ import annotations

import collections
import logging
import types
from typing import TYPE_CHECKING, Any

import torch

from ..._core.opaque_objects import opaque_kind
from ..._core.subclass_protocol import holds, is_api_member, is_wrapper_subclass_type
from ..guards.sources import AttrSource, ModuleDictSource
from ..interpreter import graph_breaks as gb
from ..interpreter.symbolic_sizes import SYMBOLIC_TYPES
from . import (
    callable_attributes,
    class_statements,
    classes,
    descriptors,
    dict_views,
    introspection,
    numpy_arrays,
    output_calls,
    slices,
    storages,
    symbolic_numbers,
    torch_functions,
)
from .class_creation import made_class
from .values import (
    ArrayValue,
    ConstantValue,
    DescriptorValue,
    DequeValue,
    DictValue,
    DictViewValue,
    FrameValue,
    FunctionValue,
    GeneratorValue,
    IteratorValue,
    LazyIteratorValue,
    MethodValue,
    ModuleValue,
    ObjectValue,
    PartialValue,
    SequenceValue,
    SliceValue,
    StorageValue,
    SuperValue,
    TensorValue,
    TracebackValue,
    Value,
)
from .wrap import is_constant

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

TENSOR_METADATA = frozenset({"shape", "dtype", "device", "ndim", "requires_grad", "is_leaf",
                             "layout", "is_cuda", "is_cpu", "is_sparse", "is_quantized", "is_meta",
                             "is_nested", "itemsize", "nbytes",
                             # the device and layout predicates (torchmetrics asks `is_mps`)
                             "is_mps", "is_xpu", "is_xla", "is_ipu", "is_mtia", "is_maia",
                             "is_vulkan", "is_mkldnn", "is_sparse_csr"})
TENSOR_VIEWS = frozenset({"T", "mT", "H", "mH", "real", "imag", "data"})
GENERATOR_METHODS = frozenset({"send", "throw", "close", "__next__", "__iter__"})
_MISSING = object()


def load_attr(tracer: "Tracer", value: Value, name: str) -> Value:
    found = lookup(tracer, value, name)
    if found is None:
        raise tracer.user_error(
            AttributeError(f"'{value.python_type().__name__}' object has no attribute '{name}'"))
    return found


def lookup(tracer: "Tracer", value: Value, name: str) -> Value | None:
    """The attribute's value, or None when the object has no such attribute."""
    if name == "__class__" and not classes.is_instance_value(value):  # theirs may be a property
        return classes.class_value(value.python_type())
    if isinstance(value, TensorValue):
        return _tensor_attr(tracer, value, name)
    if isinstance(value, ArrayValue):
        return numpy_arrays.attribute(tracer, value, name)
    if isinstance(value, ModuleValue):
        return _module_attr(tracer, value, name)
    if isinstance(value, ObjectValue):
        return _object_attr(tracer, value, name)
    if isinstance(value, ConstantValue):
        return _constant_attr(tracer, value, name)
    if classes.is_instance_value(value) or isinstance(value, DictValue) and value.cls is not None:
        return classes.get_attribute(tracer, value, name)
    if isinstance(value, DequeValue):
        return ConstantValue(value.maxlen) if name == "maxlen" else _method_if(value, name, collections.deque)
    if isinstance(value, SequenceValue):
        return _sequence_attr(tracer, value, name)
    if isinstance(value, DictValue):
        return _method_if(value, name, value.python_type())  # a mappingproxy has no writing methods
    if isinstance(value, DictViewValue):
        return dict_views.attribute(tracer, value, name)
    if isinstance(value, SuperValue):
        return classes.super_attribute(tracer, value, name)
    if isinstance(value, SliceValue):
        return slices.member(value, name)
    if isinstance(value, FunctionValue):
        return callable_attributes.function_attribute(tracer, value, name)
    if isinstance(value, MethodValue):
        return callable_attributes.method_attribute(tracer, value, name)
    if isinstance(value, PartialValue):
        return callable_attributes.partial_attribute(tracer, value, name)
    if isinstance(value, DescriptorValue):
        return descriptors.made_attribute(tracer, value, name)
    if isinstance(value, FrameValue):
        return introspection.frame_attribute(tracer, value, name)
    if isinstance(value, GeneratorValue) and name in GENERATOR_METHODS:
        return MethodValue(value, name)
    if isinstance(value, (IteratorValue, LazyIteratorValue)) and name in ("__next__", "__iter__") or \
            isinstance(value, IteratorValue) and name == "__length_hint__" \
            and hasattr(value.python_type(), name):
        return MethodValue(value, name)  # any builtin iterator's own (methods.call_method)
    if isinstance(value, StorageValue):
        return storages.attribute(tracer, value, name)
    if isinstance(value, TracebackValue):
        from .exceptions import traceback_attribute

        return traceback_attribute(tracer, value, name)
    raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"{value!r}.{name}", name=name,
                             type=value.python_type().__name__)


def _method_if(value: Value, name: str, cls: type) -> Value | None:
    return MethodValue(value, name) if callable(getattr(cls, name, None)) else None


def _tensor_attr(tracer: "Tracer", value: TensorValue, name: str) -> Value | None:
    if value.overlay is not None and name in value.overlay:
        return value.overlay[name]
    real = tracer.real_tensors.get(id(value))
    if real is not None and name in real.__dict__ and not hasattr(type(real), name):
        # an attribute stored on the tensor object itself (`param.add_one = fn`)
        return tracer.wrap(real.__dict__[name], AttrSource(value.source, name))
    found = _python_subclass_member(tracer, value.cls, name)
    if found is not None:
        return classes.bind(tracer, *found, name, value, value.cls)
    getter = torch_functions.tensor_getter(name)
    if getter is not None and tracer.graph.torch_function_enabled() \
            and torch_functions.subclass_classes([value]):
        # eager reads a tensor property of a subclass through its `__torch_function__`
        return tracer.graph.call("call_function", getter, [value], {})
    if name in ("is_leaf", "grad_fn") and real is not None:
        # autograd history, which the tensor guard does not check: read on the real input
        if getattr(real, name) is not None and name == "grad_fn":
            raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, "Tensor.grad_fn of an input", name="grad_fn",
                                     type="Tensor (an input with autograd history)")
        return tracer.wrap(getattr(real, name), AttrSource(value.source, name))
    if name in TENSOR_METADATA:
        if name == "shape":
            tracer.graph.register_sizes(value)
        return ConstantValue(getattr(value.fake, name))
    if name in TENSOR_VIEWS:
        return tracer.graph.call("call_function", getattr, [value, ConstantValue(name)], {})
    if name == "grad":
        if real is not None:
            return tracer.wrap(real.grad, AttrSource(value.source, "grad"))
        if value.fake.grad is None:
            return ConstantValue(None)
    if name == "grad_fn" and value.fake.grad_fn is None:
        return ConstantValue(None)
    if callable(getattr(torch.Tensor, name, None)):
        return MethodValue(value, name)
    if hasattr(torch.Tensor, name):
        raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"Tensor.{name}", name=name, type="Tensor")
    if is_api_member(value.cls, name) or real is None and holds(value.fake, name):
        # what the class defines, or what an intermediate holds (its inner tensors, its context)
        return _subclass_attr(tracer, value, name)
    if real is not None:  # an attribute the user stored on the input tensor
        own = vars(real)
        if name in own:
            return tracer.wrap(own[name], AttrSource(value.source, name))
        tracer.add_guard(value.source, "lacks", name)
    return None


# Tensor classes whose members the tracer models as torch's own (not Python to inline).
_TORCH_TENSOR_CLASSES = (torch.Tensor, torch._C.TensorBase, torch.nn.Parameter, torch.nn.Buffer)


def _python_subclass_member(tracer: "Tracer", cls: type, name: str) -> tuple[type, Any] | None:
    """(owner, raw entry) when a Python tensor subclass's own class body defines `name` (a
    method, property or class attribute found before torch's): Python's attribute lookup on
    an instance of it finds that first, as the tracer then binds it. Dunder names keep the
    tracer's own handling (operators, `__torch_function__`), as do traceable wrapper subclasses."""
    if cls is torch.Tensor or name.startswith("__") or is_wrapper_subclass_type(cls):
        return None
    found = classes.find(tracer, cls, name)
    if found is None or found[0] in _TORCH_TENSOR_CLASSES or not issubclass(found[0], torch.Tensor):
        return None
    return found


def _subclass_attr(tracer: "Tracer", value: TensorValue, name: str) -> Value:
    """What a traceable wrapper subclass's class defines (DTensor's `placements`, `to_local`), or
    what an intermediate one holds (its inner tensors, its constants): a method is called as
    Tensor methods are (a graph node, its result computed by the subclass on the fakes); any
    other attribute is read on the fake, whose structure (flatten context, opaque inner objects)
    the input guards and the subclass's own dispatch make the real one's."""
    if callable(getattr(value.cls, name, None)):
        return MethodValue(value, name)
    read = getattr(value.fake, name)
    if isinstance(read, torch.Tensor):
        return tracer.graph.call("call_function", getattr, [value, ConstantValue(name)], {})
    if isinstance(read, SYMBOLIC_TYPES):  # a size of the fake (a jagged tensor's `_maybe_max_seqlen`)
        return ConstantValue(read)
    return tracer.wrap(read, None)


def _constant_attr(tracer: "Tracer", value: ConstantValue, name: str) -> Value | None:
    if isinstance(value.value, SYMBOLIC_TYPES):
        return symbolic_numbers.attribute(tracer, value, name)
    if isinstance(value.value, type):  # what the region stored on the class first (`classes.find`)
        return classes.class_attribute(tracer, value, name)
    stored = tracer.side_effects.load_shared_attr(value.value, name)
    if stored is not None:
        return stored
    real = getattr(value.value, name, _MISSING)
    if real is _MISSING:
        return None
    if isinstance(value.value, types.ModuleType):
        return tracer.wrap(real, None if value.source is None else AttrSource(value.source, name))
    if is_constant(value.value):
        if isinstance(real, (types.BuiltinMethodType, types.MethodWrapperType)) or \
                type(real) is types.MethodType and opaque_kind(type(value.value)) is not None:
            return MethodValue(value, name)  # called on the real object (an opaque object's too)
        return tracer.wrap(real, None)  # a fact of an immutable object: nothing more to guard
    return tracer.wrap(real, None if value.source is None else AttrSource(value.source, name))


def _sequence_attr(tracer: "Tracer", value: SequenceValue, name: str) -> Value | None:
    cls = value.cls
    if cls is not None and name in ("_replace", "_asdict"):
        return _method_if(value, name, cls)
    if cls is not None:
        fields = getattr(cls, "_fields", None) or [
            field for field in dir(cls) if not field.startswith("_") and field not in ("count", "index")
            and isinstance(getattr(cls, field), types.MemberDescriptorType)]
        if name in fields:
            index = list(fields).index(name) if hasattr(cls, "_fields") else _structseq_index(cls, name)
            return value.items[index]
        if classes.has_instance_dict(cls):  # a subclass of a namedtuple: its own attributes
            own = classes.own_attribute(tracer, value, name)
            if own is not None:
                return own
        attr = getattr(cls, name, None)
        if type(attr) is types.FunctionType or isinstance(attr, property) or \
                (attr is not None and not hasattr(value.kind, name)):
            found = classes.find(tracer, cls, name)
            return None if found is None else classes.bind(tracer, *found, name, value, cls)
        if attr is not None and not callable(attr):
            return tracer.wrap(attr, None)
    return _method_if(value, name, value.kind)


def _structseq_index(cls: type, name: str) -> int:
    sample = cls(tuple(range(cls.n_fields)))
    return getattr(sample, name)


def _module_attr(tracer: "Tracer", value: ModuleValue, name: str) -> Value | None:
    if name in value.overlay:
        return value.overlay[name]
    module, source = value.module, value.source
    if name == "__class__":
        return ConstantValue(type(module))
    if name == "__dict__":
        return classes.instance_dict(tracer, value)
    found = classes.find(tracer, type(module), name)
    if found is not None and isinstance(found[1], property):
        return classes.bind(tracer, *found, name, value, type(module))
    if name in module.__dict__:
        return tracer.wrap(module.__dict__[name], _attr(source, name))
    entry = module_table_entry(tracer, value, name)
    if entry is not None:
        return entry
    overridden = found is not None and classes.is_python_function(found[1]) \
        and not found[0].__module__.startswith("torch.")  # the user's module class defines its own
    if not overridden and name in ("parameters", "named_parameters", "buffers", "named_buffers", "children",
                                   "named_children", "modules", "named_modules", "items", "keys", "values"):
        return MethodValue(value, name)
    if found is not None:
        classes.guard_not_own(tracer, value, name)
        return classes.bind(tracer, *found, name, value, type(module))
    found = classes.user_getattr(tracer, value, name)  # a __getattr__ of the user's module class
    if found is None:
        classes.guard_absent(tracer, value, name)
    return found


def module_table_entry(tracer: "Tracer", value: ModuleValue, name: str) -> Value | None:
    """A parameter, buffer or submodule of the module: what nn.Module.__getattr__ finds. A
    table the region changed (`register_buffer`, `register_module`...) is read as changed."""
    module, source = value.module, value.source
    for table in ("_parameters", "_buffers", "_modules"):
        entries = module.__dict__[table]
        known = tracer.memo_by_id.get(id(entries))
        if known is not None and known[1].mutated:
            found = known[1].lookup(name)
            if found is not None:
                return found
            continue
        if name in entries:
            return tracer.wrap(entries[name], None if source is None else ModuleDictSource(source, table, name))
    return None


def _object_attr(tracer: "Tracer", value: ObjectValue, name: str) -> Value | None:
    if isinstance(value.obj, logging.Logger) and name in output_calls.LOGGER_METHODS | output_calls.LOGGER_QUERIES:
        return MethodValue(value, name)
    return classes.get_attribute(tracer, value, name)


def _attr(source: Any, name: str) -> Any:
    return None if source is None else AttrSource(source, name)


def store_attr(tracer: "Tracer", owner: Value, name: str, value: Value) -> None:
    if classes.is_instance_value(owner):
        classes.set_attribute(tracer, owner, name, value)
        return
    if isinstance(owner, DictValue) and owner.cls is not None:  # defaultdict's default_factory
        classes.set_attribute(tracer, owner, name, value)
        return
    if isinstance(owner, SequenceValue) and owner.cls is not None and classes.has_instance_dict(owner.cls):
        classes.set_attribute(tracer, owner, name, value)  # a subclass of a namedtuple
        return
    if isinstance(owner, ModuleValue):
        found = classes.find(tracer, type(owner.module), name)
        if found is not None and isinstance(found[1], property):
            classes.generic_set(tracer, owner, name, value)  # its setter, inlined
            return
        classes.store_raw(tracer, owner, name, value)
        return
    if isinstance(owner, ConstantValue) and made_class(owner.value) is not None:
        _store_on_made_class(tracer, owner, name, value)
        return
    if isinstance(owner, ConstantValue) and owner.source is not None \
            and isinstance(owner.value, (type, types.ModuleType)):
        tracer.side_effects.store_shared_attr(owner, name, value)
        return
    if isinstance(owner, FunctionValue) and owner.fn is None and owner.bound_self is None:
        callable_attributes.store_on_made_function(tracer, owner, name, value)
        return
    if isinstance(owner, TensorValue):
        _store_on_tensor(tracer, owner, name, value)
        return
    if isinstance(owner, FunctionValue) and owner.source is not None and owner.bound_self is None \
            and (name not in vars(types.FunctionType) or name in callable_attributes.SPECIAL_STORES):
        # an attribute of a real function (a flag a decorator sets, the `__name__`
        # functools.total_ordering gives its functions): replayed after the graph
        callable_attributes.check_special_store(tracer, name, value)
        tracer.side_effects.store_shared_attr(ConstantValue(owner.fn, owner.source), name, value)
        return
    raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"setattr {owner!r}.{name}", name=f"setting {name}",
                             type=owner.python_type().__name__)


def _store_on_tensor(tracer: "Tracer", tensor: TensorValue, name: str, value: Value) -> None:
    """`t.name = value`. `requires_grad` of a tensor made in the region is its method (and its
    errors); `grad` and the user's own attributes are kept on the tensor's value, replayed onto
    an input after the graph or set on the tensor the graph returns; Tensor's others (`data`,
    `shape`...) are not modelled."""
    if name == "requires_grad" and tensor.source is None:
        from ..interpreter import calls

        calls.call_value(tracer, MethodValue(tensor, "requires_grad_"), [value], {})
        return
    if name != "grad" and hasattr(torch.Tensor, name):
        raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"set Tensor.{name}", name=f"setting {name}",
                                 type="Tensor")
    if tensor.overlay is None:
        tensor.overlay = {}
    tracer.side_effects.store_attr(tensor, name, value)


def _store_on_made_class(tracer: "Tracer", owner: ConstantValue, name: str, value: Value | None) -> None:
    """`cls.name = value` (None: `del cls.name`) on a class made in the region: its
    metaclass's Python `__setattr__`/`__delattr__`, else type's (`class_statements.store`)."""
    meta = type(owner.value)
    method_name = "__setattr__" if value is not None else "__delattr__"
    hook = classes.find(tracer, meta, method_name)
    if hook is not None and classes.is_python_function(hook[1]):
        from ..interpreter import calls

        method = classes.bind(tracer, *hook, method_name, owner, meta)
        calls.call_value(tracer, method, [ConstantValue(name)] if value is None else [ConstantValue(name), value], {})
        return
    class_statements.store(tracer, owner, name, value)


def delete_attr(tracer: "Tracer", owner: Value, name: str) -> None:
    if classes.is_instance_value(owner):
        classes.delete_attribute(tracer, owner, name)
        return
    if isinstance(owner, ConstantValue) and made_class(owner.value) is not None:
        _store_on_made_class(tracer, owner, name, None)
        return
    raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"delattr {owner!r}.{name}", name=f"deleting {name}",
                             type=owner.python_type().__name__)


def _child(tracer: "Tracer", value: ModuleValue, key: str) -> Value:
    child = value.module._modules[key]
    source = None if value.source is None else ModuleDictSource(value.source, "_modules", key)
    return tracer.wrap(child, source)


def module_children_for_iteration(tracer: "Tracer", value: ModuleValue) -> list[Value]:
    """What `for x in module` yields, for the containers of torch.nn; guards their structure."""
    module = value.module
    keys = tuple(module._modules)
    if isinstance(module, (torch.nn.Sequential, torch.nn.ModuleList)):
        tracer.add_guard(_attr(value.source, "_modules"), "keys", keys)
        return [_child(tracer, value, key) for key in keys]
    if isinstance(module, torch.nn.ModuleDict):
        tracer.add_guard(_attr(value.source, "_modules"), "keys", keys)
        return [ConstantValue(key) for key in keys]
    if isinstance(module, (torch.nn.ParameterList, torch.nn.ParameterDict)):
        names = tuple(module._parameters)
        tracer.add_guard(_attr(value.source, "_parameters"), "keys", names)
        if isinstance(module, torch.nn.ParameterDict):
            return [ConstantValue(key) for key in names]
        return [_module_attr(tracer, value, key) for key in names]
    raise tracer.graph_break(gb.UNSUPPORTED_ITERATION, f"iter({type(module).__name__})",
                             type=type(module).__name__)


def module_item(tracer: "Tracer", value: ModuleValue, key: Any) -> Value:
    module = value.module
    if isinstance(module, (torch.nn.Sequential, torch.nn.ModuleList)):
        children = module_children_for_iteration(tracer, value)
        if isinstance(key, slice):
            # a slice of a Sequential is called like one; of a ModuleList, iterated like a list
            return SequenceValue(children[key], list, cls=type(module) if type(module) is torch.nn.Sequential else None)
        return children[key]
    if isinstance(module, torch.nn.ModuleDict):
        tracer.add_guard(_attr(value.source, "_modules"), "keys", tuple(module._modules))
        return _child(tracer, value, key)
    if isinstance(module, (torch.nn.ParameterList, torch.nn.ParameterDict)):
        items = module_children_for_iteration(tracer, value)
        if isinstance(module, torch.nn.ParameterList):
            return items[key]
        return _module_attr(tracer, value, key)
    raise tracer.graph_break(gb.UNSUPPORTED_OPERATION, f"{type(module).__name__}[{key!r}]",
                             op="indexing", types=f"`{type(module).__name__}`")
