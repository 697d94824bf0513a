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
"""
from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from . import operations
from .values import ConstantValue, Value

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
