"""`collections.deque`: a list with two ends and an optional bound, as CPython runs it.

A deque is a `DequeValue`: its items in order and its `maxlen`. Its methods
change the symbolic items (a bounded deque drops items from the other end, as
CPython's does) with CPython's errors; a deque read from outside is read item
by item, and its changes are replayed after the graph; one made in the region
is rebuilt with its bound when it leaves.
"""
from __future__ import annotations

import collections
import operator
from typing import TYPE_CHECKING, Any

from ..interpreter import graph_breaks as gb
from . import operations
from .python_errors import check_arguments, python_raises
from .sequence_comparison import ORDERINGS, sequences_equal, sequences_ordered
from .values import NONE, ConstantValue, DequeValue, IteratorValue, SequenceValue, Value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_CHANGES = frozenset({"append", "appendleft", "extend", "extendleft", "pop", "popleft", "insert", "remove",
                      "rotate", "reverse", "clear", "__setitem__", "__delitem__", "__iadd__"})


def make(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`collections.deque(iterable=(), maxlen=None)`."""
    if len(args) > 2 or set(kwargs) - {"iterable", "maxlen"}:
        raise tracer.user_error(TypeError("deque() takes at most 2 arguments"))
    iterable = args[0] if args else kwargs.get("iterable")
    bound = args[1] if len(args) > 1 else kwargs.get("maxlen", NONE)
    maxlen = operations.python_value(tracer, bound, "deque(maxlen=...)")
    if maxlen is not None and (not isinstance(maxlen, int) or maxlen < 0):
        raise tracer.user_error(ValueError("maxlen must be non-negative") if isinstance(maxlen, int)
                                else TypeError("an integer is required"))
    made = DequeValue([], maxlen)
    if iterable is not None and not operations.is_none(iterable):
        for item in operations.each(tracer, iterable):  # taken one by one: an error stops it there
            _append(made, item, left=False)
    return made


def _index(tracer: "Tracer", deque: DequeValue, key: Value) -> int:
    index = operations.python_value(tracer, key, "a deque index")
    if not isinstance(index, int):
        raise tracer.user_error(TypeError(f"sequence index must be integer, not '{type(index).__name__}'"))
    if not -len(deque.items) <= index < len(deque.items):
        raise tracer.user_error(IndexError("deque index out of range"))
    return index


def getitem(tracer: "Tracer", deque: DequeValue, key: Value) -> Value:
    return deque.items[_index(tracer, deque, key)]


def _append(deque: DequeValue, item: Value, left: bool) -> None:
    items = deque.items
    if deque.maxlen == 0:
        return
    if deque.maxlen is not None and len(items) == deque.maxlen:
        items.pop() if left else items.pop(0)
    items.insert(0, item) if left else items.append(item)


def call_method(tracer: "Tracer", deque: DequeValue, name: str, args: list[Value],
                kwargs: dict[str, Value]) -> Value:
    items = deque.items
    if kwargs:
        raise tracer.user_error(TypeError(f"deque.{name}() takes no keyword arguments"))
    if name in _SEARCHES or name in _CHANGES:
        check_arguments(tracer, collections.deque, name, args, kwargs)
    if name in _CHANGES and name not in ("remove", "__setitem__"):  # CPython's count of changes:
        deque.state += 1  # storing an item is none; remove is one once it found the item
    if name in ("extend", "extendleft", "__iadd__"):
        added = operations.each(tracer, args[0])  # `d.extend(d)` takes the items as they were
        tracer.side_effects.mutate(deque)
        for item in added:  # each item added before the next is pulled
            _append(deque, item, left=name == "extendleft")
        return deque if name == "__iadd__" else NONE
    if name in _CHANGES:
        tracer.side_effects.mutate(deque)
        if name in ("append", "appendleft"):
            _append(deque, args[0], left=name == "appendleft")
        elif name in ("pop", "popleft"):
            if not items:
                raise tracer.user_error(IndexError(f"{name} from an empty deque"))
            return items.pop() if name == "pop" else items.pop(0)
        elif name == "insert":
            if deque.maxlen is not None and len(items) >= deque.maxlen:
                raise tracer.user_error(IndexError("deque already at its maximum size"))
            items.insert(operations.python_value(tracer, args[0], "deque.insert"), args[1])
        elif name == "remove":
            position = _find(tracer, deque, args[0], 0, len(items), IndexError("deque mutated during remove()."))
            if position is None:
                raise tracer.user_error(ValueError("deque.remove(x): x not in deque"))
            deque.state += 1
            del items[position]
        elif name == "rotate":
            steps = operations.python_value(tracer, args[0], "deque.rotate") if args else 1
            if items:
                steps %= len(items)
                items[:] = items[len(items) - steps:] + items[:len(items) - steps]
        elif name == "reverse":
            items.reverse()
        elif name == "clear":
            items.clear()
        elif name == "__setitem__":
            items[_index(tracer, deque, args[0])] = args[1]
        else:
            del items[_index(tracer, deque, args[0])]
        return NONE
    if name == "copy":
        return DequeValue(list(items), deque.maxlen)
    if name == "__getitem__":
        return getitem(tracer, deque, args[0])
    if name == "__len__":
        return ConstantValue(len(items))
    if name == "__iter__":
        return iterator(tracer, deque)
    if name == "__reversed__":
        return IteratorValue(items[::-1])
    if name == "__contains__":
        return ConstantValue(contains(tracer, deque, args[0]))
    if name == "count":
        return ConstantValue(_count(tracer, deque, args[0]))
    if name == "index":
        start, stop = _bounds(tracer, deque, args[1:])
        position = _find(tracer, deque, args[0], start, stop, _MUTATED)
        if position is None:
            shown = repr(operations.python_value(tracer, args[0])) if operations.is_constant_tree(args[0]) \
                else "value"
            raise tracer.user_error(ValueError(f"{shown} is not in deque"))
        return ConstantValue(position)
    raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"deque.{name}", name=name, type="deque")


_SEARCHES = frozenset({"count", "index", "__contains__"})
_MUTATED = RuntimeError("deque mutated during iteration")


def _find(tracer: "Tracer", deque: DequeValue, wanted: Value, start: int, stop: int,
          mutated: Exception) -> int | None:
    """The first position in [start, stop) whose item equals `wanted` (CPython's comparison:
    identity, then `==`), or None; `mutated` is raised when a comparison changed the deque."""
    state, items = deque.state, deque.items
    for position in range(start, stop):
        if position >= len(items):
            raise tracer.user_error(mutated)
        found = operations.items_equal(tracer, items[position], wanted, "a deque's search")
        if deque.state != state:
            raise tracer.user_error(mutated)
        if found:
            return position
    return None


def iterator(tracer: "Tracer", deque: DequeValue) -> IteratorValue:
    """`iter(d)`: its items, each step first checking that the deque was not changed since."""
    made, state = IteratorValue(list(deque.items), cls=type(iter(collections.deque()))), deque.state

    def watch() -> None:
        if deque.state != state:
            made.items, made.position = [], 0
            raise tracer.user_error(RuntimeError("deque mutated during iteration"))

    made.watch = watch
    return made


def contains(tracer: "Tracer", deque: DequeValue, wanted: Value) -> bool:
    return _find(tracer, deque, wanted, 0, len(deque.items), _MUTATED) is not None


def _count(tracer: "Tracer", deque: DequeValue, wanted: Value) -> int:
    found, start = 0, 0
    while True:
        position = _find(tracer, deque, wanted, start, len(deque.items), _MUTATED)
        if position is None:
            return found
        found, start = found + 1, position + 1


def _bounds(tracer: "Tracer", deque: DequeValue, args: list[Value]) -> tuple[int, int]:
    """`index`'s start and stop, clamped as CPython's deque clamps them (negative from the end)."""
    size = len(deque.items)
    start, stop = [operations.python_value(tracer, arg, "a deque index") for arg in args] + [0, size][len(args):]
    with python_raises(tracer, "deque.index()"):  # Python's error for an index that is not an int
        start, stop = operator.index(start), operator.index(stop)
    if start < 0:
        start = max(start + size, 0)
    if stop < 0:
        stop = max(stop + size, 0)
    return start, min(stop, size)


def binary(tracer: "Tracer", op: Any, lhs: Value, rhs: Value) -> Value | None:
    """`+` of two deques, `+=` of any iterable, `*` by an int, `==` of two deques."""
    if op is operator.iadd and isinstance(lhs, DequeValue):
        return call_method(tracer, lhs, "__iadd__", [rhs], {})
    both = isinstance(lhs, DequeValue) and isinstance(rhs, DequeValue)
    if op is operator.add and both:
        return DequeValue(lhs.items + rhs.items, lhs.maxlen)
    if op in (operator.mul, operator.imul) and isinstance(lhs, DequeValue):
        times = operations.python_value(tracer, rhs, "deque * n")
        made = DequeValue([], lhs.maxlen)
        for item in lhs.items * max(times, 0):
            _append(made, item, left=False)
        if op is operator.imul:
            tracer.side_effects.mutate(lhs)
            lhs.state += 1
            lhs.items[:] = made.items
            return lhs
        return made
    if op in (operator.eq, operator.ne):
        same = both and sequences_equal(tracer, SequenceValue(lhs.items, list), SequenceValue(rhs.items, list))
        return ConstantValue(same if op is operator.eq else not same)
    if op in ORDERINGS and both:  # item by item, then by length, as lists compare
        return sequences_ordered(tracer, op, SequenceValue(lhs.items, list), SequenceValue(rhs.items, list))
    return None
