"""`copy.copy` and `copy.deepcopy` of symbolic values, as the copy module does them.

A copy is a value created in the region: lists, dicts and sets are copied
item by item; immutable constants and functions are their own copies; an
instance of a user class (an object, or a dict or list subclass) follows the
protocol `object.__reduce_ex__` gives the copy module: its class's `__new__`
with no arguments, then its `__dict__` stored as is, its slots set through
`setattr`, its list items appended and its dict items set through its own
methods. Classes that take part in copying themselves (`__copy__`,
`__deepcopy__`, `__reduce__`, `__getstate__`...) run their Python `__copy__`,
or break the graph naming what is not modelled. Values read from outside are
copied through their sources, so the copy reads (and guards) what it copies.
"""
from __future__ import annotations

import collections
import copy
from typing import TYPE_CHECKING, Any

from ..interpreter import graph_breaks as gb
from . import classes, operations
from .values import (
    ConstantValue,
    DictValue,
    FunctionValue,
    SequenceValue,
    SliceValue,
    Value,
    holds_value_keys,
    key_value,
)
from .wrap import function_value, is_constant

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

# what object's own methods do for these; a class overriding one copies itself its own way
_COPY_PROTOCOL = {"__reduce_ex__": object.__reduce_ex__, "__reduce__": object.__reduce__,
                  "__getstate__": object.__getstate__}


def _call(tracer: "Tracer", function: Value, args: list[Value]) -> Value:
    from ..interpreter import calls

    return calls.call_value(tracer, function, args, {})


def copy_value(tracer: "Tracer", value: Value, memo: dict[int, Value] | None) -> Value:
    """`copy.copy(value)` (memo None) or `copy.deepcopy(value)` (memo: id of a value -> its copy)."""
    if memo is not None and id(value) in memo:
        return memo[id(value)]
    deep = memo is not None
    if isinstance(value, FunctionValue) or isinstance(value, ConstantValue) and (
            is_constant(value.value) or isinstance(value.value, type) or value.value is None):
        return value  # immutable: its own copy
    if isinstance(value, SliceValue):  # immutable, but deepcopy remakes it from copies of its members
        if not deep:
            return value
        made = SliceValue(copy_value(tracer, value.parts, memo))
        _remember(memo, value, made)
        return made
    if isinstance(value, SequenceValue) and value.cls is None:
        if value.kind is tuple and not deep:
            return value
        made = SequenceValue([], value.kind)
        _remember(memo, value, made)
        made.items = [copy_value(tracer, item, memo) if deep else item for item in value.items]
        return made
    if isinstance(value, DictValue) and value.cls is None and deep \
            and any(holds_value_keys(key) for key in value.items):
        return _deep_copy_keyed_by_values(tracer, value, memo)
    if isinstance(value, DictValue) and value.cls is None:
        made = DictValue({}, value.kind)
        _remember(memo, value, made)
        made.items = {key: copy_value(tracer, item, memo) if deep and value.kind is dict else item
                      for key, item in value.items.items()}
        made.table = None if value.table is None else value.table.copy()  # a set's order, copied
        return made
    if isinstance(value, DictValue) and value.cls in (collections.OrderedDict, collections.defaultdict):
        made = DictValue({}, cls=value.cls)  # their __reduce__: the class, the factory, the items
        _remember(memo, value, made)
        if value.cls is collections.defaultdict:
            from . import attributes

            factory = attributes.load_attr(tracer, value, "default_factory")
            classes.store_raw(tracer, made, "default_factory", _copied(tracer, factory, memo))
        made.items = {key: _copied(tracer, item, memo) for key, item in value.items.items()}
        return made
    if classes.is_instance_value(value):
        return _copy_instance(tracer, value, memo)
    raise _not_modelled(tracer, value, "copy.deepcopy" if deep else "copy.copy")


def _deep_copy_keyed_by_values(tracer: "Tracer", value: DictValue, memo: dict[int, Value]) -> Value:
    """`copy.deepcopy` of a dict or set with objects of the trace among its keys: as CPython's
    copy does, each key (and value) is copied in order, and the copies are hashed anew into a
    new dict (`y[deepcopy(k)] = deepcopy(v)`), or given to the set's class (its `__reduce__`)."""
    from . import operations, sets

    if value.kind is not dict:
        members = [copy_value(tracer, item, memo) for item in sets.in_order(value)]
        made = sets.build(tracer, value.kind, [SequenceValue(members, list)], {})
        _remember(memo, value, made)
        return made
    made = DictValue({})
    _remember(memo, value, made)
    for key, item in list(value.items.items()):
        operations.native_setitem(tracer, made, copy_value(tracer, key_value(key), memo),
                                  copy_value(tracer, item, memo))
    return made


def _remember(memo: dict[int, Value] | None, original: Value, made: Value) -> None:
    if memo is not None:
        memo[id(original)] = made


