"""Attributes of callables: functions, bound methods, builtin methods and `functools.partial`.

Each callable answers from the state the tracer models for it: a real function read by
source from itself, by source (a changed attribute recompiles); a function made in the
region from its code object and what it was made with or given since (`functools.wraps`
stores `__name__`, `__wrapped__`...); a builtin method bound to a modelled value
(`d.clear`, `t.add`) from its receiver and the method it binds; a partial from its
function and stored arguments. Whatever else the callable's builtin type gives every
instance (the slot methods `__eq__`, `__call__`, `__get__`..., constants of
the type such as a partial's `__doc__`) comes from the type itself, as CPython's generic
attribute lookup finds it. Calling the slot methods that mean something here (`__call__`,
a function's `__get__`) is `call_slot`.
"""
from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from ..guards.sources import AttrSource, ConstantSource
from ..interpreter import graph_breaks as gb
from .values import (
    ConstantValue,
    DictValue,
    FunctionValue,
    MethodValue,
    PartialValue,
    SequenceValue,
    Value,
)
from .wrap import function_value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_MISSING = object()
# The state of a builtin method (`builtin_function_or_method`, `method-wrapper`) that does
# not depend on its receiver: the same on the method descriptor it was bound from.
_DESCRIPTOR_FACTS = frozenset({"__name__", "__qualname__", "__doc__", "__text_signature__"})
# Attributes of a function that Python keeps outside its `__dict__` and the region may store.
SPECIAL_STORES = frozenset({"__name__", "__qualname__", "__doc__", "__module__", "__annotations__"})


def _raw(cls: type, name: str) -> Any:
    """The entry for `name` in `cls`'s MRO (a descriptor itself, not what it gives)."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return _MISSING


def type_attribute(tracer: "Tracer", value: Value, cls: type, name: str) -> Value | None:
    """What the builtin type `cls` of `value` gives for `name`, where the value's own state
    did not answer: its class, its methods bound to the value, its class-level constants;
    None when the type has no such attribute. The type's data descriptors are the value's
    own state, which the caller models: one it does not is a graph break. (`__class__` of
    any value is its class, answered before any of this module.)"""
    raw = _raw(cls, name)
    if raw is _MISSING:
        return None
    if isinstance(raw, (types.MethodDescriptorType, types.WrapperDescriptorType)):
        return MethodValue(value, name)
    if isinstance(raw, (types.BuiltinMethodType, types.ClassMethodDescriptorType, staticmethod, classmethod)):
        return ConstantValue(getattr(cls, name))  # `__new__`, `__subclasshook__`: about the class
    if isinstance(raw, (types.GetSetDescriptorType, types.MemberDescriptorType)):
        raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"{cls.__name__}.{name}", name=name,
                                 type=f"{cls.__name__} made in the compiled region")
    return tracer.wrap(raw, None)


# -- functions and their bound methods ------------------------------------------------------


def function_attribute(tracer: "Tracer", value: FunctionValue, name: str) -> Value | None:
    """Any attribute of a function. A real function (`fn` set) answers from itself, read by
    source so that a changed attribute recompiles; a function made in the region answers from
    its code object and the state recorded when it was made. A bound method forwards every
    read but `__self__` and `__func__` (and its own type's) to its function, as Python's
    method objects do."""
    if value.bound_self is not None:
        if name == "__self__":
            return value.bound_self
        if name == "__func__":
            return value.unbound()
        if isinstance(_raw(types.MethodType, name), types.WrapperDescriptorType):
            return type_attribute(tracer, value, types.MethodType, name)
        value = value.unbound()
    if value.fn is not None:
        stored = tracer.side_effects.load_shared_attr(value.fn, name)
        if stored is not None:
            return stored
        if callable(_raw(types.FunctionType, name)):  # __get__, __call__, __eq__: the slots
            return type_attribute(tracer, value, types.FunctionType, name)
        real = getattr(value.fn, name, _MISSING)
        if real is _MISSING:
            return None
        base = value.source or ConstantSource(id(value.fn), value.fn)
        return tracer.wrap(real, AttrSource(base, name))
    return _made_function_attribute(tracer, value, name)


def _made_function_attribute(tracer: "Tracer", value: FunctionValue, name: str) -> Value | None:
    """A function made by MAKE_FUNCTION while tracing: the attributes it was made with, and
    those the region stored on it."""
    code = value.code
    if name in value.special:
        return value.special[name]
    if name == "__annotations__":  # made on first read, then the same dict
        return value.special.setdefault(name, DictValue({}))
    if name in value.attributes:
        return value.attributes[name]
    if name == "__dict__":
        view = DictValue({})
        view.items = value.attributes  # one dict: stores through either are seen by both
        return view
    if name == "__code__":
        return ConstantValue(code)
    if name in ("__name__", "__qualname__"):
        return ConstantValue(value.name if name == "__name__" else code.co_qualname)
    if name == "__module__":
        return ConstantValue(value.globals.get("__name__"))
    if name == "__doc__":  # CPython 3.11 takes the first constant when it is a string
        first = code.co_consts[0] if code.co_consts else None
        return ConstantValue(first if isinstance(first, str) else None)
    if name == "__defaults__":
        return SequenceValue(list(value.defaults), tuple) if value.defaults else ConstantValue(None)
    if name == "__kwdefaults__":
        return DictValue(value.kwdefaults) if value.kwdefaults else ConstantValue(None)
    return type_attribute(tracer, value, types.FunctionType, name)


def check_special_store(tracer: "Tracer", name: str, value: Value) -> None:
    """A function's `__name__` and `__qualname__` take only strings, as CPython checks."""
    if name in ("__name__", "__qualname__") and not (isinstance(value, ConstantValue)
                                                     and isinstance(value.value, str)):
        raise tracer.user_error(TypeError(f"{name} must be set to a string object"))


def store_on_made_function(tracer: "Tracer", function: FunctionValue, name: str, value: Value) -> None:
    """`f.name = value` on a function made in the region: kept on its value, rebuilt with it."""
    if name in SPECIAL_STORES:
        check_special_store(tracer, name, value)
        function.special[name] = value
    elif name in vars(types.FunctionType):  # __code__, __defaults__, __dict__...: not modelled
        raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"set {function.name}.{name}", name=f"setting {name}",
                                 type="function made in the compiled region")
    else:
        function.attributes[name] = value


