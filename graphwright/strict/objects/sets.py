"""Sets and frozensets, and the set algebra of dict views, as CPython runs them.

A set is a `DictValue` whose `kind` is set or frozenset: each member under its
key (`hashing`), the first of equal members kept. Instances of user subclasses
of set and frozenset are the same, with their class in `cls`.

As in CPython: operators (`|`, `&`, `-`, `^`, `<`, `<=`...) take sets on both
sides, and make a set of the left operand's builtin class (a subclass's too);
a keys or items view on either side takes any iterable and makes a plain set.
Methods (`union`, `update`, `issubset`...) take any iterables. In-place
operators change a set in place; on a frozenset, a view, or a set whose right
operand is no set, `a |= b` is `a = a | b`. Changes to a set from outside are
replayed after the graph (`SideEffects.mutate`).

Members keep the order they were added in (TorchDynamo's order too); CPython
orders a set by hash, so code whose result depends on the order a set of
strings iterates in may differ from eager.
"""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, Callable

from . import dict_views, operations
from .hashing import hashable_key
from .values import NONE, ConstantValue, DictValue, DictViewValue, IteratorValue, Value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

SET_KINDS = (set, frozenset)
COMPARISONS = (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge)
_IN_PLACE = {operator.ior: operator.or_, operator.iand: operator.and_, operator.isub: operator.sub,
             operator.ixor: operator.xor}
_SYMBOLS = {operator.or_: "|", operator.and_: "&", operator.sub: "-", operator.xor: "^"}


def is_set(value: Value) -> bool:
    """A set or frozenset, or an instance of a subclass of one."""
    return isinstance(value, DictValue) and value.kind is not dict


def is_set_like(value: Value) -> bool:
    """What set operators accept on both sides: sets, and keys and items views."""
    return is_set(value) or dict_views.is_set_view(value)


def members(tracer: "Tracer", values: list[Value]) -> dict[Any, Value]:
    """The members a set made of `values` holds: each under its key, the first of equal ones."""
    table: dict[Any, Value] = {}
    for value in values:
        table.setdefault(hashable_key(tracer, value), value)
    return table


def table(tracer: "Tracer", value: Value) -> dict[Any, Value]:
    """The members of a set, or of any other iterable as a set takes them (do not change it)."""
    if is_set(value):
        return value.items
    return members(tracer, operations.iterate(tracer, value))


def member_key(tracer: "Tracer", item: Value) -> Any:
    """The key `item` is looked up under: a set looked up in a set is taken as a frozenset."""
    if isinstance(item, DictValue) and item.kind is set:
        return frozenset(item.items)
    return hashable_key(tracer, item)


