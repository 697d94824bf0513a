"""Python's object protocol for user classes, on symbolic instances.

An instance of a user class is an `ObjectValue`, or, when its class derives
from dict, OrderedDict, defaultdict, set, frozenset, list or tuple, a
`DictValue` or `SequenceValue` whose `cls` is that class: the builtin base's items live in
the value (every native container operation applies to them) and the
instance's attributes in its `overlay`. This module decides, as CPython does:

- reading an attribute: a `__getattribute__` override, else data descriptors
  found through the MRO, the instance's own attributes, non-data descriptors
  and class attributes, then `__getattr__`; what is found is bound as Python
  binds it (functions, classmethods, staticmethods, properties, slots, user
  descriptors' `__get__`);
- storing and deleting one: `__setattr__`/`__delattr__` overrides, data
  descriptors' `__set__`/`__delete__`, else the instance's own state;
- special methods (`__getitem__`, `__len__`, `__add__`...), looked up on the type;
- `super()`: the same lookups, starting after a class in the MRO.

Python-level code found this way is inlined, never run for real; the builtin
behaviour of the modelled bases (`object.__setattr__`, `dict.__setitem__`...)
is modelled. Creating instances (`type.__call__`) is in `instances.py`.
"""
from __future__ import annotations

import collections
import functools
import threading
import types
from typing import TYPE_CHECKING, Any

import torch

from ..guards.sources import (
    AttrSource,
    ConstantSource,
    InstanceDictSource,
    ItemSource,
    Source,
)
from ..interpreter import graph_breaks as gb
from ..interpreter.graph_breaks import UserException
from .class_creation import made_class
from .values import (
    ConstantValue,
    DescriptorValue,
    DictValue,
    ExceptionValue,
    FunctionValue,
    MethodValue,
    ModuleValue,
    ObjectValue,
    SequenceValue,
    SuperValue,
    Value,
)
from .wrap import cached_function_value, function_value, is_graph_operator

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (or type())
DICT_BASES = (collections.OrderedDict, collections.defaultdict, dict)
MODELLED_BASES = frozenset({object, dict, collections.OrderedDict, collections.defaultdict, list, tuple,
                            set, frozenset, types.SimpleNamespace})
_BUILTIN_METHODS = (types.MethodDescriptorType, types.WrapperDescriptorType)
_SLOTS = (types.MemberDescriptorType, types.GetSetDescriptorType)
# C classes whose attribute stores are object's generic ones (a thread-local object's go to the
# calling thread's `__dict__`: the thread the replay runs in)
_GENERIC_SETATTR = (object.__setattr__, types.SimpleNamespace.__setattr__, BaseException.__dict__["__setattr__"],
                    threading.local.__setattr__)
_GENERIC_DELATTR = (object.__delattr__, types.SimpleNamespace.__delattr__, BaseException.__dict__["__delattr__"],
                    threading.local.__delattr__)
_MODULE_CALL = torch.nn.Module.__dict__["__call__"]
_TYPE_CALL = type.__dict__["__call__"]


def builtin_base(cls: type) -> type:
    """The builtin class that lays out `cls`'s instances: the first class of its MRO that no
    class statement made (object, dict, OrderedDict, list, tuple, int...)."""
    return next(klass for klass in cls.__mro__ if not klass.__flags__ & _HEAP_TYPE)


def type_name(cls: type) -> str:
    """A class's name as CPython's messages give it (its `tp_name`): a class statement's plain
    name, a builtin's qualified one outside builtins (`collections.OrderedDict`)."""
    if cls.__flags__ & _HEAP_TYPE or cls.__module__ == "builtins":
        return cls.__name__
    return f"{cls.__module__}.{cls.__qualname__}"


def callable_text(value: Value) -> str:
    """How CPython names a callable in a call's error (`_PyObject_FunctionStr`): `module.f()`."""
    if isinstance(value, FunctionValue):
        qualname, module = value.code.co_qualname, value.globals.get("__name__")
    else:
        real = getattr(value, "value", None)
        qualname = getattr(real, "__qualname__", None) or value.python_type().__name__
        module = getattr(real, "__module__", None)
    return f"{qualname}()" if module in (None, "builtins") else f"{module}.{qualname}()"


def is_user_class(cls: type | None) -> bool:
    return cls is not None and bool(cls.__flags__ & _HEAP_TYPE)