# -- builtin methods of modelled values -----------------------------------------------------


def method_attribute(tracer: "Tracer", value: MethodValue, name: str) -> Value | None:
    """An attribute of a method bound to a value the tracer models natively (`d.clear`,
    `t.add`, `m.parameters`): its receiver, the facts of the method it binds (which do not
    depend on the receiver), and its type's."""
    receiver_type = value.receiver.python_type()
    raw = _raw(receiver_type, value.name)
    if type(raw) is types.FunctionType:  # a Python method of the receiver's class
        return function_attribute(tracer, function_value(raw, None).bind(value.receiver), name)
    if name == "__self__":
        return value.receiver
    bound_type = value.python_type()
    if name == "__qualname__" and bound_type is types.BuiltinMethodType:
        return ConstantValue(f"{receiver_type.__qualname__}.{value.name}")  # named by the receiver's class
    if name in _DESCRIPTOR_FACTS and raw is not _MISSING:
        return ConstantValue(getattr(raw, name, None))
    if name == "__module__" and bound_type is types.BuiltinMethodType:
        return ConstantValue(None)  # a method bound from a type's method descriptor has none
    return type_attribute(tracer, value, bound_type, name)


# -- functools.partial ----------------------------------------------------------------------


def partial_attribute(tracer: "Tracer", value: PartialValue, name: str) -> Value | None:
    """An attribute of a partial: its function and stored arguments, its `__dict__`, and
    what `functools.partial` gives every instance."""
    if name == "func":
        return value.func
    if name == "args":
        return SequenceValue(value.args, tuple)
    if name == "keywords":
        return DictValue(dict(value.keywords))
    if name == "__dict__":
        if value.source is not None:
            return tracer.wrap(tracer.real_by_value[id(value)].__dict__, AttrSource(value.source, "__dict__"))
        return DictValue({})  # stores on a partial made in the region are not modelled
    return type_attribute(tracer, value, value.python_type(), name)


# -- calling slot methods -------------------------------------------------------------------


def call_slot(tracer: "Tracer", receiver: Value, name: str, args: list[Value],
              kwargs: dict[str, Value]) -> Value | None:
    """`f.__call__(...)` of any callable value, and `f.__get__(obj)` of a function (how
    `torch.optim.lr_scheduler` wraps `optimizer.step`); None for other slots."""
    from ..interpreter import calls

    if name == "__call__":
        return calls.call_value(tracer, receiver, args, kwargs)
    if name == "__get__" and isinstance(receiver, FunctionValue) and receiver.bound_self is None \
            and 1 <= len(args) <= 2 and not kwargs:
        instance = args[0]
        if isinstance(instance, ConstantValue) and instance.value is None:
            return receiver
        return receiver.bind(instance)
    return None
