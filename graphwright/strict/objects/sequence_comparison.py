"""Comparing lists and tuples the region holds item by item, as CPython's `list_richcompare`
and `tuplerichcompare` do.

Items are compared in order, each pair first by identity then by `==` (whose special
methods run, with their side effects, as far as CPython runs them); the first pair that
differs decides an ordering, and when none differs the lengths do. Comparing a list with a
tuple by order is Python's TypeError.
"""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Callable

from .classes import type_name
from .values import ConstantValue, SequenceValue, Value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

ORDERINGS = {operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">="}


def sequences_equal(tracer: "Tracer", lhs: SequenceValue, rhs: SequenceValue) -> bool:
    """`lhs == rhs`: the same kind and length, each pair the same object or equal by `==`."""
    from .operations import binary, is_same, truth

    if lhs.kind is not rhs.kind or len(lhs.items) != len(rhs.items):
        return False
    return all(is_same(tracer, a, b) or truth(tracer, binary(tracer, operator.eq, a, b))
               for a, b in zip(lhs.items, rhs.items))


def sequences_ordered(tracer: "Tracer", op: Callable, lhs: SequenceValue, rhs: SequenceValue) -> Value:
    """`lhs < rhs` (or `<=`, `>`, `>=`): decided by the first pair of items that differ."""
    from .operations import binary, is_same, truth

    if lhs.kind is not rhs.kind:
        raise tracer.user_error(TypeError(f"'{ORDERINGS[op]}' not supported between instances of "
                                          f"'{type_name(lhs.python_type())}' and '{type_name(rhs.python_type())}'"))
    index = 0
    # CPython reads the lengths again at each step: an `__eq__` may shrink either list
    while index < len(lhs.items) and index < len(rhs.items):
        a, b = lhs.items[index], rhs.items[index]
        if not (is_same(tracer, a, b) or truth(tracer, binary(tracer, operator.eq, a, b))):
            break
        index += 1
    if index >= len(lhs.items) or index >= len(rhs.items):
        return ConstantValue(op(len(lhs.items), len(rhs.items)))
    return binary(tracer, op, lhs.items[index], rhs.items[index])