def class_value(cls: type) -> ConstantValue:
    """A class as a value whose attributes are read by source (so they are guarded); a class
    the region made is its own value, read by nothing (`class_statements`)."""
    made = made_class(cls)
    if made is not None:
        return made.value
    return ConstantValue(cls, ConstantSource(id(cls), cls))


def static_function(raw: Any) -> Any:
    """The function a staticmethod (real, or made in the region) holds, else `raw` itself."""
    if isinstance(raw, staticmethod):
        return raw.__func__
    if isinstance(raw, DescriptorValue) and raw.cls is staticmethod:
        return raw.parts["__func__"]
    return raw


def is_instance_value(value: Value) -> bool:
    """An instance of a user class that this module models (its attributes in an overlay)."""
    if isinstance(value, ObjectValue):
        return True
    return isinstance(value, (DictValue, SequenceValue)) and is_user_class(value.cls) \
        and not issubclass(value.cls, torch.nn.Module) and not _is_named_tuple(value.cls)


def _is_named_tuple(cls: type) -> bool:
    return issubclass(cls, tuple) and hasattr(cls, "_fields")


def real_object(value: Value) -> Any:
    """The real object behind a value read from outside, or None for one made in the region."""
    if isinstance(value, ModuleValue):
        return value.module
    return getattr(value, "obj", None)


def find(tracer: "Tracer", cls: type, name: str, after: type | None = None) -> tuple[type, Any] | None:
    """(the class defining `name`, its raw `__dict__` entry) through `cls`'s MRO, starting
    after `after` (for super()); a class attribute stored earlier in this trace wins."""
    mro = cls.__mro__
    if after is not None:
        mro = mro[mro.index(after) + 1:]
    for klass in mro:
        stored = tracer.side_effects.load_shared_attr(klass, name)
        if stored is not None:
            return klass, stored
        if name in klass.__dict__:
            return klass, klass.__dict__[name]
    return None


def is_python_function(raw: Any) -> bool:
    return type(raw) is types.FunctionType or isinstance(raw, FunctionValue)


def _python_hook(tracer: "Tracer", cls: type, name: str) -> tuple[type, Any] | None:
    """`name` (`__setattr__`, `__getattr__`...) when a Python class of the MRO defines it."""
    found = find(tracer, cls, name)
    return found if found is not None and is_python_function(found[1]) else None


def _python_getter(raw: Any) -> Any:
    """The Python `__get__` of a user descriptor's class, or None."""
    getter = getattr(type(raw), "__get__", None)
    return getter if type(getter) is types.FunctionType else None


def _is_data_descriptor(raw: Any) -> bool:
    if isinstance(raw, DescriptorValue):
        return raw.cls is property
    if isinstance(raw, ConstantValue) and not isinstance(raw.value, type):
        raw = raw.value
    elif is_instance_value(raw):  # a descriptor made in the region: its class says
        kind = raw.python_type()
        return hasattr(kind, "__get__") and (hasattr(kind, "__set__") or hasattr(kind, "__delete__"))
    elif isinstance(raw, Value):
        return False
    kind = type(raw)
    return hasattr(kind, "__get__") and (hasattr(kind, "__set__") or hasattr(kind, "__delete__"))


def _entry_source(owner: type, name: str) -> Source:
    """The raw entry `owner.__dict__[name]` (a descriptor object itself, not what it gives)."""
    return ItemSource(AttrSource(ConstantSource(id(owner), owner), "__dict__"), name)


def _attr(source: Source | None, name: str) -> Source | None:
    return None if source is None else AttrSource(source, name)


def _call(tracer: "Tracer", function: Value, args: list[Value], kwargs: dict[str, Value] | None = None) -> Value:
    from ..interpreter import calls

    return calls.call_value(tracer, function, args, kwargs or {})


def _attribute_error(tracer: "Tracer", cls: type, name: str) -> Exception:
    return tracer.user_error(AttributeError(f"'{cls.__name__}' object has no attribute '{name}'"))


# -- binding what the MRO lookup found ------------------------------------------------------


