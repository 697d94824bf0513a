"""`int(x)`, `float(x)` and `complex(x)` of instances of Python classes, as CPython makes them.

CPython asks the type of `x` for its conversion methods in a fixed order (`int`: `__int__`,
then `__index__`; `float`: `__float__`, then `__index__`; `complex`: `__complex__`, then
`__float__`, then `__index__`) and checks what the first one found returns. A method the
class defines in Python is inlined; one inherited from a builtin base (`int.__int__` of a
subclass of int) converts the builtin value the instance holds; a class with none of them is
the TypeError CPython raises, unless the instance is text (a subclass of str or bytes), which
the builtin parses. A method returning a strict subclass of the expected type (a deprecation
warning in CPython) and `int()` reaching `__trunc__` (deprecated too) are graph breaks.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..interpreter import graph_breaks as gb
from . import classes, operations
from .values import ConstantValue, ScalarInstanceValue, Value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_PROTOCOLS = {int: ("__int__", "__index__", "__trunc__"), float: ("__float__", "__index__"),
              complex: ("__complex__", "__float__", "__index__")}
_RESULT_TYPES = {"__int__": int, "__index__": int, "__float__": float, "__complex__": complex}
_NOT_A_NUMBER = {int: "int() argument must be a string, a bytes-like object or a real number, not '{}'",
                 float: "float() argument must be a string or a real number, not '{}'",
                 complex: "complex() first argument must be a string or a number, not '{}'"}


def convert(tracer: "Tracer", target: Any, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """`target(x)` for an instance `x` of a Python class; None for any other call, which the
    builtin computes on Python values."""
    if target not in _PROTOCOLS or kwargs or len(args) != 1 or not classes.is_instance_value(args[0]):
        return None
    value = args[0]
    cls = value.python_type()
    for name in _PROTOCOLS[target]:
        found = classes.find(tracer, cls, name)
        if found is None:
            continue
        if not classes.is_python_function(found[1]):
            return None  # a builtin base's own conversion, of the value the instance holds
        if name == "__trunc__":
            raise tracer.graph_break(gb.UNSUPPORTED_OPERATION, f"int() through {cls.__name__}.__trunc__",
                                     op="`int()` through `__trunc__` (deprecated)", types=cls.__name__)
        result = _checked(tracer, cls, name, operations.call_special(tracer, value, name, [], target))
        return result if _RESULT_TYPES[name] is target else _builtin(tracer, target, result)
    if isinstance(value, ScalarInstanceValue):
        return None
    raise tracer.user_error(TypeError(_NOT_A_NUMBER[target].format(classes.type_name(cls))))


def _checked(tracer: "Tracer", cls: type, name: str, result: Value) -> Value:
    """What the conversion method `name` returned, if CPython accepts it."""
    expected = _RESULT_TYPES[name]
    if operations.is_symbolic(result):
        return result
    kind = result.python_type()
    if kind is expected:
        return result
    if issubclass(kind, expected):
        raise tracer.graph_break(gb.UNSUPPORTED_OPERATION, f"{name} returned a {kind.__name__}",
                                 op=f"`{name}` returning a strict subclass of {expected.__name__} (deprecated)",
                                 types=kind.__name__)
    owner = f"{classes.type_name(cls)}." if name == "__float__" else ""
    raise tracer.user_error(TypeError(f"{owner}{name} returned non-{expected.__name__} (type {kind.__name__})"))


def _builtin(tracer: "Tracer", target: Any, number: Value) -> Value:
    from .builtin_calls import evaluate

    return evaluate(tracer, target, [number], {})
