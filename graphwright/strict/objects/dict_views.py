"""Dict views: `d.keys()`, `d.values()`, `d.items()`, and `types.MappingProxyType(d)`.

A view (`DictViewValue`) holds no items: every use reads its dict, so a view
sees the dict's later changes, as in Python. Keys and items views are
set-like: `&`, `|`, `^`, `-` with any iterable, comparisons with sets and
other set-like views, `isdisjoint` (the algebra is in `sets`); a values view
is only iterable and compares by identity. `view.mapping` is a mappingproxy of
the dict; a mappingproxy reads like its dict and refuses every change. A view
that leaves the region is its dict (rebuilt, or re-read by source) viewed
again, by the builtin method of the dict's base, so later changes of the real
dict show through it too.
"""
from __future__ import annotations

import collections
import operator
import types
from typing import TYPE_CHECKING, Any

from ..interpreter import graph_breaks as gb
from . import classes, operations
from .hashing import hashable_key
from .values import ConstantValue, DictValue, DictViewValue, IteratorValue, SequenceValue, Value, key_value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_KINDS = ("keys", "values", "items")
# the view classes of each builtin dict class, and which view each is
_VIEW_CLASSES = {(base, kind): type(getattr(base(), kind)())
                 for base in (dict, collections.OrderedDict, collections.defaultdict) for kind in _KINDS}
_KIND_OF = {cls: kind for (_, kind), cls in _VIEW_CLASSES.items()}
_KIND_OF[types.MappingProxyType] = "proxy"
_PROXY_READS = frozenset({"get", "keys", "values", "items", "copy", "__getitem__", "__len__", "__iter__",
                          "__contains__", "__reversed__"})


def view_base(mapping: DictValue) -> type:
    """The builtin dict class whose methods make (and, leaving the region, remake) its views."""
    base = classes.builtin_base(mapping.python_type())
    return base if (base, "keys") in _VIEW_CLASSES else dict


def make_view(mapping: DictValue, kind: str) -> DictViewValue:
    """`mapping.keys()` (kind "keys"), `.values()`, `.items()`, or a mappingproxy ("proxy")."""
    cls = types.MappingProxyType if kind == "proxy" else _VIEW_CLASSES[view_base(mapping), kind]
    return DictViewValue(mapping, cls)


def kind_of(view: DictViewValue) -> str:
    return _KIND_OF[view.cls]


def is_set_view(value: Value) -> bool:
    return isinstance(value, DictViewValue) and kind_of(value) in ("keys", "items")