def bind(tracer: "Tracer", owner: type, raw: Any, name: str, instance: Value | None, cls: type,
         cls_value: Value | None = None) -> Value:
    """What reading `name` gives once the MRO of `cls` found `raw` on `owner`: Python's
    descriptor protocol. `instance` is None for a read on the class itself; `cls_value` is
    the class as a value (classmethods bind to it)."""
    if isinstance(raw, ConstantValue) and _is_descriptor_object(raw.value):
        raw = raw.value  # a real descriptor stored on the class in this trace: bound as one found there
    elif isinstance(raw, Value):  # stored on the class in this trace, or held by a class made in it
        return _bind_value(tracer, raw, instance, cls, cls_value)
    if isinstance(instance, ExceptionValue):
        from . import exceptions

        found = exceptions.bind_builtin(tracer, instance, owner, raw, name)
        if found is not None:
            return found
    if isinstance(instance, ModuleValue) and (raw is torch.nn.Module.__getattr__ or raw is _MODULE_CALL):
        return MethodValue(instance, name)  # nn.Module's own, modelled: its tables, its hooks
    if raw is _TYPE_CALL and isinstance(instance, ConstantValue) and isinstance(instance.value, type):
        return MethodValue(instance, name)  # type.__call__, from a metaclass's own __call__
    if type(raw) is types.FunctionType:
        return _bind_function(tracer, owner, raw, name, instance, cls)
    if cls_value is None:
        cls_value = class_value(cls)
    if isinstance(raw, staticmethod):
        tracer.add_guard(_resolution_source(cls, owner, name, raw.__func__), "id", raw.__func__)
        return tracer.wrap(raw.__func__, None)
    if isinstance(raw, classmethod):
        bound = getattr(cls, name)
        if is_graph_operator(bound):  # e.g. autograd.Function.apply: one opaque call
            return ConstantValue(bound)
        tracer.add_guard(_entry_source(owner, name), "id", raw)
        return function_value(raw.__func__, None).bind(cls_value)
    if isinstance(raw, property):
        if instance is None:
            return ConstantValue(raw)
        tracer.add_guard(_entry_source(owner, name), "id", raw)
        if raw.fget is None:
            raise tracer.user_error(AttributeError(
                f"property '{name}' of '{cls.__name__}' object has no getter"))
        return _call(tracer, _accessor(tracer, raw.fget), [instance])
    if isinstance(raw, _SLOTS):
        if instance is None:
            return tracer.wrap(getattr(cls, name), None)
        return _slot_value(tracer, instance, name)
    getter = _python_getter(raw)
    if getter is not None:
        descriptor = tracer.wrap(raw, _entry_source(owner, name))
        tracer.add_guard(_entry_source(owner, name), "id", raw)
        return _call(tracer, function_value(getter, None), [descriptor, instance or ConstantValue(None), cls_value])
    if isinstance(raw, _BUILTIN_METHODS):
        if instance is None:
            return ConstantValue(raw)
        if isinstance(instance, ObjectValue) and instance.obj is not None \
                and raw.__objclass__ not in MODELLED_BASES:
            # a C method of a real object (a regex, a generator): called as the constant it is
            return tracer.wrap(getattr(real_object(instance), name), None)
        return MethodValue(instance, name)
    if isinstance(raw, functools._lru_cache_wrapper) and type(raw.__wrapped__) is types.FunctionType:
        tracer.add_guard(_entry_source(owner, name), "id", raw)  # calls.modelled_call runs the cache
        function = cached_function_value(raw)
        return function if instance is None else function.bind(instance)
    real = real_object(instance) if instance is not None else None
    if real is not None and instance.source is not None:
        return tracer.wrap(getattr(real, name), AttrSource(instance.source, name))
    if hasattr(type(raw), "__get__"):  # a descriptor written in C (classmethod_descriptor...)
        if instance is not None and not isinstance(raw, types.ClassMethodDescriptorType):
            raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"{cls.__name__}.{name}",
                                     name=f"{name} (a `{type(raw).__name__}` written in C)",
                                     type=cls.__name__)
        return tracer.wrap(type(raw).__get__(raw, None, cls), None)  # what was found, not `cls.name`
    return tracer.wrap(raw, _entry_source(owner, name))


def _is_descriptor_object(real: Any) -> bool:
    return not isinstance(real, type) and hasattr(type(real), "__get__")


