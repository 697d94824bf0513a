"""What CPython checks around truth and `len()`: a class that sets `__bool__` or `__len__` to
None blocks the protocol, and what `__len__` returns must be an integer (taken by `__index__`)
at least zero and within `sys.maxsize`; otherwise the program gets Python's TypeError,
ValueError or OverflowError, from `len()` and from truth alike."""
from __future__ import annotations

import operator
import sys
from typing import TYPE_CHECKING

from .classes import find, is_instance_value, is_user_class, special_method, type_name
from .values import ConstantValue, ScalarInstanceValue, Value

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer


def blocked(tracer: "Tracer", value: Value, name: str) -> None:
    """A class that sets `__bool__` or `__len__` to None blocks the protocol: CPython calls the
    None it finds, and the program sees that TypeError (instead of the default truth)."""
    cls = value.python_type() if is_instance_value(value) else None
    found = find(tracer, cls, name) if cls is not None and is_user_class(cls) else None
    if found is not None and (found[1] is None or isinstance(found[1], ConstantValue)
                              and found[1].value is None):
        raise tracer.user_error(TypeError("'NoneType' object is not callable"))


def length_result(tracer: "Tracer", result: Value) -> Value:
    """What `__len__` returned, as `len()` and truth take it: an integer (by `__index__`), at
    least zero and within `sys.maxsize`, or Python's TypeError, ValueError or OverflowError."""
    from .operations import is_symbolic

    if is_symbolic(result):
        return result
    if isinstance(result, ScalarInstanceValue) and issubclass(result.python_type(), int):
        result = result.builtin  # an int subclass is taken as the int it holds
    elif not isinstance(result, ConstantValue):
        method = special_method(tracer, result, "__index__")
        if method is None:
            raise tracer.user_error(TypeError(f"'{type_name(result.python_type())}' object cannot be "
                                              "interpreted as an integer"))
        from ..interpreter import calls

        result = calls.call_value(tracer, method, [], {})
        if not (isinstance(result, ConstantValue) and type(result.value) is int):
            raise tracer.user_error(TypeError(f"__index__ returned non-int (type {type_name(result.python_type())})"))
    try:
        length = operator.index(result.value)
    except TypeError as error:
        raise tracer.user_error(error, "__len__")
    if length < 0:
        raise tracer.user_error(ValueError("__len__() should return >= 0"))
    if length > sys.maxsize:
        raise tracer.user_error(OverflowError("cannot fit 'int' into an index-sized integer"))
    return ConstantValue(int(length))