def _not_modelled(tracer: "Tracer", value: Value, what: str, detail: str = "") -> Exception:
    name = value.python_type().__qualname__
    return tracer.graph_break(gb.UNSUPPORTED_CALLABLE, f"{what} of {value!r}",
                              name=f"{what} of a {name}{detail}")


def _copy_instance(tracer: "Tracer", value: Value, memo: dict[int, Value] | None) -> Value:
    deep = memo is not None
    cls = value.python_type()
    what = "copy.deepcopy" if deep else "copy.copy"
    own = classes.find(tracer, cls, "__deepcopy__" if deep else "__copy__")
    if own is not None:
        if deep or not classes.is_python_function(own[1]):  # __deepcopy__ keys its memo by id()
            raise _not_modelled(tracer, value, what, f" (its class defines {own[0].__qualname__}."
                                                     f"{'__deepcopy__' if deep else '__copy__'})")
        return _call(tracer, classes.bind(tracer, *own, "__copy__", value, cls), [])
    for name, builtin in (*_COPY_PROTOCOL.items(), ("__setstate__", None), ("__getnewargs_ex__", None)):
        found = classes.find(tracer, cls, name)
        if found is not None and found[1] is not builtin and found[0] is not tuple:
            raise _not_modelled(tracer, value, what, f" (its class defines {found[0].__qualname__}.{name})")
    base = classes.builtin_base(cls)
    new_args = [SequenceValue([_copied(tracer, item, memo) for item in value.items], tuple)] \
        if base is tuple else []
    made = _new(tracer, cls, new_args)
    _remember(memo, value, made)
    for name, item in _own_state(tracer, value).items():
        classes.store_raw(tracer, made, name, _copied(tracer, item, memo))
    for name in _slot_names(cls):
        item = classes.get_attribute(tracer, value, name) if name in value.overlay or \
            classes.real_object(value) is not None and hasattr(classes.real_object(value), name) else None
        if item is not None:
            classes.set_attribute(tracer, made, name, _copied(tracer, item, memo))
    if base is list:
        from . import attributes

        append = attributes.load_attr(tracer, made, "append")
        for item in value.items:
            _call(tracer, append, [_copied(tracer, item, memo)])
    elif isinstance(value, DictValue):
        for key, item in value.items.items():
            operations.setitem(tracer, made, key_value(key), _copied(tracer, item, memo))
    return made


def _copied(tracer: "Tracer", value: Value, memo: dict[int, Value] | None) -> Value:
    return value if memo is None else copy_value(tracer, value, memo)


def _new(tracer: "Tracer", cls: type, args: list[Value]) -> Value:
    """`copyreg.__newobj__(cls, *args)`: the class's own `__new__`, with no `__init__`."""
    from .instances import new_instance

    owner, raw = classes.find(tracer, cls, "__new__")
    new = classes.static_function(raw)
    if classes.is_python_function(new):
        function = new if isinstance(new, Value) else function_value(new, None)
        return _call(tracer, function, [classes.class_value(cls), *args])
    return new_instance(tracer, cls, args, {})


def _own_state(tracer: "Tracer", value: Value) -> dict[str, Value]:
    """The instance's `__dict__`, in order: the real one's entries (read by source, their
    names guarded) with the region's stores on top."""
    state: dict[str, Value] = {}
    real = classes.real_object(value)
    if real is not None:
        names = list(classes.instance_dict_of(real) or ())
        if value.source is not None:
            tracer.add_guard(classes.dict_source(tracer, value), "keys", tuple(names))
        for name in names:
            found = classes.own_attribute(tracer, value, name)
            if found is not None:
                state[name] = found
    for name, item in value.overlay.items():
        if item is None:
            state.pop(name, None)
        elif name not in _slot_names(value.python_type()):
            state[name] = item
    return state


def _slot_names(cls: type) -> list[str]:
    names = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and name not in names:
                names.append(name)
    return names


def copy_handler(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    if len(args) != 1 or kwargs:
        raise tracer.graph_break(gb.UNSUPPORTED_BUILTIN, "copy.copy", name="copy.copy",
                                 types=", ".join(f"`{arg.python_type().__name__}`" for arg in args))
    return copy_value(tracer, args[0], None)


def deepcopy_handler(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    if len(args) != 1 or kwargs:  # an explicit memo maps id()s, which the tracer does not model
        raise tracer.graph_break(gb.UNSUPPORTED_BUILTIN, "copy.deepcopy", name="copy.deepcopy with a memo",
                                 types=", ".join(f"`{arg.python_type().__name__}`" for arg in args))
    return copy_value(tracer, args[0], {})


HANDLERS: dict[Any, Any] = {copy.copy: copy_handler, copy.deepcopy: deepcopy_handler}