def _bind_value(tracer: "Tracer", raw: Value, instance: Value | None, cls: type,
                cls_value: Value | None) -> Value:
    """`bind` for what the trace holds on a class: a function, a staticmethod, classmethod or
    property made in the region (`descriptors`), an object whose class has a Python `__get__`."""
    if isinstance(raw, FunctionValue):
        return raw.bind(instance) if instance is not None and raw.bound_self is None else raw
    if isinstance(raw, DescriptorValue):
        from .descriptors import bind_made

        return bind_made(tracer, raw, instance, cls_value or class_value(cls))
    getter = _value_hook(tracer, raw, "__get__")
    if getter is not None:
        return _call(tracer, getter, [instance or ConstantValue(None), cls_value or class_value(cls)])
    return raw


def _value_hook(tracer: "Tracer", raw: Value, name: str) -> Value | None:
    """The Python method `name` (`__get__`, `__set__`, `__delete__`) of an instance of a user
    class held by a class, bound to it; None when its class has none."""
    if not is_instance_value(raw):
        return None
    kind = raw.python_type()
    found = find(tracer, kind, name)
    if found is None or not is_python_function(found[1]):
        return None
    return bind(tracer, *found, name, raw, kind)


def _accessor(tracer: "Tracer", function: Any) -> Value:
    """A property's getter, setter or deleter: inlined when written in Python (torch's too)."""
    return function_value(function, None) if type(function) is types.FunctionType else tracer.wrap(function, None)


def _bind_function(tracer: "Tracer", owner: type, raw: types.FunctionType, name: str,
                   instance: Value | None, cls: type) -> Value:
    if is_graph_operator(raw):
        if instance is None:
            return ConstantValue(raw)
        if isinstance(instance, ConstantValue):
            return ConstantValue(getattr(instance.value, name))
        if real_object(instance) is not None:
            # a method of a torch object with state (an optimizer, a scaler): not modelled
            qualname = f"{cls.__module__}.{cls.__qualname__}.{name}"
            raise tracer.graph_break(gb.UNSUPPORTED_CALLABLE, f"method {qualname}", name=qualname)
    # the class is guarded (by type or identity); a method replaced on it must recompile too
    tracer.add_guard(_resolution_source(cls, owner, name, raw), "id", raw)
    function = function_value(raw, None)
    return function if instance is None else function.bind(instance)


def _resolution_source(cls: type, owner: type, name: str, function: Any) -> Source:
    """Where a guard re-reads a function found on `owner`: `cls.name` when that is how it is
    reached (so that a method added to a subclass is noticed too), else the entry itself (a
    function reached through super())."""
    if getattr(cls, name, None) is function:
        return AttrSource(ConstantSource(id(cls), cls), name)
    return _entry_source(owner, name)


# -- reading attributes ---------------------------------------------------------------------


def get_attribute(tracer: "Tracer", instance: Value, name: str) -> Value | None:
    """`instance.name` for an instance of a user class; None when it has no such attribute."""
    cls = instance.python_type()
    hook = _python_hook(tracer, cls, "__getattribute__")
    if hook is not None:
        found = _unless_attribute_error(tracer, lambda: _call(
            tracer, bind(tracer, *hook, "__getattribute__", instance, cls), [ConstantValue(name)]))
    else:
        found = generic_get(tracer, instance, name)
    return found if found is not None else user_getattr(tracer, instance, name)


def user_getattr(tracer: "Tracer", instance: Value, name: str) -> Value | None:
    """What a Python `__getattr__` of the instance's class (torch.nn's own excepted: modules'
    tables are modelled) gives for an attribute the normal lookup did not find; None when
    there is none, or it raises AttributeError."""
    cls = instance.python_type()
    hook = _python_hook(tracer, cls, "__getattr__")
    if hook is None or hook[0] is torch.nn.Module:
        return None
    return _unless_attribute_error(tracer, lambda: _call(
        tracer, bind(tracer, *hook, "__getattr__", instance, cls), [ConstantValue(name)]))


def _unless_attribute_error(tracer: "Tracer", read: Any) -> Value | None:
    from . import exceptions

    try:
        return read()
    except UserException as raised:
        if exceptions.caught(raised, AttributeError):
            return None
        raise


