"""Dicts: the methods and operators of dict, OrderedDict and defaultdict, on `DictValue`s.

Every method of the three classes is modelled on the symbolic items, with
Python's checks and errors (raised as the program's own exceptions, which it
can catch): `update` and `dict(...)` take a mapping (a dict, or anything with
`keys()` and `__getitem__`), an iterable of pairs, and keywords; `|` makes a
dict of the class CPython's operator makes (an OrderedDict or a defaultdict,
with its factory, from either side); `|=` takes what `update` takes;
`fromkeys` calls the class and stores each key through `__setitem__`;
equality compares values with `==` (an OrderedDict's order too, against
another OrderedDict). Changes to a dict from outside are recorded for replay.
"""
from __future__ import annotations

import collections
import operator
import types
from typing import TYPE_CHECKING, Any, Iterator

from ..interpreter import graph_breaks as gb
from . import classes, dict_views, operations
from .hashing import hashable_key
from .python_errors import check_arguments
from .values import NONE, ConstantValue, DictValue, DictViewValue, IteratorValue, SequenceValue, Value, key_value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_NO_ARGUMENTS = frozenset({"keys", "values", "items", "clear", "copy", "__len__", "__iter__", "__reversed__"})
_AT_LEAST_ONE = frozenset({"get", "pop", "setdefault"})


def is_dict(value: Value) -> bool:
    """A dict, OrderedDict or defaultdict, or an instance of a subclass of one."""
    return isinstance(value, DictValue) and value.kind is dict


def _call(tracer: "Tracer", function: Value, args: list[Value]) -> Value:
    from ..interpreter import calls

    return calls.call_value(tracer, function, args, {})


def _base(value: DictValue) -> type:
    return classes.builtin_base(value.python_type())


def pairs(tracer: "Tracer", value: Value) -> Iterator[tuple[Any, Value]]:
    """What `dict.update(value)` and `dict(value)` read, each (key, value) when the dict takes
    it: the items of a mapping (a dict, or anything with `keys()`); else each pair of an
    iterable, pulled, checked and hashed before the next, with Python's errors."""
    if is_dict(value) or hasattr(value.python_type(), "keys"):
        yield from operations.dict_items(tracer, value).items()
        return
    for index, pair in enumerate(operations.each(tracer, value)):
        if isinstance(pair, ConstantValue) and not hasattr(type(pair.value), "__iter__"):
            raise tracer.user_error(TypeError(
                f"cannot convert dictionary update sequence element #{index} to a sequence"))
        elements = operations.iterate(tracer, pair)
        if len(elements) != 2:
            raise tracer.user_error(ValueError(
                f"dictionary update sequence element #{index} has length {len(elements)}; 2 is required"))
        yield hashable_key(tracer, elements[0]), elements[1]


def update(tracer: "Tracer", target: DictValue, args: list[Value], kwargs: dict[str, Value],
           name: str = "update") -> None:
    """`target.update(*args, **kwargs)`: the items of at most one mapping or iterable of pairs,
    each stored before the next is read (an exception leaves those before it), then the
    keywords; a subclass's `__setitem__` does not run (dict.update stores directly)."""
    if len(args) > 1:
        raise tracer.user_error(TypeError(f"{name} expected at most 1 argument, got {len(args)}"))
    tracer.side_effects.mutate(target)
    if args:
        for key, value in pairs(tracer, args[0]):
            target.items[key] = value
    target.items.update(kwargs)


