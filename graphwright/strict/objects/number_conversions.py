"""`int(x)`, `float(x)` and `complex(x)` of instances of Python classes, as CPython makes them.

CPython asks the type of `x` for its conversion methods in a fixed order (`int`: `__int__`,
then `__index__`; `float`: `__float__`, then `__index__`; `complex`: `__complex__`, then
`__float__`, then `__index__`) and checks what the first one found returns. A method the
class defines in Python is inlined; one inherited from a builtin base (`int.__int__` of a
subclass of int) converts the builtin value the instance holds; a class with none of them is
the TypeError CPython raises, unless the instance is text (a subclass of str or bytes), which
the builtin parses (`complex()` parses a str before asking for any method). A method returning a strict subclass of the expected type (a deprecation
warning in CPython) and `int()` reaching `__trunc__` (deprecated too) are graph breaks.

Other builtins computed now on the values of their arguments (`math.floor`, `round`,
`math.sqrt`, `struct.pack`...) see an instance of a Python subclass of a builtin number as the
number it holds, which is only right if its class defines no special method in Python: CPython
may call one (`round` calls `__round__`, `math.sqrt` of an int calls `__float__`). `math.floor`,
`math.ceil`, `math.trunc` and `round` call the class's own method, as CPython does; any other
such call is a graph break naming the method, never the builtin's answer for the base value.
"""
from __future__ import annotations

import math
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
    if target is complex and issubclass(cls, str) and isinstance(value, ScalarInstanceValue):
        return _builtin(tracer, target, value.builtin)  # complex() parses text before any method
    for name in _PROTOCOLS[target]:
        found = classes.find(tracer, cls, name)
        if found is None:
            continue
        if not classes.is_python_function(found[1]):  # a builtin base's own, of the value it holds
            return _builtin(tracer, target, value.builtin) if isinstance(value, ScalarInstanceValue) else None
        if name == "__trunc__":
            raise tracer.graph_break(gb.UNSUPPORTED_OPERATION, f"int() through {cls.__name__}.__trunc__",
                                     op="`int()` through `__trunc__` (deprecated)", types=cls.__name__)
        result = _checked(tracer, cls, name, operations.call_special(tracer, value, name, [], target))
        return result if _RESULT_TYPES[name] is target else _builtin(tracer, target, result)
    if isinstance(value, ScalarInstanceValue):  # text: the builtin parses what the instance holds
        return _builtin(tracer, target, value.builtin)
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


_ROUNDINGS = {math.floor: "__floor__", math.ceil: "__ceil__", math.trunc: "__trunc__", round: "__round__"}
_TEXT = (str, repr, format, ascii)  # a Python `__str__`/`__repr__`/`__format__` is inlined before
# names a class statement defines that no builtin calls
_STRUCTURAL = frozenset({"__init__", "__new__", "__module__", "__qualname__", "__doc__", "__dict__", "__weakref__",
                         "__slots__", "__annotations__", "__init_subclass__", "__class_getitem__", "__set_name__",
                         "__classcell__", "__orig_bases__", "__parameters__", "__getattr__", "__setattr__",
                         "__delattr__", "__getattribute__", "__dir__", "__reduce__", "__reduce_ex__",
                         "__getnewargs__", "__getstate__", "__setstate__", "__copy__", "__deepcopy__", "__del__"})


def with_python_methods(tracer: "Tracer", target: Any, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """`target(*args)` where an argument is an instance of a Python subclass of a builtin number
    whose class defines a special method in Python; None when none is, or CPython would not call
    it (`math.floor` of a float subclass without its own `__floor__`)."""
    values = [*args, *kwargs.values()]
    if target in _TEXT or not any(isinstance(value, ScalarInstanceValue) for value in values):
        return None
    name = _ROUNDINGS.get(target)
    if name is not None and args and isinstance(args[0], ScalarInstanceValue):
        method = classes.special_method(tracer, args[0], name)
        if method is not None:
            from ..interpreter import calls

            return calls.call_value(tracer, method, list(args[1:]), kwargs)
        values = values[1:]  # its base's own method rounds the number it holds
    for value in values:
        defined = _python_special_methods(value) if isinstance(value, ScalarInstanceValue) else ()
        if defined:
            what = getattr(target, "__name__", repr(target))
            raise tracer.graph_break(gb.UNSUPPORTED_OPERATION, f"{what} of a {value.python_type().__name__}",
                                     op=f"`{what}` of an object whose class defines {', '.join(defined)} in Python",
                                     types=value.python_type().__name__)
    return None


def _python_special_methods(value: ScalarInstanceValue) -> list[str]:
    cls = value.python_type()
    base = next(klass for klass in cls.__mro__ if not classes.is_user_class(klass))
    return [name for klass in cls.__mro__[:cls.__mro__.index(base)] for name in vars(klass)
            if name.startswith("__") and name.endswith("__") and name not in _STRUCTURAL]