def generic_get(tracer: "Tracer", instance: Value, name: str) -> Value | None:
    """`object.__getattribute__(instance, name)`: data descriptors, then the instance's own
    attributes, then non-data descriptors and class attributes."""
    cls = instance.python_type()
    if name == "__class__":
        return class_value(cls)
    if name == "__dict__":
        return instance_dict(tracer, instance)
    found = find(tracer, cls, name)
    if found is not None and _is_data_descriptor(found[1]):
        bound = bind(tracer, *found, name, instance, cls)
        if bound is None and instance.source is not None and name not in instance.overlay:
            tracer.add_guard(instance.source, "lacks", name)  # an empty slot
        return bound
    own = own_attribute(tracer, instance, name)
    if own is not None:
        return own
    if found is not None:
        guard_not_own(tracer, instance, name)
        return bind(tracer, *found, name, instance, cls)
    guard_absent(tracer, instance, name)
    return None


def guard_not_own(tracer: "Tracer", instance: Value, name: str) -> None:
    """Guard that a pre-existing instance still has no attribute `name` of its own, where its
    class's (a method, a class attribute) was found: one stored on the instance would shadow it."""
    real = real_object(instance)
    if instance.source is None or real is None or name in instance.overlay or not has_instance_dict(type(real)):
        return
    tracer.add_guard(dict_source(tracer, instance), "contains", (name, False))


def guard_absent(tracer: "Tracer", instance: Value, name: str) -> None:
    """Guard that a pre-existing instance still has no attribute `name`, where its lookup found
    none: not in its own `__dict__` (nor, for a module, in its parameters, buffers and
    submodules) and not in its class's MRO. Cheap checks where `hasattr` would run the class's
    Python `__getattribute__` or `__getattr__` again (a config's: ~4 us each)."""
    if instance.source is None or name in instance.overlay:
        return  # made, or deleted, in the region
    real = real_object(instance)
    cls = type(real)
    if has_instance_dict(cls):
        tracer.add_guard(dict_source(tracer, instance), "contains", (name, False))
    else:
        tracer.add_guard(instance.source, "lacks", name)
    if isinstance(instance, ModuleValue):
        for table in ("_parameters", "_buffers", "_modules"):
            tracer.add_guard(AttrSource(instance.source, table), "contains", (name, False))
    tracer.add_guard(ConstantSource(id(cls), cls), "mro_lacks", (name, cls.__mro__))


def own_attribute(tracer: "Tracer", instance: Value, name: str) -> Value | None:
    """The instance's own attribute: stored in the region, else the real object's, by source."""
    overlay = instance.overlay
    if name in overlay:
        return overlay[name]  # None: deleted in the region
    real = real_object(instance)
    if real is None:
        return None
    state = instance_dict_of(real)
    if state is None or name not in state:
        return None
    return tracer.wrap(state[name], _own_source(tracer, instance, name))


def _own_source(tracer: "Tracer", instance: Value, name: str) -> Source | None:
    """Where the guards re-read an instance's own attribute: `x.name`, or the entry of its
    `__dict__` when its class's `__getattribute__` is Python (a config's: slow to run per guard)."""
    if instance.source is None:
        return None
    if _python_hook(tracer, instance.python_type(), "__getattribute__") is None:
        return AttrSource(instance.source, name)
    return ItemSource(dict_source(tracer, instance), name)


def dict_source(tracer: "Tracer", instance: Value) -> Source:
    if _python_hook(tracer, instance.python_type(), "__getattribute__") is None:
        return AttrSource(instance.source, "__dict__")
    return InstanceDictSource(instance.source)


def instance_dict_of(real: Any) -> dict | None:
    """A real object's `__dict__`, read without running its class's `__getattribute__` (a
    thread-local object's, for the calling thread, by its own lookup)."""
    try:
        return object.__getattribute__(real, "__dict__")
    except AttributeError:
        return vars(real) if isinstance(real, threading.local) else None


def _slot_value(tracer: "Tracer", instance: Value, name: str) -> Value | None:
    """A slot (or a C member such as defaultdict.default_factory) of an instance."""
    if name in instance.overlay:
        return instance.overlay[name]
    real = real_object(instance)
    if real is None:
        # no weak reference to an object made in the region exists (`weakref.ref` of one breaks)
        return ConstantValue(None) if name == "__weakref__" else None
    value = getattr(real, name, _MISSING)
    return None if value is _MISSING else tracer.wrap(value, _attr(instance.source, name))


_MISSING = object()


