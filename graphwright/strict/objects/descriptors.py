"""Descriptors used as values: their `__get__`, `__set__` and `__delete__` called directly.

Attribute lookup binds descriptors as it finds them (`classes.bind`, `classes.generic_set`);
this module is for code that holds a descriptor object and calls its slots itself:
`type.__dict__["__dict__"].__get__(cls)` (a class's namespace, as libraries read it without
running a metaclass's `__getattribute__`), `torch.Tensor.shape.__get__(t)`, `prop.__get__(obj)`,
`slot.__set__(obj, v)`. On constants (a class, a real object read by source) the slot runs
for real and its result is a constant fact. On a value the region models, a getter, setter
or deleter written in C (a `getset_descriptor` or slot member) means what reading, storing or
deleting its attribute means, when the lookup on the value's class finds that very
descriptor; a property's means calling its Python `fget`, `fset` or `fdel`.

A staticmethod, classmethod or property made in the region around values of the trace (the
methods of a class statement) is a `DescriptorValue`: made, bound, read and called here.
"""
from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from ..interpreter import graph_breaks as gb
from . import operations
from .values import NONE, ConstantValue, DescriptorValue, FunctionValue, MethodValue, Value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_SLOTS = ("__get__", "__set__", "__delete__")
_C_DESCRIPTORS = (types.GetSetDescriptorType, types.MemberDescriptorType)
_PROPERTY_ACCESSORS = {"__get__": "fget", "__set__": "fset", "__delete__": "fdel"}


def is_descriptor_slot(target: Any) -> bool:
    """`d.__get__`, `d.__set__` or `d.__delete__` of a descriptor written in C or a property."""
    return type(target) is types.MethodWrapperType and target.__name__ in _SLOTS \
        and isinstance(target.__self__, (*_C_DESCRIPTORS, property))


