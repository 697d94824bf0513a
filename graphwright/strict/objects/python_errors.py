"""Python's own errors for the builtin containers the tracer models item by item.

A list, tuple, dict or set the region holds is mirrored by a real Python list or dict of
symbolic values (`SequenceValue.items`, `DictValue.items`); an index, a slice, a pop or an
insert is done on that mirror. When the mirror rejects the operation (an index out of
range, a zero slice step, a slice assignment of the wrong size, a pop from an empty list),
its error is the one Python raises for the program's container, so the program sees it
and may catch it (`python_raises`). A call of a builtin method with the wrong arguments
(`s.clear(1)`, `a.insert()`) raises the TypeError Python raises (`check_arguments`),
before anything changes.

Only the one operation on the mirror goes inside `python_raises`: an error of the tracer
itself must never reach the program as its own exception.
"""
from __future__ import annotations

import contextlib
import inspect
import re
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer
    from .values import Value

# the errors Python's list, tuple and dict operations raise for the program's arguments
PYTHON_ERRORS = (IndexError, KeyError, ValueError, TypeError, OverflowError, MemoryError)


@contextlib.contextmanager
def python_raises(tracer: "Tracer", what: str) -> Iterator[None]:
    """The block is one operation on a container's mirror: what it raises, the program raises."""
    try:
        yield
    except PYTHON_ERRORS as error:
        raise tracer.user_error(error, what) from None


def check_arguments(tracer: "Tracer", kind: type, name: str, args: list["Value"],
                    kwargs: dict[str, Any]) -> None:
    """Raise Python's TypeError when builtin method `kind.name` does not take these arguments
    (their number and keywords; their types are the operation's to check)."""
    method = getattr(kind, name, None)
    try:
        signature = inspect.signature(method)
    except (TypeError, ValueError):  # a C method with no signature (list's `__getitem__`)
        _check_by_probe(tracer, kind, name, args, kwargs)
        return
    try:
        signature.bind(None, *args, **kwargs)
        return
    except TypeError as error:
        mismatch = error
    # Python's own words: the method itself, on an empty container of the kind (argument
    # clinic checks the count before it looks at the receiver or the values)
    try:
        getattr(kind(), name)(*[None] * len(args), **dict.fromkeys(kwargs))
    except TypeError as error:
        mismatch = error
    raise tracer.user_error(TypeError(str(mismatch)), f"{kind.__name__}.{name}()")


_ARITY_ERROR = re.compile(r"takes (?:exactly one argument|no arguments|no keyword arguments|at most|at least|exactly)"
                          r"|expected (?:at most |at least )?\d+ arguments?, got")
"""The words of CPython's argument-count checks (anything else a probe raises is about the
placeholder values, not the count)."""


def _check_by_probe(tracer: "Tracer", kind: type, name: str, args: list["Value"], kwargs: dict[str, Any]) -> None:
    """The method called on an empty container of the kind with placeholders for the
    arguments: its own argument-count error, if it gives one, is the program's."""
    try:
        getattr(kind(), name)(*[None] * len(args), **dict.fromkeys(kwargs))
    except TypeError as error:
        if _ARITY_ERROR.search(str(error)):
            raise tracer.user_error(TypeError(str(error)), f"{kind.__name__}.{name}()") from None
    except Exception:  # the placeholders' own errors (a missing key...): not the count's
        pass