def instance_dict(tracer: "Tracer", instance: Value) -> Value | None:
    """`instance.__dict__`: a dict that is one state with the instance's attributes
    (`instance_dicts`)."""
    from .instance_dicts import made_instance_dict, outside_instance_dict

    if not has_instance_dict(instance.python_type()):
        return None
    real = real_object(instance)
    if real is None:
        return made_instance_dict(instance)
    source = None if instance.source is None else dict_source(tracer, instance)
    return outside_instance_dict(tracer, instance, instance_dict_of(real), source)


def has_instance_dict(cls: type) -> bool:
    return cls.__dictoffset__ != 0 or issubclass(cls, threading.local)  # a dict per thread


def class_attribute(tracer: "Tracer", value: ConstantValue, name: str) -> Value | None:
    """`cls.name` on a class read as a constant: functions, classmethods, staticmethods and
    Python descriptors are bound as Python binds them on the class; anything else is read
    for real, by source (the class is a constant)."""
    cls = value.value
    found = find(tracer, cls, name)
    source = _attr(value.source, name)
    if name == "__annotations__" and found is not None and found[0] is not cls \
            and _metaclass_member(type(cls), name) is type.__dict__[name]:
        return _own_annotations(tracer, value)
    if found is None:  # the metaclass's attributes, and type's own (__name__, __mro__...)
        real = getattr(cls, name, _MISSING)
        return None if real is _MISSING else tracer.wrap(real, source)
    owner, raw = found
    if type(raw) is types.FunctionType:
        if is_graph_operator(raw):
            return ConstantValue(raw)
        if source is not None:
            tracer.add_guard(source, "id", raw)
        return function_value(raw, None)
    if isinstance(raw, (Value, staticmethod, classmethod, property)) or _python_getter(raw) is not None \
            or isinstance(raw, functools._lru_cache_wrapper):
        return bind(tracer, owner, raw, name, None, cls, value)
    return tracer.wrap(getattr(cls, name), source)


def _metaclass_member(meta: type, name: str) -> Any:
    return next((vars(klass)[name] for klass in meta.__mro__ if name in vars(klass)), None)


def _own_annotations(tracer: "Tracer", value: ConstantValue) -> Value:
    """`cls.__annotations__` where only a base has some: type's getter reads the class's own
    `__dict__`, never its bases', and gives it an empty dict on first read."""
    if made_class(value.value) is None:
        return tracer.wrap(value.value.__annotations__, _attr(value.source, "__annotations__"))
    from .class_statements import store

    annotations = DictValue({})
    store(tracer, value, "__annotations__", annotations)
    return annotations


def super_attribute(tracer: "Tracer", value: SuperValue, name: str) -> Value | None:
    """`super(cls, receiver).name`: the MRO of the receiver (or of the receiver class, in a
    classmethod or `__new__`), searched after `cls`."""
    receiver = value.receiver
    if isinstance(receiver, ConstantValue) and isinstance(receiver.value, type) \
            and issubclass(receiver.value, value.cls):
        mro_cls, instance, cls_value = receiver.value, None, receiver
    else:
        mro_cls, instance, cls_value = receiver.python_type(), receiver, None
    found = find(tracer, mro_cls, name, after=value.cls)
    if found is None:
        return ConstantValue(super) if name == "__class__" else None
    return bind(tracer, *found, name, instance, mro_cls, cls_value)


# -- storing and deleting attributes --------------------------------------------------------


def set_attribute(tracer: "Tracer", instance: Value, name: str, value: Value) -> None:
    """`instance.name = value`: a `__setattr__` override, else `object.__setattr__`."""
    cls = instance.python_type()
    hook = find(tracer, cls, "__setattr__")
    if hook is not None and is_python_function(hook[1]):
        _call(tracer, bind(tracer, *hook, "__setattr__", instance, cls), [ConstantValue(name), value])
        return
    if hook is not None and hook[1] not in _GENERIC_SETATTR:
        raise _c_override(tracer, cls, hook[0], "__setattr__")
    generic_set(tracer, instance, name, value)


def _c_override(tracer: "Tracer", cls: type, owner: type, method: str) -> Exception:
    return tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"{cls.__name__}.{method} of {owner.__name__}",
                              name=f"{method} (implemented in C by `{owner.__qualname__}`)",
                              type=cls.__name__)


