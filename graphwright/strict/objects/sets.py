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

The algebra itself is CPython's: each set also holds a real set of its members'
keys (`DictValue.table`), and every operation is applied to those real sets,
in the program's order, so results, and the order a set iterates and pops in,
are those of eager's sets (keys are hashed as eager hashes them, objects with a
Python `__eq__` compared by it); the members are then looked up by key.
"""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..interpreter import graph_breaks as gb
from . import classes, dict_views, exceptions, operations
from .hashing import hashable_key
from .values import NONE, ConstantValue, DictValue, DictViewValue, IteratorValue, Value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

MEMBER = "using as a member of a set"
COMPARISONS = (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge)
_IN_PLACE = {operator.ior: operator.or_, operator.iand: operator.and_, operator.isub: operator.sub,
             operator.ixor: operator.xor}


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
        table.setdefault(hashable_key(tracer, value, MEMBER), value)
    return table


def new_set(kind: type, items: dict[Any, Value], table: set | None = None, cls: type | None = None) -> DictValue:
    """A set holding `items`; `table` is the real set of their keys (by default, one they are
    added to in order, as a set display or comprehension adds them)."""
    value = DictValue(items, kind, cls=cls)
    value.table = set(list(items)) if table is None else table
    return value


def _table(value: DictValue) -> set:
    """The set's real table of keys (a set read from outside gets one when first operated on,
    its keys added in the order they were read)."""
    if value.table is None:
        value.table = set(list(value.items))
    return value.table


def keys_in_order(value: DictValue) -> list[Any]:
    """The keys of a set in the order CPython iterates them; a set read from outside and not
    operated on, in the order it was read in (guarded)."""
    return list(value.items) if value.table is None else list(value.table)


def _operand(tracer: "Tracer", value: Value) -> tuple[Any, dict[Any, Value]]:
    """What a real set method is given for `value`, and its members by key: a set's table; a
    plain dict's keys (taken whole: the set is sized for it at once); any other iterable's keys
    as a generator that pulls and hashes each item when the method asks for it, recording it
    among the members, so that the method (CPython's own) stops where it stops."""
    if is_set(value):
        return _table(value), value.items
    if isinstance(value, ConstantValue) and type(value.value) is frozenset:  # `{"a", "b"}` in 3.11's code
        return value.value, {key: ConstantValue(key) for key in value.value}
    found: dict[Any, Value] = {}

    def keys() -> Iterator[Any]:
        for item in operations.each(tracer, value):
            key = hashable_key(tracer, item, MEMBER)
            found.setdefault(key, item)
            yield key
    if isinstance(value, DictValue) and value.python_type() is dict:
        return dict.fromkeys(keys()), found
    return keys(), found


def _members_of(keys: set, *sources: dict[Any, Value]) -> dict[Any, Value]:
    """The members under `keys` (in their order), found in the first of `sources` that has each."""
    found = {}
    for key in keys:
        found[key] = next(source[key] for source in sources if key in source)
    return found


def in_order(value: DictValue) -> list[Value]:
    """The members of a set in the order CPython iterates them."""
    return [value.items[key] for key in keys_in_order(value)]


def member_key(tracer: "Tracer", item: Value) -> Any:
    """The key `item` is looked up under: a set looked up in a set is taken as a frozenset
    (as CPython retries a set it cannot hash; a subclass with a `__hash__` hashes by it)."""
    if isinstance(item, DictValue) and item.kind is set:
        found = classes.find(tracer, item.python_type(), "__hash__")
        if found is None or found[1] is None:
            return frozenset(item.items)
    return hashable_key(tracer, item, MEMBER)


def build(tracer: "Tracer", kind: type, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`set(iterable)` or `frozenset(iterable)`."""
    if kwargs:
        raise tracer.user_error(TypeError(f"{kind.__name__}() takes no keyword arguments"))
    if len(args) > 1:
        raise tracer.user_error(TypeError(f"{kind.__name__} expected at most 1 argument, got {len(args)}"))
    if kind is frozenset and args and isinstance(args[0], DictValue) and args[0].kind is frozenset \
            and args[0].cls is None:
        return args[0]  # frozenset(f) is f
    return filled(tracer, kind, args[0] if args else None)


def filled(tracer: "Tracer", kind: type, iterable: Value | None, cls: type | None = None) -> DictValue:
    """A new set (of `cls`, a subclass) of the members of `iterable`, added as CPython's
    constructor adds them."""
    if iterable is None:
        return new_set(kind, {}, set(), cls)
    operand, found = _operand(tracer, iterable)
    table = set(operand)
    return new_set(kind, _members_of(table, found), table, cls)


def _builtin_kind(value: DictValue) -> type:
    return frozenset if issubclass(value.python_type(), frozenset) else set


_REAL_OPERATORS = (operator.or_, operator.and_, operator.sub, operator.xor)


def _contained(tracer: "Tracer", inner: Value, outer: Value) -> bool:
    """Whether every member of `inner` is in `outer` (CPython's subset test, or a view's
    `all_contained_in`, which asks the other side's `in` for each)."""
    if is_set(inner) and is_set(outer):
        return _table(inner) <= _table(outer)
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
    return in_order(value) if is_set(value) else dict_views.elements(tracer, value)


def contains(tracer: "Tracer", container: Value, item: Value) -> bool:
    if is_set(container):
        return member_key(tracer, item) in container.items
    return dict_views.contains(tracer, container, item)


def binary(tracer: "Tracer", op: Callable, lhs: Value, rhs: Value) -> Value | None:
    """`lhs op rhs` where a set or a set-like view takes part; None where neither side's
    operator applies (Python's NotImplemented on both sides)."""
    lhs, rhs = _as_set(lhs), _as_set(rhs)
    plain = _IN_PLACE.get(op)
    if plain is not None:
        if is_set(lhs) and _builtin_kind(lhs) is set and is_set(rhs):
            update(tracer, lhs, f"__{op.__name__}__", [rhs])
            return lhs
        op = plain  # no in-place form applies: `a |= b` is `a = a | b`
    if op in _REAL_OPERATORS:
        if is_set(lhs) and is_set(rhs):
            table = op(_table(lhs), _table(rhs))
            return new_set(_builtin_kind(lhs), _members_of(table, lhs.items, rhs.items), table)
        if dict_views.is_set_view(lhs) or dict_views.is_set_view(rhs):
            return _view_operator(tracer, op, lhs, rhs)
        return None
    if op in COMPARISONS and is_set_like(lhs) and is_set_like(rhs):
        return ConstantValue(_compare(tracer, op, lhs, rhs))
    return None


def _as_set(value: Value) -> Value:
    """A frozenset held as a constant (built from constants alone) as the set it is, so that it
    meets a set made in the region by its members, not by identity."""
    if isinstance(value, ConstantValue) and type(value.value) in (set, frozenset):
        return new_set(type(value.value), {key: ConstantValue(key) for key in value.value})
    return value


def _view_operator(tracer: "Tracer", op: Callable, lhs: Value, rhs: Value) -> Value:
    """A keys or items view's operator: a set made of its left operand (the view, for `&`,
    whichever side it is on), then updated by the right one, which may be any iterable."""
    if op is operator.and_ and not dict_views.is_set_view(lhs):
        lhs, rhs = rhs, lhs
    left, left_members = _operand(tracer, lhs) if is_set(lhs) else _view_operand(tracer, lhs)
    right, right_members = _operand(tracer, rhs)
    result = set(left)
    # a view's operators take every item of the other side (its `&` too, which a set's may stop)
    getattr(result, _UPDATE_OF[op])(list(right))
    return new_set(set, _members_of(result, left_members, right_members), result)


def _view_operand(tracer: "Tracer", view: Value) -> tuple[Any, dict[Any, Value]]:
    """What a set is made of from a view: a keys view of a plain dict is taken as the dict
    (which sizes the new set at once), any other iterated."""
    keys, found = _operand(tracer, view)
    if isinstance(view, DictViewValue) and dict_views.kind_of(view) == "keys" \
            and view.mapping.python_type() is dict:
        return dict.fromkeys(keys), found
    return keys, found


# -- methods ----------------------------------------------------------------------------------

_DUNDER_OPERATORS = {
    "__or__": operator.or_, "__and__": operator.and_, "__sub__": operator.sub, "__xor__": operator.xor,
    "__ior__": operator.ior, "__iand__": operator.iand, "__isub__": operator.isub, "__ixor__": operator.ixor,
    "__eq__": operator.eq, "__ne__": operator.ne, "__lt__": operator.lt, "__le__": operator.le,
    "__gt__": operator.gt, "__ge__": operator.ge}
_REFLECTED = {"__ror__": operator.or_, "__rand__": operator.and_, "__rsub__": operator.sub,
              "__rxor__": operator.xor}
_QUERIES = frozenset({"union", "intersection", "difference", "symmetric_difference"})
_UPDATES = frozenset({"update", "intersection_update", "difference_update", "symmetric_difference_update"})
_UPDATE_OF = {operator.or_: "update", operator.and_: "intersection_update", operator.sub: "difference_update",
              operator.xor: "symmetric_difference_update"}


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
    if name in _QUERIES or name in ("issubset", "issuperset", "isdisjoint"):
        if name not in ("union", "intersection", "difference"):
            _arity(tracer, value, name, args, 1)
        operands = [_operand(tracer, other) for other in args]
        result = getattr(_table(value), name)(*(operand for operand, _ in operands))
        if isinstance(result, bool):
            return ConstantValue(result)
        return new_set(kind, _members_of(result, value.items, *(found for _, found in operands)), result)
    if name == "copy":
        _arity(tracer, value, name, args, 0)
        if value.kind is frozenset and value.cls is None:
            return value
        table = _table(value).copy()
        return new_set(kind, _members_of(table, value.items), table)
    if name == "__contains__":
        _arity(tracer, value, name, args, 1)
        return ConstantValue(contains(tracer, value, args[0]))
    if name == "__len__":
        return ConstantValue(len(value.items))
    if name == "__iter__":
        return IteratorValue(in_order(value), cls=operations.iterator_class(value))
    if name in _UPDATES:
        if name == "symmetric_difference_update":
            _arity(tracer, value, name, args, 1)
        update(tracer, value, name, args)
        return NONE
    return _change(tracer, value, name, args)


def update(tracer: "Tracer", value: DictValue, method: str, others: list[Value]) -> None:
    """An updating method (or in-place operator) of set, run on the real table."""
    operands = [_operand(tracer, other) for other in others]
    tracer.side_effects.mutate(value)
    table = _table(value)
    try:
        getattr(table, method)(*(operand for operand, _ in operands))
    finally:  # an exception stops the method part way: the members it added stay, as in CPython
        value.items = _members_of(table, value.items, *(found for _, found in operands))


def _change(tracer: "Tracer", value: DictValue, name: str, args: list[Value]) -> Value:
    """add, discard, remove, pop, clear."""
    items, table = value.items, _table(value)
    if name in ("add", "discard", "remove"):
        _arity(tracer, value, name, args, 1)
        key = member_key(tracer, args[0]) if name != "add" else hashable_key(tracer, args[0], MEMBER)
        if name == "remove" and key not in items:  # the program's own value (a set, not its frozenset)
            raise exceptions.raised(tracer, exceptions.new_exception(KeyError, [args[0]]), "set.remove()")
        tracer.side_effects.mutate(value)
        if name == "add":
            add(value, key, args[0])
        else:
            items.pop(key, None)
            table.discard(key)
        return NONE
    if name == "pop":
        _arity(tracer, value, name, args, 0)
        if not items:
            raise tracer.user_error(KeyError("pop from an empty set"))
        tracer.side_effects.mutate(value)
        return items.pop(table.pop())
    if name == "clear":
        _arity(tracer, value, name, args, 0)
        tracer.side_effects.mutate(value)
        items.clear()
        table.clear()
        return NONE
    raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"set.{name}", name=name,
                             type=value.python_type().__name__)


def add(value: DictValue, key: Any, member: Value) -> None:
    """`value.add(member)` under `key` (an equal member already there stays)."""
    _table(value).add(key)
    value.items.setdefault(key, member)


def initialize(tracer: "Tracer", value: DictValue, args: list[Value]) -> None:
    """`set.__init__(value, iterable=())`: emptied, then updated."""
    value.items, value.table = {}, set()
    if args:
        update(tracer, value, "update", args[:1])
