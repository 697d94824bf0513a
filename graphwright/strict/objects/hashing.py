"""Python's hashing: how a value becomes a key of a modelled dict or a member of a set.

A key is what the real dict would hold, where that is a Python constant: a
number, a string, a tuple or frozenset of constants, a class or any object
that hashes by identity (then guarded to be that object). A value of the trace
is keyed by a `ValueKey`: a tensor by its identity (`TensorKey`), an object
made in the region, or one whose class defines `__hash__` and `__eq__` in
Python, by an `ObjectKey` that runs those methods inlined, when and as often as
CPython's dict would call them. Tuples and frozensets of keys are keys.
Unhashable values (lists, dicts, sets, dict views, instances of classes whose
`__hash__` is None) raise Python's TypeError, which the program can catch.
"""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

from ..interpreter import graph_breaks as gb
from . import classes
from .values import (
    ConstantValue,
    DictValue,
    DictViewValue,
    FunctionValue,
    ModuleValue,
    ObjectIdentity,
    ObjectKey,
    ScalarInstanceValue,
    SequenceValue,
    SliceValue,
    TensorKey,
    TensorValue,
    Value,
    key_value,
)
from .wrap import is_identity_key

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer


def hashable_key(tracer: "Tracer", value: Value, purpose: str = "using as a dict key") -> Any:
    """`value` as a key of a modelled dict or set, hashed as Python hashes it; `purpose` names
    what the program did with it when it cannot be a key."""
    from .operations import python_value

    if isinstance(value, ConstantValue):
        real = python_value(tracer, value)
        try:
            hash(real)
        except TypeError as error:
            raise tracer.user_error(error) from None
        return real
    if isinstance(value, TensorValue):
        return TensorKey(value)
    if classes.is_instance_value(value):
        return _object_key(tracer, value)
    if isinstance(value, SequenceValue) and value.kind is tuple:
        keys = tuple(hashable_key(tracer, item, purpose) for item in value.items)
        if value.cls is not None and all(isinstance(item, ConstantValue) for item in value.items):
            return python_value(tracer, value)  # a named tuple of constants: itself
        return keys
    if isinstance(value, DictValue) and value.kind is frozenset and value.cls is None:
        return frozenset(value.items)
    if isinstance(value, (SequenceValue, DictValue, DictViewValue, SliceValue)):  # slices hash only from 3.12 on
        raise unhashable(tracer, value)
    if isinstance(value, ModuleValue):
        return value.module
    if isinstance(value, FunctionValue) and value.fn is None:
        return ObjectKey(value, id(value))  # a function made in the region: by identity
    real = value.fn if isinstance(value, FunctionValue) and value.bound_self is None else getattr(value, "obj", None)
    if real is not None and is_identity_key(real):
        tracer.add_guard(value.source, "id", real)  # found by identity: the same object
        return real
    if value.source is None and value.python_type().__hash__ is object.__hash__:
        return ObjectKey(value, id(value))  # an iterator, a generator...: by identity
    raise tracer.graph_break(gb.UNSUPPORTED_OPERATION, f"dict key {value!r}", op=purpose,
                             types=value.python_type().__name__)


def unhashable(tracer: "Tracer", value: Value) -> Exception:
    return tracer.user_error(TypeError(f"unhashable type: '{classes.type_name(value.python_type())}'"))


def _object_key(tracer: "Tracer", value: Value) -> Any:
    """An instance of a user class: its class's `__hash__` (None: unhashable; Python: run, with
    its `__eq__`), else object's identity. A pre-existing object hashed by identity is the real
    object itself, so that dicts read from outside find it."""
    from ..interpreter import calls
    from .operations import binary, python_value, truth

    cls = value.python_type()
    found = classes.find(tracer, cls, "__hash__")
    if found is None or found[1] is None:
        raise unhashable(tracer, value)
    if classes.is_python_function(found[1]):
        result = calls.call_value(tracer, classes.bind(tracer, *found, "__hash__", value, cls), [], {})
        number = python_value(tracer, result, "__hash__()")
        if not isinstance(number, int):
            raise tracer.user_error(TypeError("__hash__ method should return an integer"))
        return ObjectKey(value, hash(number), _python_equality(tracer, value, binary, truth))
    if isinstance(value, ScalarInstanceValue):  # int's or str's hash, and equality
        number = hash(python_value(tracer, value.builtin))
        return ObjectKey(value, number, _python_equality(tracer, value, binary, truth))
    if isinstance(value, SequenceValue) and value.kind is tuple:
        return tuple(hashable_key(tracer, item) for item in value.items)  # tuple.__hash__
    if isinstance(value, DictValue) and value.kind is frozenset:
        return frozenset(value.items)
    real = classes.real_object(value)
    if real is not None and (is_identity_key(real) or _hashes_in_c(tracer, value, found[1])):
        tracer.add_guard(value.source, "id", real)
        return real
    return ObjectKey(value, id(value), _python_equality(tracer, value, binary, truth))


def _hashes_in_c(tracer: "Tracer", value: Value, hash_method: Any) -> bool:
    """An object read from outside, unchanged by the region, whose class hashes and compares it
    in C by what it holds (a `types.UnionType`): the object itself is the key, so that an equal
    one finds it as in Python."""
    return hash_method is not object.__hash__ and not getattr(value, "overlay", None) \
        and id(value) not in tracer.side_effects.mutated


def _python_equality(tracer: "Tracer", value: Value, binary: Any, truth: Any) -> Any:
    """How an `ObjectKey` compares with another key of equal hash: the class's `__eq__` (a
    Python one, or a builtin base's: a tuple subclass's items), run on the two values; None
    (identity) when `__eq__` is object's."""
    found = classes.find(tracer, value.python_type(), "__eq__")
    if found is None or found[1] is object.__eq__:
        return None
    return lambda other: truth(tracer, binary(tracer, operator.eq, value, key_value(other)))


def hash_of(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`hash(value)`: a constant's hash, a Python `__hash__`'s result; an identity hash of an
    object of the trace is its address, which the trace does not know."""
    if len(args) != 1 or kwargs:
        raise tracer.user_error(TypeError(f"hash() takes exactly one argument ({len(args)} given)"))
    value = args[0]
    key = hashable_key(tracer, value)
    if isinstance(key, ObjectKey) and key.hash == id(key.value):
        from .builtin_calls import made_identity

        identity = made_identity(value)
        if identity is not None:  # hashed by identity: known once the object is, after the graph
            return ObjectIdentity(object.__hash__(identity), value, hash)
    if not _hash_is_known(key):
        raise tracer.graph_break(gb.UNSUPPORTED_BUILTIN, f"hash({value!r})", name="hash",
                                 types=f"`{value.python_type().__name__}` (hashed by its address)")
    return ConstantValue(hash(key))


def _hash_is_known(key: Any) -> bool:
    """Whether the trace knows Python's hash of `key`: no tensor or object hashed by its address
    in it (a tuple of frozen dataclasses hashes by their Python `__hash__`, as `dataclass`'s own
    `__hash__` asks)."""
    if isinstance(key, ObjectKey):
        return key.equal is not None
    if isinstance(key, TensorKey):
        return False
    return type(key) not in (tuple, frozenset) or all(_hash_is_known(item) for item in key)