def generic_set(tracer: "Tracer", instance: Value, name: str, value: Value) -> None:
    """`object.__setattr__(instance, name, value)`: data descriptors first, else own state."""
    cls = instance.python_type()
    found = find(tracer, cls, name)
    raw = None if found is None else found[1]
    # BaseException keeps its state in getset descriptors, and `__suppress_context__` in a member
    if isinstance(instance, ExceptionValue) \
            and type(raw) in (types.GetSetDescriptorType, types.MemberDescriptorType):
        from . import exceptions

        if exceptions.write_slot(tracer, instance, found[0], name, value):
            return
    if name == "__dict__" and type(raw) is types.GetSetDescriptorType and real_object(instance) is None:
        from .instance_dicts import assign_made_instance_dict

        assign_made_instance_dict(tracer, instance, value)
        return
    if _made_descriptor_takes(tracer, raw, instance, value):
        return
    if isinstance(raw, ConstantValue) and _is_descriptor_object(raw.value):
        raw = raw.value
    if raw is not None and not isinstance(raw, Value) and hasattr(type(raw), "__set__"):
        if isinstance(raw, property):
            tracer.add_guard(_entry_source(found[0], name), "id", raw)
            if raw.fset is None:
                raise tracer.user_error(AttributeError(
                    f"property '{name}' of '{cls.__name__}' object has no setter"))
            _call(tracer, _accessor(tracer, raw.fset), [instance, value])
            return
        if type(raw) is types.MemberDescriptorType:
            store_raw(tracer, instance, name, value)
            return
        setter = getattr(type(raw), "__set__")
        if type(setter) is types.FunctionType:
            tracer.add_guard(_entry_source(found[0], name), "id", raw)
            _call(tracer, function_value(setter, None),
                  [tracer.wrap(raw, _entry_source(found[0], name)), instance, value])
            return
        raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"set {cls.__name__}.{name}",
                                 name=f"setting {name}", type=cls.__name__)
    if not has_instance_dict(cls):
        raise _attribute_error(tracer, cls, name)
    store_raw(tracer, instance, name, value)


def _made_descriptor_takes(tracer: "Tracer", raw: Any, instance: Value, value: Value | None) -> bool:
    """Whether a descriptor held as a value of the trace took a store (None: a deletion): a
    property made in the region, an object whose class has a Python `__set__`/`__delete__`."""
    if isinstance(raw, DescriptorValue) and raw.cls is property:
        from .descriptors import set_made

        set_made(tracer, raw, instance, value)
        return True
    hook = _value_hook(tracer, raw, "__set__" if value is not None else "__delete__") \
        if isinstance(raw, Value) else None
    if hook is None:
        return False
    _call(tracer, hook, [instance] if value is None else [instance, value])
    return True


def store_raw(tracer: "Tracer", instance: Value, name: str, value: Value | None) -> None:
    """Store (None: delete) the instance's own attribute, as `instance.__dict__[name] = value`."""
    if value is None and instance.source is None:
        instance.overlay.pop(name, None)
        return
    tracer.side_effects.store_attr(instance, name, value)


def delete_attribute(tracer: "Tracer", instance: Value, name: str) -> None:
    """`del instance.name`: a `__delattr__` override, else `object.__delattr__`."""
    cls = instance.python_type()
    hook = find(tracer, cls, "__delattr__")
    if hook is not None and is_python_function(hook[1]):
        _call(tracer, bind(tracer, *hook, "__delattr__", instance, cls), [ConstantValue(name)])
        return
    if hook is not None and hook[1] not in _GENERIC_DELATTR:
        raise _c_override(tracer, cls, hook[0], "__delattr__")
    generic_delete(tracer, instance, name)


def generic_delete(tracer: "Tracer", instance: Value, name: str) -> None:
    cls = instance.python_type()
    found = find(tracer, cls, name)
    raw = None if found is None else found[1]
    if _made_descriptor_takes(tracer, raw, instance, None):
        return
    if isinstance(raw, property):
        tracer.add_guard(_entry_source(found[0], name), "id", raw)
        if raw.fdel is None:
            raise tracer.user_error(AttributeError(
                f"property '{name}' of '{cls.__name__}' object has no deleter"))
        _call(tracer, _accessor(tracer, raw.fdel), [instance])
        return
    if raw is not None and not isinstance(raw, Value) and type(getattr(type(raw), "__delete__", None)) \
            is types.FunctionType:
        tracer.add_guard(_entry_source(found[0], name), "id", raw)
        _call(tracer, function_value(type(raw).__delete__, None),
              [tracer.wrap(raw, _entry_source(found[0], name)), instance])
        return
    present = _slot_value(tracer, instance, name) if isinstance(raw, types.MemberDescriptorType) \
        else own_attribute(tracer, instance, name)
    if present is None:
        raise _attribute_error(tracer, cls, name)
    store_raw(tracer, instance, name, None)


