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

`FormattedText` is the string an f-string makes of symbolic numbers (a float input that
changed between calls): its text stays unmade until something reads it, which fixes the
numbers with a guard; printed, logged or returned, the residual code formats the numbers the
entry received, so a new value never recompiles.
"""
from __future__ import annotations

import collections
import string
from typing import TYPE_CHECKING, Any, Callable

import torch

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
_FORMATTED_LATER = (torch.SymInt, torch.SymFloat)


class FormattedNumber:
    """One replacement field of an f-string over a symbolic number: `format(conversion(number),
    spec)`."""

    __slots__ = ("number", "conversion", "spec")

    def __init__(self, number: ConstantValue, conversion: Callable | None, spec: str) -> None:
        self.number = number
        self.conversion = conversion
        self.spec = spec

    def text(self) -> str:
        """The text, made from the number's value now (a guard fixes the symbol to it)."""
        symbol = self.number.value
        return self._format(symbol.node.pytype(symbol))

    def formats_every_value(self) -> bool:
        """Whether formatting can wait: the spec suits the number's type whatever its value (it
        formats the value traced, unguarded; `c` takes only some ints), so the residual code
        never raises where eager would have raised earlier."""
        if self.spec.endswith("c"):
            return False
        try:
            self._format(self.number.value.node.hint)
        except (ValueError, TypeError):
            return False
        return True

    def _format(self, value: int | float) -> str:
        return format(value if self.conversion is None else self.conversion(value), self.spec)


class FormattedText(ConstantValue):
    """A string built from literal pieces (str) and `FormattedNumber`s. Reading `value` makes
    the text, fixing the numbers; until then `parts` tell the residual code how to make it."""

    __slots__ = ("parts",)

    def __init__(self, parts: list) -> None:
        Value.__init__(self, None)
        self.parts: list | None = parts

    @property
    def value(self) -> str:
        if self.parts is not None:
            text = "".join(part if type(part) is str else part.text() for part in self.parts)
            ConstantValue.value.__set__(self, text)
            self.parts = None
        return ConstantValue.value.__get__(self)

    def python_type(self) -> type:
        return str

    def __repr__(self) -> str:  # never makes the text: a debug message must not add a guard
        return "FormattedText(...)" if self.parts is not None else f"FormattedText({self.value!r})"


def format_later(value: Value, conversion: Callable | None, spec: str) -> FormattedText | None:
    """An f-string's field over a symbolic int or float, left unformatted; None for any
    other value (formatted now)."""
    if isinstance(value, ConstantValue) and not isinstance(value, FormattedText) \
            and type(value.value) in _FORMATTED_LATER and conversion in (None, str, repr):
        field = FormattedNumber(value, conversion, spec)
        if field.formats_every_value():
            return FormattedText([field])
    return None


def format_method_later(tracer: "Tracer", template: str, args: list[Value],
                        kwargs: dict[str, Value]) -> FormattedText | None:
    """`template.format(*args, **kwargs)` with a symbolic int or float among plain constants,
    left unformatted; None where it is formatted now (no symbolic number, an argument that is
    not a constant, or a field that indexes, reads an attribute or nests a field in its spec)."""
    def is_number(value: Value) -> bool:
        return type(getattr(value, "value", None)) in _FORMATTED_LATER

    values = [*args, *kwargs.values()]
    if not any(is_number(value) for value in values) or \
            not all(type(value) is ConstantValue for value in values):
        return None
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError:
        return None  # a malformed template: str.format raises it, eagerly
    named = [field for _, field, _, _ in fields if field is not None]
    if "" in named and any(field.isdigit() for field in named):
        return None  # automatic and manual numbering mixed: str.format raises, eagerly
    parts, automatic = [], 0
    for literal, field, spec, conversion in fields:
        if literal:
            parts.append(literal)
        if field is None:
            continue
        if field == "":
            field, automatic = str(automatic), automatic + 1
        if field.isdigit() and int(field) < len(args):
            value = args[int(field)]
        elif field in kwargs:
            value = kwargs[field]
        else:
            return None
        if "{" in (spec or "") or conversion not in (None, "s", "r"):
            return None
        convert = {None: None, "s": str, "r": repr}[conversion]
        if is_number(value):
            parts.append(FormattedNumber(value, convert, spec or ""))
            if not parts[-1].formats_every_value():
                return None
            continue
        try:
            parts.append(format(value.value if convert is None else convert(value.value), spec or ""))
        except Exception:
            return None  # formatted now, by the call itself, which raises as eager does
    return FormattedText(parts)


def joined(tracer: "Tracer", pieces: list[Value]) -> Value:
    """`BUILD_STRING`: the pieces' texts joined, unformatted while a piece is."""
    if not any(isinstance(piece, FormattedText) and piece.parts is not None for piece in pieces):
        return ConstantValue("".join(operations.python_value(tracer, piece) for piece in pieces))
    parts = []
    for piece in pieces:
        if isinstance(piece, FormattedText) and piece.parts is not None:
            parts += piece.parts
        else:
            parts.append(operations.python_value(tracer, piece))
    return FormattedText(parts)


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
                or _is_subclass_instance(value) or _is_defaultdict(tracer, value):
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
        _shown_by_items(tracer, value) or _is_defaultdict(tracer, value)  # no __str__ of their own


def _is_defaultdict(tracer: "Tracer", value: Value) -> bool:
    """A defaultdict (or an instance of a subclass keeping its `__repr__`): shown as
    `name(factory, {items})`."""
    if not isinstance(value, DictValue) or value.cls is None:
        return False
    found = classes.find(tracer, value.cls, "__repr__")
    return found is not None and found[1] is collections.defaultdict.__repr__


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


def _container_repr(tracer: "Tracer", value: Value, entered: set[int], base: bool = False) -> str:
    """The container's text; `base`: dict's own text of a defaultdict's items."""
    cls, kind = value.python_type(), value.kind
    if not base and _is_defaultdict(tracer, value):
        return _defaultdict_repr(tracer, value, entered)
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


def _defaultdict_repr(tracer: "Tracer", value: DictValue, entered: set[int]) -> str:
    """CPython's `defaultdict.__repr__`: the factory's text (`...` when that factory is being
    shown already, further out), then dict's text of the items."""
    factory = attributes.load_attr(tracer, value, "default_factory")
    if id(factory) in entered:
        shown = "..."
    else:
        entered.add(id(factory))
        try:
            shown = _item_repr(tracer, factory, entered)
        finally:
            entered.discard(id(factory))
    items = _container_repr(tracer, value, entered, base=True)
    return f"{value.python_type().__name__}({shown}, {items})"


def _item_repr(tracer: "Tracer", item: Value, entered: set[int]) -> str:
    if _shown_by_items(tracer, item) or _is_defaultdict(tracer, item):
        return _container_repr(tracer, item, entered)
    shown = user_text(tracer, item, repr)
    if shown is None:
        from .builtin_calls import evaluate

        shown = evaluate(tracer, repr, [item], {})
    return operations.python_value(tracer, shown)