def mapping_proxy(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`types.MappingProxyType(mapping)` of a dict the region holds."""
    if kwargs or len(args) != 1:
        raise tracer.user_error(TypeError(f"mappingproxy() takes exactly one argument ({len(args)} given)"))
    mapping = args[0]
    if isinstance(mapping, DictViewValue) and kind_of(mapping) == "proxy":
        mapping = mapping.mapping
    if not isinstance(mapping, DictValue) or mapping.kind is not dict:
        raise tracer.graph_break(gb.UNSUPPORTED_CLASS, f"mappingproxy({mapping!r})",
                                 name=f"a mappingproxy of a `{mapping.python_type().__name__}`")
    return make_view(mapping, "proxy")


def size(tracer: "Tracer", view: DictViewValue) -> int:
    return len(view.mapping.items)


def elements(tracer: "Tracer", view: DictViewValue) -> list[Value]:
    """What iterating the view gives, in the dict's order."""
    items = view.mapping.items
    kind = kind_of(view)
    if kind == "values":
        return list(items.values())
    if kind == "items":
        return [SequenceValue([key_value(key), item], tuple) for key, item in items.items()]
    return [key_value(key) for key in items]


def _equal(tracer: "Tracer", lhs: Value, rhs: Value) -> bool:
    """`lhs == rhs` as containers compare their items: the same object, or equal."""
    return operations.is_same(tracer, lhs, rhs) or \
        operations.truth(tracer, operations.binary(tracer, operator.eq, lhs, rhs))


def contains(tracer: "Tracer", view: DictViewValue, item: Value) -> bool:
    """`item in view`: a key looked up; a pair looked up by its key, then its value compared;
    a value compared with each value in turn."""
    kind = kind_of(view)
    if kind in ("keys", "proxy"):
        return view.mapping.lookup(hashable_key(tracer, item)) is not None
    if kind == "values":
        return any(_equal(tracer, value, item) for value in view.mapping.items.values())
    if not issubclass(item.python_type(), tuple):
        return False
    pair = operations.iterate(tracer, item)
    if len(pair) != 2:
        return False
    found = view.mapping.lookup(hashable_key(tracer, pair[0]))
    return found is not None and _equal(tracer, found, pair[1])


def getitem(tracer: "Tracer", view: DictViewValue, key: Value) -> Value:
    if kind_of(view) != "proxy":
        raise tracer.user_error(TypeError(f"'{view.cls.__name__}' object is not subscriptable"))
    return operations.getitem(tracer, view.mapping, key)


def attribute(tracer: "Tracer", view: DictViewValue, name: str) -> Value | None:
    """An attribute of a view: `mapping` (a mappingproxy of its dict), or a method."""
    from .values import MethodValue

    if name == "mapping" and kind_of(view) != "proxy":
        return make_view(view.mapping, "proxy")
    return MethodValue(view, name) if callable(getattr(view.cls, name, None)) else None


def call_method(tracer: "Tracer", view: DictViewValue, name: str, args: list[Value],
                kwargs: dict[str, Value]) -> Value:
    from . import dicts

    kind = kind_of(view)
    if kind == "proxy" and name in _PROXY_READS:
        return dicts.call_method(tracer, view.mapping, name, args, kwargs)
    if kind == "proxy" and name in ("__or__", "__ror__", "__eq__", "__ne__") and len(args) == 1:
        op = {"__eq__": operator.eq, "__ne__": operator.ne}.get(name, operator.or_)
        operands = [args[0], view] if name == "__ror__" else [view, args[0]]
        return dicts.binary(tracer, op, *operands) or ConstantValue(NotImplemented)
    if kwargs:
        raise tracer.user_error(TypeError(f"{view.cls.__name__}.{name}() takes no keyword arguments"))
    if name == "__len__":
        return ConstantValue(size(tracer, view))
    if name == "__iter__":
        return IteratorValue(elements(tracer, view), cls=operations.iterator_class(view))
    if name == "__reversed__":
        return IteratorValue(list(reversed(elements(tracer, view))), cls=operations.iterator_class(view, reversed))
    if name == "__contains__" and len(args) == 1:
        return ConstantValue(contains(tracer, view, args[0]))
    if name == "isdisjoint" and len(args) == 1 and kind != "values":
        return ConstantValue(not any(contains(tracer, view, item) for item in operations.each(tracer, args[0])))
    operator_call = _dunder_operator(tracer, view, name, args)
    if operator_call is not None:
        return operator_call
    raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"{view.cls.__name__}.{name}", name=name,
                             type=view.cls.__name__)


_DUNDERS = {"__or__": (operator.or_, False), "__ror__": (operator.or_, True),
            "__and__": (operator.and_, False), "__rand__": (operator.and_, True),
            "__sub__": (operator.sub, False), "__rsub__": (operator.sub, True),
            "__xor__": (operator.xor, False), "__rxor__": (operator.xor, True),
            "__eq__": (operator.eq, False), "__ne__": (operator.ne, False), "__lt__": (operator.lt, False),
            "__le__": (operator.le, False), "__gt__": (operator.gt, False), "__ge__": (operator.ge, False)}


def _dunder_operator(tracer: "Tracer", view: DictViewValue, name: str, args: list[Value]) -> Value | None:
    """`view.__or__(other)` and its kin: the operator the view's class defines."""
    from . import sets

    if name not in _DUNDERS or len(args) != 1 or not is_set_view(view):
        return None
    op, reflected = _DUNDERS[name]
    if op in sets.COMPARISONS and not sets.is_set_like(args[0]):
        return ConstantValue(NotImplemented)
    operands = (args[0], view) if reflected else (view, args[0])
    result = sets.binary(tracer, op, *operands)
    return result if result is not None else ConstantValue(NotImplemented)


def python_value(tracer: "Tracer", view: DictViewValue, purpose: str) -> Any:
    """A view of the real dict the mapping's items make (for computing with constants)."""
    real = operations.python_value(tracer, view.mapping, purpose)
    kind = kind_of(view)
    return types.MappingProxyType(real) if kind == "proxy" else getattr(view_base(view.mapping), kind)(real)