# -- special methods ------------------------------------------------------------------------


def special_method(tracer: "Tracer", value: Value, name: str) -> Value | None:
    """The Python method `name` that an operator calls on `value`, looked up on its type as
    CPython does (not on the instance), bound; None when the native behaviour applies."""
    cls = _overriding_class(value)
    if cls is None:
        return None
    found = find(tracer, cls, name)
    if found is None or not is_python_function(found[1]):
        return None
    if isinstance(value, ModuleValue) and found[0].__module__.startswith("torch."):
        return None  # torch.nn's own containers are modelled natively
    return bind(tracer, *found, name, value, cls)


def _overriding_class(value: Value) -> type | None:
    if is_instance_value(value):
        return value.python_type()
    if isinstance(value, ModuleValue):
        return type(value.module)
    if isinstance(value, ConstantValue) and isinstance(value.value, type) and is_user_class(type(value.value)):
        return type(value.value)  # a class whose metaclass is Python (Enum's EnumType)
    return None


def call_builtin_method(tracer: "Tracer", receiver: Value, name: str, args: list[Value],
                        kwargs: dict[str, Value]) -> Value | None:
    """The builtin `object` method `name` of an instance (reached through super() or called
    unbound, e.g. `object.__setattr__(self, k, v)`); None for other names."""
    from .instances import init_builtin

    if name == "__setattr__":
        generic_set(tracer, receiver, _name(tracer, args[0]), args[1])
        return ConstantValue(None)
    if name == "__delattr__":
        generic_delete(tracer, receiver, _name(tracer, args[0]))
        return ConstantValue(None)
    if name == "__getattribute__":
        attribute = _name(tracer, args[0])
        found = generic_get(tracer, receiver, attribute)
        if found is None:
            raise _attribute_error(tracer, receiver.python_type(), attribute)
        return found
    if name == "__init__":
        init_builtin(tracer, receiver, args, kwargs)
        return ConstantValue(None)
    if name in ("__eq__", "__ne__") and isinstance(receiver, ObjectValue):
        from .operations import is_same

        if not is_same(tracer, receiver, args[0]):
            return ConstantValue(NotImplemented)
        return ConstantValue(name == "__eq__")
    return None


def _name(tracer: "Tracer", value: Value) -> str:
    from .operations import python_value

    name = python_value(tracer, value)
    if not isinstance(name, str):
        raise tracer.user_error(TypeError(f"attribute name must be string, not '{type(name).__name__}'"))
    return name


def call_unbound_builtin(tracer: "Tracer", target: Any, args: list[Value],
                         kwargs: dict[str, Value]) -> Value | None:
    """`dict.__setitem__(self, k, v)`, `object.__setattr__(self, k, v)`, `list.append(self, x)`,
    `set.union(a, b)`: a method of a modelled builtin base called on a modelled value; None for
    other calls."""
    if not isinstance(target, _BUILTIN_METHODS) or target.__objclass__ not in MODELLED_BASES:
        return None
    if not args:  # no receiver: Python's own TypeError, which needs nothing of the program's
        try:
            target(**{key: None for key in kwargs})
        except TypeError as error:
            raise tracer.user_error(error) from None
        return None
    receiver = args[0]
    if not (is_instance_value(receiver) or isinstance(receiver, (DictValue, SequenceValue))):
        return None
    if not issubclass(receiver.python_type(), target.__objclass__):
        raise tracer.user_error(TypeError(
            f"descriptor '{target.__name__}' for '{target.__objclass__.__name__}' objects doesn't apply "
            f"to a '{receiver.python_type().__name__}' object"))
    from . import methods

    return methods.call_method(tracer, receiver, target.__name__, list(args[1:]), kwargs)
