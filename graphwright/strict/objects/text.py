"""`str`, `repr` and `format` of values of the trace: the text Python would make of them.

A user class's Python `__str__`, `__repr__` and `__format__` are inlined (object's `__str__`
is its `__repr__`); an exception's are BaseException's; an object or function made in the
region shows the address of its value (the object it will be rebuilt as has none yet).
Lists, tuples, dicts, sets and frozensets, and instances of user subclasses of them that keep
their base's `__repr__`, are shown item by item as CPython shows them (a set subclass by its
class name, `S({1, 2})`), each item's own text made the same way, so that one holding objects
of the region shows them; a container met again inside itself is `[...]`. Values with no
text of their own here (constants, containers of constants) are left to the caller, which
makes the text of their Python value.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import attributes, classes, exceptions, operations
from .classes import builtin_base, is_user_class, type_name
from .values import (
    ConstantValue,
    DictValue,
    ExceptionValue,
    FunctionValue,
    ObjectValue,
    SequenceValue,
    Value,
    key_value,
)

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_CONTAINER_BASES = (list, tuple, dict, set, frozenset)


def user_text(tracer: "Tracer", value: Value, conversion: Any, spec: Value | None = None) -> Value | None:
    """`str(value)`, `repr(value)` or `format(value, spec)` by the Python `__str__`, `__repr__`
    or `__format__` of the value's class (object's `__str__` calls `__repr__`), an exception's
    builtin ones, or a container's; None when none of these applies."""
    from ..interpreter import calls

    if conversion is format:
        method = classes.special_method(tracer, value, "__format__")
        if method is not None:
            return calls.call_value(tracer, method, [spec or ConstantValue("")], {})
        if spec is not None and operations.python_value(tracer, spec) != "":
            if _shown_by_items(tracer, value):  # object.__format__ takes no format spec
                raise tracer.user_error(TypeError(
                    f"unsupported format string passed to {type_name(value.python_type())}.__format__"))
            return None
        conversion = str
    method = classes.special_method(tracer, value, "__str__") if conversion is str else None
    if method is None and (conversion is repr or _str_is_repr(tracer, value)):
        method = classes.special_method(tracer, value, "__repr__")
    if method is not None:
        return calls.call_value(tracer, method, [], {})
    if isinstance(value, ExceptionValue):  # BaseException's own, written in C
        return ConstantValue(exceptions.text_of(tracer, value, conversion))
    if conversion is repr or _str_is_repr(tracer, value):
        if _shown_by_items(tracer, value) and not operations.is_constant_tree(value) \
                or _is_subclass_instance(value):
            return ConstantValue(_container_repr(tracer, value, set()))
        return _identity_repr(tracer, value)
    return None


def _identity_repr(tracer: "Tracer", value: Value) -> Value | None:
    """What `object.__repr__` and a function's `__repr__` show for an object made in the region
    (`<m.C object at 0x...>`, `<function f.<locals>.g at 0x...>`): the address of the object it
    will be rebuilt as is unknown while tracing, so the value's own stands in for it (an
    eager run's differs from run to run too). None for any other value."""
    address = f"0x{id(value):x}"
    if isinstance(value, FunctionValue) and value.fn is None and value.bound_self is None:
        qualname = operations.python_value(tracer, attributes.load_attr(tracer, value, "__qualname__"))
        return ConstantValue(f"<function {qualname} at {address}>")
    if isinstance(value, ObjectValue) and value.obj is None and \
            classes.find(tracer, value.cls, "__repr__")[1] is object.__repr__:
        return ConstantValue(f"<{value.cls.__module__}.{value.cls.__qualname__} object at {address}>")
    return None


def _str_is_repr(tracer: "Tracer", value: Value) -> bool:
    found = classes.find(tracer, value.python_type(), "__str__")
    return found is not None and found[1] is object.__str__ or \
        _shown_by_items(tracer, value)  # list, dict... have no __str__ of their own


def _shown_by_items(tracer: "Tracer", value: Value) -> bool:
    """A list, tuple, dict, set or frozenset (or an instance of a user subclass keeping the
    base's `__repr__`), whose text is made from its items'."""
    if isinstance(value, SequenceValue):
        kind = value.kind
    elif isinstance(value, DictValue):
        kind = value.kind
    else:
        return False
    cls = value.python_type()
    if cls is not kind and not (is_user_class(cls) and builtin_base(cls) is kind):
        return False  # a namedtuple, an OrderedDict, a deque: their own texts
    found = classes.find(tracer, cls, "__repr__")
    return found is not None and found[0] in _CONTAINER_BASES


def _is_subclass_instance(value: Value) -> bool:
    return isinstance(value, (SequenceValue, DictValue)) and value.cls is not None and is_user_class(value.cls)


def _container_repr(tracer: "Tracer", value: Value, entered: set[int]) -> str:
    cls, kind = value.python_type(), value.kind
    if id(value) in entered:  # Py_ReprEnter: a container shown inside itself
        return {list: "[...]", tuple: "(...)", dict: "{...}"}.get(kind, f"{cls.__name__}(...)")
    entered.add(id(value))
    try:
        if kind is dict:
            return "{" + ", ".join(f"{_item_repr(tracer, key_value(key), entered)}: "
                                   f"{_item_repr(tracer, item, entered)}" for key, item in value.items.items()) + "}"
        if kind in (set, frozenset):
            from .sets import elements

            members = elements(tracer, value)
            if not members:
                return f"{cls.__name__}()"
            shown = "{" + ", ".join(_item_repr(tracer, item, entered) for item in members) + "}"
            return shown if cls is kind else f"{cls.__name__}({shown})"
        items = [_item_repr(tracer, item, entered) for item in value.items]
        if kind is list:
            return "[" + ", ".join(items) + "]"
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    finally:
        entered.discard(id(value))


def _item_repr(tracer: "Tracer", item: Value, entered: set[int]) -> str:
    if _shown_by_items(tracer, item):
        return _container_repr(tracer, item, entered)
    shown = user_text(tracer, item, repr)
    if shown is None:
        from .builtin_calls import evaluate

        shown = evaluate(tracer, repr, [item], {})
    return operations.python_value(tracer, shown)