def call_slot(tracer: "Tracer", target: Any, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """The value of calling a descriptor's slot; None when it is not one this module models."""
    from ..interpreter import calls

    if not is_descriptor_slot(target) or kwargs or not args:
        return None
    descriptor, slot = target.__self__, target.__name__
    if all(operations.is_constant_tree(arg) and not operations.is_symbolic(arg) for arg in args):
        from .builtin_calls import evaluate

        return evaluate(tracer, target, args, kwargs)
    instance = args[0]
    if isinstance(descriptor, property):
        accessor = getattr(descriptor, _PROPERTY_ACCESSORS[slot])
        if accessor is None:
            raise tracer.user_error(AttributeError(f"property has no {_PROPERTY_ACCESSORS[slot][1:]}ter"))
        extra = args[1:2] if slot == "__set__" else []
        return calls.call_value(tracer, tracer.wrap(accessor, None), [instance, *extra], {})
    name = descriptor.__name__
    if not _found_on(tracer, instance, name, descriptor):
        return None  # a descriptor of another class (or one shadowed): not what the lookup means
    return _access(tracer, slot, instance, name, args)


def _found_on(tracer: "Tracer", instance: Value, name: str, descriptor: Any) -> bool:
    from .classes import find

    found = find(tracer, instance.python_type(), name)
    return found is not None and found[1] is descriptor


def _access(tracer: "Tracer", slot: str, instance: Value, name: str, args: list[Value]) -> Value:
    from . import attributes

    if slot == "__get__":
        return attributes.load_attr(tracer, instance, name)
    if slot == "__set__":
        attributes.store_attr(tracer, instance, name, args[1])
    else:
        attributes.delete_attr(tracer, instance, name)
    return ConstantValue(None)


# -- staticmethod, classmethod and property made in the region -------------------------------

_PROPERTY_PARTS = ("fget", "fset", "fdel", "__doc__")


def make_descriptor(tracer: "Tracer", cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`staticmethod(f)`, `classmethod(f)`, `property(fget, fset, fdel, doc)`: made for real
    around constants, else a `DescriptorValue` holding the values."""
    from .builtin_calls import evaluate

    if all(isinstance(arg, ConstantValue) for arg in [*args, *kwargs.values()]):
        return evaluate(tracer, cls, args, kwargs)
    if cls is property:
        if len(args) > 4 or set(kwargs) - {"fget", "fset", "fdel", "doc"}:
            raise tracer.user_error(TypeError("property() takes at most 4 arguments"))
        given = dict(zip(("fget", "fset", "fdel", "doc"), args))
        for key, value in kwargs.items():
            if key in given:
                raise tracer.user_error(TypeError(f"argument for property() given by name ('{key}') and position"))
            given[key] = value
        given["__doc__"] = given.pop("doc", NONE)
        return DescriptorValue(property, {part: given.get(part, NONE) for part in _PROPERTY_PARTS})
    if kwargs:
        raise tracer.user_error(TypeError(f"{cls.__name__}() takes no keyword arguments"))
    if len(args) != 1:
        raise tracer.user_error(TypeError(f"{cls.__name__} expected 1 argument, got {len(args)}"))
    return DescriptorValue(cls, {"__func__": args[0]})


def bind_made(tracer: "Tracer", descriptor: DescriptorValue, instance: Value | None, owner: Value) -> Value:
    """What reading a made descriptor gives: on an instance, or (`instance` None) on the class
    `owner`."""
    from ..interpreter import calls

    if descriptor.cls is staticmethod:
        return descriptor.parts["__func__"]
    if descriptor.cls is classmethod:
        function = descriptor.parts["__func__"]
        if isinstance(function, FunctionValue) and function.bound_self is None:
            return function.bind(owner)
        raise tracer.graph_break(gb.UNSUPPORTED_CALLABLE, f"classmethod of {function!r}",
                                 name=f"a classmethod of a `{function.python_type().__name__}`")
    if instance is None:
        return descriptor
    getter = descriptor.parts["fget"]
    if operations.is_none(getter):
        name = _property_name(tracer, descriptor)
        raise tracer.user_error(AttributeError(
            f"property {name}of '{instance.python_type().__name__}' object has no getter"))
    return calls.call_value(tracer, getter, [instance], {})


def _property_name(tracer: "Tracer", descriptor: DescriptorValue) -> str:
    """`'name' ` of the property's first accessor, as CPython's messages give it."""
    for part in ("fget", "fset", "fdel"):
        if not operations.is_none(descriptor.parts[part]):
            from . import attributes

            name = attributes.lookup(tracer, descriptor.parts[part], "__name__")
            if isinstance(name, ConstantValue):
                return f"{name.value!r} "
    return ""


def set_made(tracer: "Tracer", descriptor: DescriptorValue, instance: Value, value: Value | None) -> None:
    """A store (None: a deletion) that a made property takes: its `fset` or `fdel`."""
    from ..interpreter import calls

    part = "fset" if value is not None else "fdel"
    accessor = descriptor.parts[part]
    if operations.is_none(accessor):
        action = "setter" if value is not None else "deleter"
        name = _property_name(tracer, descriptor)
        raise tracer.user_error(AttributeError(
            f"property {name}of '{instance.python_type().__name__}' object has no {action}"))
    calls.call_value(tracer, accessor, [instance] if value is None else [instance, value], {})


def made_attribute(tracer: "Tracer", descriptor: DescriptorValue, name: str) -> Value | None:
    """An attribute of a made descriptor: its parts, what it copies from its function
    (`__name__`, `__doc__`, `__wrapped__`, `__isabstractmethod__`), its methods."""
    from . import attributes

    parts = descriptor.parts
    if descriptor.cls is property:
        if name in ("fget", "fset", "fdel"):
            return parts[name]
        if name == "__doc__":
            if operations.is_none(parts["__doc__"]) and not operations.is_none(parts["fget"]):
                return attributes.lookup(tracer, parts["fget"], "__doc__")
            return parts["__doc__"]
        if name in ("getter", "setter", "deleter", "__get__", "__set__", "__delete__"):
            return MethodValue(descriptor, name)
        if name == "__isabstractmethod__":
            return ConstantValue(any(_is_abstract(tracer, parts[part]) for part in ("fget", "fset", "fdel")))
        return None
    if name == "__func__" or name == "__wrapped__":
        return parts["__func__"]
    if name == "__isabstractmethod__":
        return ConstantValue(_is_abstract(tracer, parts["__func__"]))
    if name == "__get__":
        return MethodValue(descriptor, name)
    if name in ("__name__", "__qualname__", "__doc__", "__module__"):
        return attributes.lookup(tracer, parts["__func__"], name)
    return None


def _is_abstract(tracer: "Tracer", value: Value) -> bool:
    from . import attributes

    if operations.is_none(value):
        return False
    found = attributes.lookup(tracer, value, "__isabstractmethod__")
    return found is not None and operations.truth(tracer, found)


def call_made_method(tracer: "Tracer", descriptor: DescriptorValue, name: str, args: list[Value],
                     kwargs: dict[str, Value]) -> Value:
    """`prop.setter(f)` (a new property), `descriptor.__get__(obj, cls)`, `prop.__set__(obj, v)`."""
    parts = descriptor.parts
    if name in ("getter", "setter", "deleter"):
        if len(args) != 1 or kwargs:
            raise tracer.user_error(TypeError(f"{name}() takes exactly one argument"))
        part = {"getter": "fget", "setter": "fset", "deleter": "fdel"}[name]
        return DescriptorValue(property, {**parts, part: args[0]})
    if name == "__get__":
        instance = args[0] if args else NONE
        owner = args[1] if len(args) > 1 else ConstantValue(instance.python_type())
        return bind_made(tracer, descriptor, None if operations.is_none(instance) else instance, owner)
    if name == "__set__":
        set_made(tracer, descriptor, args[0], args[1])
        return NONE
    set_made(tracer, descriptor, args[0], None)
    return NONE
