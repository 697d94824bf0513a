"""Slices of any values (`slice(obj)`, `items[a:b]` with objects as bounds).

A slice of numbers and None is a constant (symbolic bounds stay symbolic). One holding other
values (an object made in the region, a tensor) is a `SliceValue`: its `start`, `stop` and
`step` are those values themselves (`s.stop is obj`), and slices compare as CPython compares
them, as the tuples of their three members, after the identity shortcut (`s == s` is true even
if a member's `__eq__` raises); `copy.copy` gives the slice itself and `copy.deepcopy` a slice
of copies (`copying`); hashing it is Python 3.11's TypeError (`hashing`). Anything else done
with such a slice (indexing a list with it) needs its Python value, which is a graph break.
"""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Callable

from .values import NONE, ArrayValue, ConstantValue, SequenceValue, SliceValue, TensorValue, Value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_MEMBERS = ("start", "stop", "step")
_IDENTICAL = {operator.eq: True, operator.le: True, operator.ge: True, operator.ne: False, operator.lt: False,
              operator.gt: False}
_SYMBOLS = {operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">="}


def make(tracer: "Tracer", parts: list[Value]) -> Value:
    """The slice of `parts` (start, stop, step) from BUILD_SLICE or `slice(...)`."""
    from .operations import python_value

    if all(isinstance(part, ConstantValue) for part in parts):
        return ConstantValue(slice(*(part.value for part in parts)))
    if any(isinstance(part, (TensorValue, ArrayValue)) for part in parts):  # a bound the graph computes
        return ConstantValue(slice(*(python_value(tracer, part) for part in parts)))
    if len(parts) == 1:
        parts = [NONE, parts[0], NONE]
    elif len(parts) == 2:
        parts = [*parts, NONE]
    return SliceValue(SequenceValue(list(parts), tuple))


def call(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`slice(...)`, with Python's errors for a wrong count of arguments."""
    if kwargs:
        raise tracer.user_error(TypeError("slice() takes no keyword arguments"))
    if not 1 <= len(args) <= 3:
        bound = "least 1 argument" if not args else "most 3 arguments"
        raise tracer.user_error(TypeError(f"slice expected at {bound}, got {len(args)}"))
    return make(tracer, list(args))


def member(value: SliceValue, name: str) -> Value | None:
    """`start`, `stop` or `step` of the slice; None for other names."""
    return value.parts.items[_MEMBERS.index(name)] if name in _MEMBERS else None


def compare(tracer: "Tracer", op: Callable, lhs: Value, rhs: Value) -> Value | None:
    """A comparison with a slice on either side; None when `op` is no comparison."""
    if op not in _IDENTICAL:
        return None
    if lhs is rhs:
        return ConstantValue(_IDENTICAL[op])
    left, right = _members(lhs), _members(rhs)
    if left is None or right is None:  # NotImplemented both ways: identity, or Python's TypeError
        if op in (operator.eq, operator.ne):
            return ConstantValue(op is operator.ne)
        raise tracer.user_error(TypeError(f"'{_SYMBOLS[op]}' not supported between instances of "
                                          f"'{lhs.python_type().__name__}' and '{rhs.python_type().__name__}'"))
    from .operations import binary

    return binary(tracer, op, left, right)


def _members(value: Value) -> SequenceValue | None:
    if isinstance(value, SliceValue):
        return value.parts
    if isinstance(value, ConstantValue) and type(value.value) is slice:
        real = value.value
        return SequenceValue([ConstantValue(real.start), ConstantValue(real.stop), ConstantValue(real.step)], tuple)
    return None