def build(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`dict(mapping_or_pairs, **kwargs)`."""
    made = DictValue({})
    update(tracer, made, args, kwargs, "dict")
    return made


def is_fromkeys(target: Any) -> bool:
    """`cls.fromkeys` of a dict class (dict's own classmethod, bound to the class)."""
    owner = getattr(target, "__self__", None)
    return type(target) is types.BuiltinMethodType and isinstance(owner, type) and issubclass(owner, dict) \
        and target.__name__ == "fromkeys"


def fromkeys(tracer: "Tracer", cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`cls.fromkeys(iterable, value=None)`: `cls()`, then each key stored through its
    `__setitem__` (a subclass's own runs)."""
    if "value" in kwargs and len(args) == 1 and issubclass(cls, collections.OrderedDict):
        args, kwargs = [*args, kwargs["value"]], {}  # OrderedDict's takes `value` by name too
    if kwargs:
        raise tracer.user_error(TypeError("fromkeys() takes no keyword arguments"))
    if not args or len(args) > 2:
        raise tracer.user_error(TypeError(f"fromkeys expected at {'least 1' if not args else 'most 2'} "
                                          f"argument{'s' if args else ''}, got {len(args)}"))
    keys = operations.each(tracer, args[0])
    value = args[1] if len(args) > 1 else NONE
    if cls is dict:
        return DictValue({hashable_key(tracer, key): value for key in keys})
    from . import instances

    made = instances.call_class(tracer, cls, [], {})
    for key in keys:
        operations.setitem(tracer, made, key, value)
    return made


def _new_like(tracer: "Tracer", side: DictValue, contents: DictValue) -> Value:
    """What `side`'s own `|` makes from `contents`: an OrderedDict's class called on it, a
    defaultdict's class with its factory; any other dict's a plain dict."""
    from . import attributes, instances

    base = _base(side)
    cls = side.python_type()
    if base is collections.OrderedDict:
        return instances.call_class(tracer, cls, [contents], {})
    if base is collections.defaultdict:
        factory = attributes.load_attr(tracer, side, "default_factory")
        return instances.call_class(tracer, cls, [factory, contents], {})
    return DictValue(dict(contents.items))


def _union(tracer: "Tracer", lhs: DictValue, rhs: DictValue, side: DictValue | None = None) -> Value:
    """`lhs | rhs` of two dicts: the left's items, then the right's, in what the operator of
    `side` makes; by default the one CPython picks: the right operand's when its class is a
    subclass of the left's with an operator of its own (OrderedDict's, defaultdict's), else
    the left's."""
    if side is None:
        side = lhs
        if _base(rhs) is not _base(lhs) and issubclass(rhs.python_type(), lhs.python_type()):
            side = rhs
    made = _new_like(tracer, side, lhs)
    update(tracer, made, [rhs], {})
    return made


def equal(tracer: "Tracer", lhs: DictValue, rhs: DictValue) -> bool:
    """`lhs == rhs` for two dicts: the same keys, values equal (the same object, or `==`); two
    OrderedDicts also in the same order."""
    left, right = lhs.items, rhs.items
    if len(left) != len(right):
        return False
    for key, value in left.items():
        other = rhs.lookup(key)
        if other is None or not (operations.is_same(tracer, value, other) or operations.truth(
                tracer, operations.binary(tracer, operator.eq, value, other))):
            return False
    if _base(lhs) is collections.OrderedDict and _base(rhs) is collections.OrderedDict:
        return list(left) == list(right)
    return True


def binary(tracer: "Tracer", op: Any, lhs: Value, rhs: Value) -> Value | None:
    """`lhs op rhs` where a dict takes part; None where no dict operator applies (Python's
    NotImplemented on both sides). A mappingproxy's `|` and `==` are its dict's."""
    if op is operator.ior and _unproxied(lhs) is not lhs:
        raise tracer.user_error(TypeError("'|=' is not supported by mappingproxy; use '|' instead"))
    lhs, rhs = _unproxied(lhs), _unproxied(rhs)
    if op is operator.ior and is_dict(lhs):
        update(tracer, lhs, [rhs], {})
        return lhs
    if op in (operator.or_, operator.ior) and is_dict(lhs) and is_dict(rhs):
        return _union(tracer, lhs, rhs)
    if op in (operator.eq, operator.ne) and is_dict(lhs) and is_dict(rhs):
        same = equal(tracer, lhs, rhs)
        return ConstantValue(same if op is operator.eq else not same)
    return None


def _unproxied(value: Value) -> Value:
    if isinstance(value, DictViewValue) and dict_views.kind_of(value) == "proxy":
        return value.mapping
    return value


def call_method(tracer: "Tracer", mapping: DictValue, name: str, args: list[Value],
                kwargs: dict[str, Value]) -> Value:
    """A method of a dict, OrderedDict or defaultdict, as its class defines it."""
    base = _base(mapping)
    if name in vars(dict) and name not in ("fromkeys", "__init__", "__new__"):
        check_arguments(tracer, base, name, args, kwargs)  # OrderedDict's popitem takes `last`
    if name in _NO_ARGUMENTS and (args or kwargs):
        raise tracer.user_error(TypeError(f"{base.__name__}.{name}() takes no arguments ({len(args)} given)"))
    if name in _AT_LEAST_ONE and not args:
        raise tracer.user_error(TypeError(f"{name} expected at least 1 argument, got 0"))
    if name in ("keys", "values", "items"):
        return dict_views.make_view(mapping, name)
    if name in ("__iter__", "__reversed__"):
        keys = [key_value(key) for key in mapping.items]
        making = iter if name == "__iter__" else reversed
        return IteratorValue(keys if making is iter else keys[::-1], cls=operations.iterator_class(mapping, making))
    if name == "__len__":
        return ConstantValue(len(mapping.items))
    if name == "get":
        found = mapping.lookup(hashable_key(tracer, args[0]))
        return found if found is not None else args[1] if len(args) > 1 else NONE
    if name == "__getitem__":
        return operations.native_getitem(tracer, mapping, args[0])
    if name == "__contains__":
        return ConstantValue(mapping.lookup(hashable_key(tracer, args[0])) is not None)
    if name == "copy":
        return _copy(tracer, mapping)
    if name == "fromkeys":
        return fromkeys(tracer, mapping.python_type(), args, kwargs)
    if name in ("__or__", "__ror__", "__ior__", "__eq__", "__ne__"):
        if len(args) != 1:
            raise tracer.user_error(TypeError(f"expected 1 argument, got {len(args)}"))
        other = _unproxied(args[0])
        if name == "__ior__":
            return binary(tracer, operator.ior, mapping, other)
        if not is_dict(other):
            return ConstantValue(NotImplemented)
        if name in ("__eq__", "__ne__"):
            return ConstantValue(equal(tracer, mapping, other) is (name == "__eq__"))
        operands = (other, mapping) if name == "__ror__" else (mapping, other)
        return _union(tracer, *operands, side=mapping)  # this class's own operator
    if name == "update":
        update(tracer, mapping, args, kwargs)
        return NONE
    return _change(tracer, mapping, name, args, kwargs)


def _copy(tracer: "Tracer", mapping: DictValue) -> Value:
    """`d.copy()`: dict's makes a plain dict; OrderedDict's and defaultdict's their own class."""
    from . import attributes, instances

    base = _base(mapping)
    if base is collections.OrderedDict:
        return instances.call_class(tracer, mapping.python_type(), [mapping], {})  # type(self)(self)
    if base is collections.defaultdict:
        factory = attributes.load_attr(tracer, mapping, "default_factory")
        return instances.call_class(tracer, mapping.python_type(), [factory, mapping], {})
    return DictValue(dict(mapping.items))


def default_missing(tracer: "Tracer", mapping: DictValue, key: Value) -> Value:
    """`defaultdict.__missing__(key)`: KeyError without a factory, else the factory's value,
    stored by `self[key] = value` (a subclass's `__setitem__` runs)."""
    from . import attributes

    factory = attributes.load_attr(tracer, mapping, "default_factory")
    if operations.is_none(factory):
        raise tracer.user_error(KeyError(operations.python_value(tracer, key)))
    value = _call(tracer, factory, [])
    operations.setitem(tracer, mapping, key, value)
    return value


def _change(tracer: "Tracer", mapping: DictValue, name: str, args: list[Value],
            kwargs: dict[str, Value]) -> Value:
    """The methods that change the dict."""
    base = _base(mapping)
    items = mapping.items
    if name == "pop":
        key = hashable_key(tracer, args[0])
        if key not in items and len(args) > 1:
            return args[1]
        if key not in items:
            raise tracer.user_error(KeyError(key))
        tracer.side_effects.mutate(mapping)
        return items.pop(key)
    if name == "setdefault":
        key = hashable_key(tracer, args[0])
        found = mapping.lookup(key)
        if found is not None:
            return found
        tracer.side_effects.mutate(mapping)
        return items.setdefault(key, args[1] if len(args) > 1 else NONE)
    if name == "__setitem__":
        operations.native_setitem(tracer, mapping, args[0], args[1])
        return NONE
    if name == "__delitem__":
        operations.native_delitem(tracer, mapping, args[0])
        return NONE
    if name == "clear":
        tracer.side_effects.mutate(mapping)
        items.clear()
        return NONE
    if name == "popitem":
        return _popitem(tracer, mapping, base, args, kwargs)
    if name == "__missing__" and base is collections.defaultdict:
        if len(args) != 1 or kwargs:
            raise tracer.user_error(TypeError(
                f"defaultdict.__missing__() takes exactly one argument ({len(args)} given)"))
        return default_missing(tracer, mapping, args[0])
    if name == "move_to_end":
        _move_to_end(tracer, mapping, args, kwargs)
        return NONE
    raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"{base.__name__}.{name}", name=name,
                             type=mapping.python_type().__name__)


def _last(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value], position: int) -> bool:
    flag = args[position] if len(args) > position else kwargs.get("last", ConstantValue(True))
    return operations.truth(tracer, flag)


def _popitem(tracer: "Tracer", mapping: DictValue, base: type, args: list[Value],
             kwargs: dict[str, Value]) -> Value:
    """`popitem()`: the last item; an OrderedDict's `popitem(last=True)` either end."""
    if base is not collections.OrderedDict and (args or kwargs):
        raise tracer.user_error(TypeError(f"dict.popitem() takes no arguments ({len(args)} given)"))
    items = mapping.items
    if not items:
        raise tracer.user_error(KeyError("popitem(): dictionary is empty"))
    key = next(reversed(items)) if _last(tracer, args, kwargs, 0) else next(iter(items))
    tracer.side_effects.mutate(mapping)
    return SequenceValue([key_value(key), items.pop(key)], tuple)


def _move_to_end(tracer: "Tracer", mapping: DictValue, args: list[Value], kwargs: dict[str, Value]) -> None:
    if not args:
        raise tracer.user_error(TypeError("move_to_end() missing required argument 'key' (pos 1)"))
    key = hashable_key(tracer, args[0])
    items = mapping.items
    if key not in items:
        raise tracer.user_error(KeyError(key))
    tracer.side_effects.mutate(mapping)
    moved = items.pop(key)
    if _last(tracer, args, kwargs, 1):
        items[key] = moved
        return
    rest = dict(items)
    items.clear()
    items[key] = moved
    items.update(rest)