def build(tracer: "Tracer", kind: type, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`set(iterable)` or `frozenset(iterable)`."""
    if kwargs:
        raise tracer.user_error(TypeError(f"{kind.__name__}() takes no keyword arguments"))
    if len(args) > 1:
        raise tracer.user_error(TypeError(f"{kind.__name__} expected at most 1 argument, got {len(args)}"))
    if kind is frozenset and args and isinstance(args[0], DictValue) and args[0].kind is frozenset \
            and args[0].cls is None:
        return args[0]  # frozenset(f) is f
    return DictValue(dict(table(tracer, args[0])) if args else {}, kind)


def _result(kind: type, items: dict[Any, Value]) -> DictValue:
    return DictValue(items, kind)


def _builtin_kind(value: DictValue) -> type:
    return frozenset if issubclass(value.python_type(), frozenset) else set


# -- the algebra, on tables of members --------------------------------------------------------

def _union(left: dict, right: dict) -> dict:
    result = dict(left)
    for key, value in right.items():
        result.setdefault(key, value)
    return result


def _intersection(left: dict, right: dict) -> dict:
    return {key: value for key, value in left.items() if key in right}


def _difference(left: dict, right: dict) -> dict:
    return {key: value for key, value in left.items() if key not in right}


def _symmetric_difference(left: dict, right: dict) -> dict:
    return {**_difference(left, right), **_difference(right, left)}


_ALGEBRA: dict[Callable, Callable[[dict, dict], dict]] = {
    operator.or_: _union, operator.and_: _intersection, operator.sub: _difference,
    operator.xor: _symmetric_difference}


def _contained(tracer: "Tracer", inner: Value, outer: Value) -> bool:
    """Whether every member of `inner` is in `outer` (CPython's subset test, or a view's
    `all_contained_in`, which asks the other side's `in` for each)."""
    if is_set(inner) and is_set(outer):
        return all(key in outer.items for key in inner.items)
    return all(contains(tracer, outer, item) for item in elements(tracer, inner))


def _compare(tracer: "Tracer", op: Callable, lhs: Value, rhs: Value) -> bool:
    left, right = size(tracer, lhs), size(tracer, rhs)
    if op in (operator.eq, operator.ne):
        equal = left == right and _contained(tracer, lhs, rhs)
        return equal if op is operator.eq else not equal
    if op in (operator.lt, operator.le):
        return (left < right if op is operator.lt else left <= right) and _contained(tracer, lhs, rhs)
    return (left > right if op is operator.gt else left >= right) and _contained(tracer, rhs, lhs)


def size(tracer: "Tracer", value: Value) -> int:
    return len(value.items) if is_set(value) else dict_views.size(tracer, value)


def elements(tracer: "Tracer", value: Value) -> list[Value]:
    return list(value.items.values()) if is_set(value) else dict_views.elements(tracer, value)


def contains(tracer: "Tracer", container: Value, item: Value) -> bool:
    if is_set(container):
        return member_key(tracer, item) in container.items
    return dict_views.contains(tracer, container, item)


def binary(tracer: "Tracer", op: Callable, lhs: Value, rhs: Value) -> Value | None:
    """`lhs op rhs` where a set or a set-like view takes part; None where neither side's
    operator applies (Python's NotImplemented on both sides)."""
    plain = _IN_PLACE.get(op)
    if plain is not None:
        if is_set(lhs) and _builtin_kind(lhs) is set and is_set(rhs):
            _update(tracer, lhs, plain, [rhs])
            return lhs
        op = plain  # no in-place form applies: `a |= b` is `a = a | b`
    if op in _ALGEBRA:
        if is_set(lhs) and is_set(rhs):
            return _result(_builtin_kind(lhs), _ALGEBRA[op](lhs.items, rhs.items))
        if dict_views.is_set_view(lhs) or dict_views.is_set_view(rhs):
            left, right = lhs, rhs
            if op is operator.and_ and not dict_views.is_set_view(lhs):
                left, right = rhs, lhs  # a view's & takes the view first, whatever the side
            return _result(set, _ALGEBRA[op](_view_table(tracer, left), table(tracer, right)))
        return None
    if op in COMPARISONS and is_set_like(lhs) and is_set_like(rhs):
        return ConstantValue(_compare(tracer, op, lhs, rhs))
    return None


def _view_table(tracer: "Tracer", value: Value) -> dict[Any, Value]:
    if isinstance(value, DictViewValue):
        return members(tracer, dict_views.elements(tracer, value))
    return table(tracer, value)


def unsupported_operands(tracer: "Tracer", op: Callable, lhs: Value, rhs: Value) -> Exception:
    """Python's TypeError for an operator neither side supports."""
    symbol = _SYMBOLS.get(_IN_PLACE.get(op, op), "?")
    if op in _IN_PLACE:
        symbol += "="
    return tracer.user_error(TypeError(f"unsupported operand type(s) for {symbol}: "
                                       f"'{lhs.python_type().__name__}' and '{rhs.python_type().__name__}'"))


# -- methods ----------------------------------------------------------------------------------

_DUNDER_OPERATORS = {
    "__or__": operator.or_, "__and__": operator.and_, "__sub__": operator.sub, "__xor__": operator.xor,
    "__ior__": operator.ior, "__iand__": operator.iand, "__isub__": operator.isub, "__ixor__": operator.ixor,
    "__eq__": operator.eq, "__ne__": operator.ne, "__lt__": operator.lt, "__le__": operator.le,
    "__gt__": operator.gt, "__ge__": operator.ge}
_REFLECTED = {"__ror__": operator.or_, "__rand__": operator.and_, "__rsub__": operator.sub,
              "__rxor__": operator.xor}
_FOLDS = {"union": _union, "intersection": _intersection, "difference": _difference}
_UPDATES = {"update": operator.or_, "intersection_update": operator.and_,
            "difference_update": operator.sub, "symmetric_difference_update": operator.xor}


def _arity(tracer: "Tracer", value: DictValue, name: str, args: list[Value], count: int) -> None:
    if len(args) != count:
        kind = _builtin_kind(value).__name__
        expected = "no arguments" if count == 0 else "exactly one argument"
        raise tracer.user_error(TypeError(f"{kind}.{name}() takes {expected} ({len(args)} given)"))


def call_method(tracer: "Tracer", value: DictValue, name: str, args: list[Value],
                kwargs: dict[str, Value]) -> Value:
    """A method of a set or frozenset (frozensets have no mutating ones: attribute lookup
    found none)."""
    kind = _builtin_kind(value)
    if kwargs:
        raise tracer.user_error(TypeError(f"{kind.__name__}.{name}() takes no keyword arguments"))
    if name in _DUNDER_OPERATORS or name in _REFLECTED:
        _arity(tracer, value, name, args, 1)
        operands = (args[0], value) if name in _REFLECTED else (value, args[0])
        if not is_set(args[0]):
            return ConstantValue(NotImplemented)  # set's own operators take sets only
        result = binary(tracer, _DUNDER_OPERATORS.get(name) or _REFLECTED[name], *operands)
        return result if result is not None else ConstantValue(NotImplemented)
    if name in _FOLDS:
        result = dict(value.items)
        for other in args:
            result = _FOLDS[name](result, table(tracer, other))
        return _result(kind, result)
    if name == "symmetric_difference":
        _arity(tracer, value, name, args, 1)
        return _result(kind, _symmetric_difference(value.items, table(tracer, args[0])))
    if name in ("issubset", "issuperset", "isdisjoint"):
        _arity(tracer, value, name, args, 1)
        other = table(tracer, args[0])
        if name == "issubset":
            return ConstantValue(all(key in other for key in value.items))
        if name == "issuperset":
            return ConstantValue(all(key in value.items for key in other))
        return ConstantValue(not any(key in value.items for key in other))
    if name == "copy":
        _arity(tracer, value, name, args, 0)
        if value.kind is frozenset and value.cls is None:
            return value
        return _result(kind, dict(value.items))
    if name == "__contains__":
        _arity(tracer, value, name, args, 1)
        return ConstantValue(contains(tracer, value, args[0]))
    if name == "__len__":
        return ConstantValue(len(value.items))
    if name == "__iter__":
        return IteratorValue(list(value.items.values()))
    if name in _UPDATES:
        if name == "symmetric_difference_update":
            _arity(tracer, value, name, args, 1)
        _update(tracer, value, _UPDATES[name], args)
        return NONE
    return _change(tracer, value, name, args)


def _update(tracer: "Tracer", value: DictValue, op: Callable, others: list[Value]) -> None:
    tables = [table(tracer, other) for other in others]
    tracer.side_effects.mutate(value)
    result = value.items
    for other in tables:
        result = _ALGEBRA[op](result, other)
    value.items = result


def _change(tracer: "Tracer", value: DictValue, name: str, args: list[Value]) -> Value:
    """add, discard, remove, pop, clear."""
    items = value.items
    if name in ("add", "discard", "remove"):
        _arity(tracer, value, name, args, 1)
        key = member_key(tracer, args[0]) if name != "add" else hashable_key(tracer, args[0])
        if name == "remove" and key not in items:
            raise tracer.user_error(KeyError(key))
        tracer.side_effects.mutate(value)
        if name == "add":
            items.setdefault(key, args[0])
        else:
            items.pop(key, None)
        return NONE
    if name == "pop":
        _arity(tracer, value, name, args, 0)
        if not items:
            raise tracer.user_error(KeyError("pop from an empty set"))
        tracer.side_effects.mutate(value)
        return items.pop(next(iter(items)))
    if name == "clear":
        _arity(tracer, value, name, args, 0)
        tracer.side_effects.mutate(value)
        items.clear()
        return NONE
    from ..interpreter import graph_breaks as gb

    raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"set.{name}", name=name,
                             type=value.python_type().__name__)
