"""Exceptions in the traced program, as CPython 3.11 keeps them.

An exception is an `ExceptionValue`: its class, its `args`, and the state CPython keeps on
every exception (`__context__`, `__cause__`, `__suppress_context__`, `__traceback__`); a
user subclass's own attributes live in its overlay, as any instance's do, and its Python
`__init__`, `__str__`... are inlined like any method. This module owns:

- making exception values: `BaseException.__new__` and `__init__` (`new_exception`,
  `init_exception`), the error an operation raises as Python would (`from_error`), and a
  real exception from a value (`as_real`, for messages and residual code);
- what BaseException and its builtin subclasses define in C: the attributes (`args`, the
  chaining state, `StopIteration.value`...) and the methods (`with_traceback`, `add_note`,
  `str()` and `repr()`), through `bind_builtin` and `call_method`;
- raising and handling: CPython's stack of handled exceptions (`HandledExceptions`, what
  `sys.exc_info()` answers), implicit chaining of `__context__` without cycles (`raised`),
  `raise ... from` (`to_raise`, `set_cause`), traceback entries (`add_traceback`), and
  matching an `except` clause (`matches`).

Frames unwind to handlers (`interpreter/frame.py`); the opcode handlers only call these.
Nothing here touches a real exception that existed before the region: raising one gives its
value a context and a traceback entry that are not written back to it.
"""
from __future__ import annotations

import sys
import traceback
import types
from typing import TYPE_CHECKING, Any

from ..interpreter import graph_breaks as gb
from ..interpreter.graph_breaks import UserException
from . import classes, operations
from .values import (
    NONE,
    ConstantValue,
    ExceptionValue,
    MethodValue,
    SequenceValue,
    TracebackValue,
    Value,
)

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

# The state every exception has (BaseException's getset descriptors), by attribute name.
_CHAINING = {"__cause__": "cause", "__context__": "context", "__traceback__": "traceback"}
# C members that a builtin `__init__` sets from the arguments alone.
_FROM_ARGS = {(StopIteration, "value"), (StopAsyncIteration, "value"), (SystemExit, "code")}
METHODS = frozenset({"with_traceback", "add_note", "__str__", "__repr__", "__init__"})


class HandledExceptions:
    """CPython's stack of handled exceptions (`tstate->exc_info`): one slot for the compiled
    function's frames, one more for each generator running inside it. An `except` or
    `finally` block stores the exception it handles in the top slot (PUSH_EXC_INFO) and puts
    back what was there when it ends (POP_EXCEPT); the exception being handled, which a bare
    `raise` re-raises and a new exception takes as its `__context__`, is the topmost slot
    that holds one (a generator's frames see their caller's)."""

    __slots__ = ("slots",)

    def __init__(self) -> None:
        self.slots: list[Value] = [NONE]

    def current(self) -> Value:
        for slot in reversed(self.slots):
            if not operations.is_none(slot):
                return slot
        return NONE

    def enter(self, exception: Value) -> Value:
        """PUSH_EXC_INFO: handle `exception`; returns what the slot held, to restore later."""
        saved, self.slots[-1] = self.slots[-1], exception
        return saved

    def leave(self, saved: Value) -> None:
        """POP_EXCEPT: the handler ended; the slot gets back what it held."""
        self.slots[-1] = saved


# -- making exceptions ----------------------------------------------------------------------


def is_exception_class(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, BaseException)


def is_builtin_new(target: Any) -> bool:
    """The `__new__` of a builtin exception class (BaseException's, or OSError's own)."""
    owner = getattr(target, "__self__", None)
    return getattr(target, "__name__", None) == "__new__" and is_exception_class(owner) \
        and not classes.is_user_class(owner)


def new_exception(cls: type, args: list[Value]) -> ExceptionValue:
    """`BaseException.__new__(cls, *args)`: an exception whose `args` are the positional
    arguments (its `__init__` runs next)."""
    return ExceptionValue(cls, args)


def init_exception(tracer: "Tracer", exception: ExceptionValue, args: list[Value],
                   kwargs: dict[str, Value]) -> None:
    """The builtin `__init__` of the exception's base: `args` become the arguments. Builtin
    classes that take keywords (`ImportError(name=...)`, `AttributeError(obj=...)`) are run
    for real on constant arguments, and the real exception answers what they set."""
    if kwargs:
        base = classes.builtin_base(exception.cls)
        python_args = [operations.python_value(tracer, arg, f"`{base.__name__}()`") for arg in args]
        python_kwargs = {key: operations.python_value(tracer, arg, f"`{base.__name__}()`")
                         for key, arg in kwargs.items()}
        try:
            exception.obj = base(*python_args, **python_kwargs)
        except TypeError as error:
            raise tracer.user_error(error) from None
    exception.args = list(args)


def from_error(tracer: "Tracer", error: BaseException) -> ExceptionValue:
    """The value of an error raised as Python would raise it: by a real call made while
    tracing (`int("x")`), or by the tracer for an operation Python rejects (a missing key).
    The real error answers the attributes its class sets in C."""
    return ExceptionValue(type(error), [ConstantValue(arg) for arg in error.args], obj=error)


def from_outside(tracer: "Tracer", real: BaseException, source: Any) -> ExceptionValue:
    """An exception that existed before the region, read by source (a module's sentinel
    error, an argument): its arguments and chaining state are read through (an exception met
    again in its own chain is not read twice: its chain is None there)."""
    from ..guards.sources import AttrSource

    def read(name: str) -> Value:
        attribute = getattr(real, name)
        if id(attribute) in _READING:
            return NONE
        return tracer.wrap(attribute, None if source is None else AttrSource(source, name))

    value = ExceptionValue(type(real), [], obj=real, source=source)
    _READING.add(id(real))
    try:
        args = read("args")
        value.cause, value.context = read("__cause__"), read("__context__")
    finally:
        _READING.discard(id(real))
    value.args = list(args.items) if isinstance(args, SequenceValue) else [ConstantValue(arg) for arg in real.args]
    value.suppress_context = real.__suppress_context__
    return value


_READING: set[int] = set()  # the exceptions whose chain `from_outside` is reading


def as_real(tracer: "Tracer", value: ExceptionValue) -> BaseException | None:
    """A real exception equal to `value` as far as a message shows it (class, constant
    arguments, the chain behind it); None when an argument is not a constant."""
    if value.obj is not None and value.source is not None:
        return value.obj
    try:
        real = make_real(value.cls, tuple(operations.python_value(tracer, arg) for arg in value.args))
    except Exception:  # a tensor argument, a graph break: no real counterpart
        return None
    for name, attribute in (("__cause__", value.cause), ("__context__", value.context)):
        if isinstance(attribute, ExceptionValue) and attribute is not value:
            setattr(real, name, as_real(tracer, attribute))
    real.__suppress_context__ = value.suppress_context
    return real


def make_real(cls: type, args: tuple) -> BaseException:
    """A real exception of `cls` with `args`, made by its builtin base (the user's `__init__`
    does not run: what it did is given separately). Residual code makes exceptions so."""
    base = classes.builtin_base(cls)
    exception = base.__new__(cls, *args)
    base.__init__(exception, *args)
    return exception


def describe(tracer: "Tracer", value: Value) -> str:
    """`Type: message`, as a traceback's last line shows the exception."""
    from ..interpreter import calls

    name = value.python_type().__name__
    try:
        text = operations.python_value(tracer, calls.call_value(tracer, ConstantValue(str), [value], {}))
    except Exception:  # a message that depends on tensors, or a graph break in __str__
        return name
    return f"{name}: {text}" if text else name


# -- attributes and methods defined in C -----------------------------------------------------


def bind_builtin(tracer: "Tracer", instance: ExceptionValue, owner: type, raw: Any, name: str) -> Value | None:
    """What reading `name` on an exception gives when the class lookup found `raw`, defined in
    C by the builtin exception class `owner`; None when `raw` is not such an attribute."""
    if classes.is_user_class(owner) or not issubclass(owner, BaseException):
        return None
    if isinstance(raw, (types.GetSetDescriptorType, types.MemberDescriptorType)):
        return read_slot(tracer, instance, owner, name)
    if isinstance(raw, (types.MethodDescriptorType, types.WrapperDescriptorType)) and name in METHODS:
        return MethodValue(instance, name)
    return None


def read_slot(tracer: "Tracer", exception: ExceptionValue, owner: type, name: str) -> Value:
    if name == "args":
        return SequenceValue(list(exception.args), tuple)
    if name in _CHAINING:
        return getattr(exception, _CHAINING[name])
    if name == "__suppress_context__":
        return ConstantValue(exception.suppress_context)
    if name in exception.overlay:
        return exception.overlay[name]
    if (owner, name) in _FROM_ARGS:
        if owner is SystemExit and len(exception.args) != 1:
            return SequenceValue(list(exception.args), tuple) if exception.args else NONE
        return exception.args[0] if exception.args else NONE
    real = exception.obj if exception.obj is not None else as_real(tracer, exception)
    if real is None:
        raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"{exception!r}.{name}", name=name,
                                 type=f"{exception.cls.__name__} whose arguments are not constants")
    return tracer.wrap(getattr(real, name), None)


def write_slot(tracer: "Tracer", exception: ExceptionValue, owner: type, name: str, value: Value) -> bool:
    """`exception.name = value` for an attribute BaseException keeps in C; False for another."""
    if owner is not BaseException:
        return False
    if name == "args":
        exception.args = operations.iterate(tracer, value)
    elif name in ("__cause__", "__context__"):
        what = "cause" if name == "__cause__" else "context"
        if not (operations.is_none(value) or isinstance(value, ExceptionValue)):
            raise tracer.user_error(TypeError(f"exception {what} must be None or derive from BaseException"))
        setattr(exception, what, value)
        if name == "__cause__":
            exception.suppress_context = True
    elif name == "__suppress_context__":
        if not (isinstance(value, ConstantValue) and type(value.value) is bool):
            raise tracer.user_error(TypeError("attribute value type must be bool"))
        exception.suppress_context = value.value
    elif name == "__traceback__":
        set_traceback(tracer, exception, value)
    else:
        return False
    return True


def set_traceback(tracer: "Tracer", exception: ExceptionValue, value: Value) -> None:
    if not (operations.is_none(value) or isinstance(value, TracebackValue)):
        raise tracer.user_error(TypeError("__traceback__ must be a traceback or None"))
    exception.traceback = value


def call_method(tracer: "Tracer", exception: ExceptionValue, name: str, args: list[Value],
                kwargs: dict[str, Value]) -> Value:
    if name == "with_traceback":
        set_traceback(tracer, exception, args[0])
        return exception
    if name == "add_note":
        note = args[0] if args else None
        if not (isinstance(note, ConstantValue) and isinstance(note.value, str)):
            kind = "nothing" if note is None else note.python_type().__name__
            raise tracer.user_error(TypeError(f"note must be a str, not '{kind}'"))
        notes = exception.overlay.get("__notes__")
        if notes is None:
            notes = exception.overlay["__notes__"] = SequenceValue([], list)
        if not (isinstance(notes, SequenceValue) and notes.kind is list):
            raise tracer.user_error(TypeError("Cannot add note: __notes__ is not a list"))
        notes.items.append(note)
        return NONE
    if name == "__init__":
        init_exception(tracer, exception, args, kwargs)
        return NONE
    return ConstantValue(text_of(tracer, exception, str if name == "__str__" else repr))


def text_of(tracer: "Tracer", exception: ExceptionValue, conversion: Any) -> str:
    """`str(exception)` or `repr(exception)` by the builtin methods of its class (a Python
    `__str__` of a user class is inlined before this is asked)."""
    from ..interpreter import calls

    def text(function: Any, value: Value) -> str:
        return operations.python_value(tracer, calls.call_value(tracer, ConstantValue(function), [value], {}))

    args = exception.args
    name = exception.cls.__name__
    if conversion is repr:
        if len(args) == 1:
            return f"{name}({text(repr, args[0])})"
        return name + text(repr, SequenceValue(list(args), tuple))
    owner = next(klass for klass in exception.cls.__mro__ if "__str__" in klass.__dict__)
    if owner is BaseException or owner is KeyError and len(args) != 1:
        if not args:
            return ""
        return text(str, args[0]) if len(args) == 1 else text(str, SequenceValue(list(args), tuple))
    if owner is KeyError:
        return text(repr, args[0])
    real = exception.obj if exception.obj is not None else as_real(tracer, exception)
    if real is None:
        raise tracer.graph_break(gb.UNSUPPORTED_OPERATION, f"str({exception!r})", op="str()",
                                 types=f"`{name}` whose arguments are not constants")
    return str(real)


# -- raising and handling -------------------------------------------------------------------


def to_raise(tracer: "Tracer", value: Value, what: str = "exceptions") -> ExceptionValue:
    """What `raise value` raises (CPython's do_raise): a class is called with no arguments."""
    from ..interpreter import calls

    if isinstance(value, ConstantValue) and is_exception_class(value.value):
        made = calls.call_value(tracer, value, [], {})
        if not isinstance(made, ExceptionValue):
            raise tracer.user_error(TypeError(
                f"calling {value.value!r} should have returned an instance of BaseException, "
                f"not {made.python_type().__name__}"))
        return made
    if isinstance(value, ExceptionValue):
        return value
    if isinstance(value, ConstantValue) and isinstance(value.value, BaseException):
        return from_error(tracer, value.value)
    if what == "causes":
        raise tracer.user_error(TypeError("exception causes must derive from BaseException"))
    raise tracer.user_error(TypeError("exceptions must derive from BaseException"))


def set_cause(tracer: "Tracer", exception: ExceptionValue, cause: Value) -> None:
    """`raise exception from cause`: the cause (None, or an exception or its class); the
    context is then suppressed when a traceback is shown."""
    exception.cause = NONE if operations.is_none(cause) else to_raise(tracer, cause, "causes")
    exception.suppress_context = True


def raised(tracer: "Tracer", exception: ExceptionValue, debug_context: str) -> UserException:
    """The exception to propagate when the program raises `exception` afresh (not a re-raise):
    it takes the exception being handled as its `__context__`, cutting any cycle that would
    make (CPython's _PyErr_SetObject)."""
    set_context(exception, tracer.handled.current())
    return UserException(exception, debug_context, tracer.positions())


def set_context(exception: Value, handled: Value) -> None:
    """`exception` takes `handled` (an exception being handled, or None) as its `__context__`,
    cutting any cycle that would make."""
    if isinstance(exception, ExceptionValue) and isinstance(handled, ExceptionValue) and handled is not exception:
        _cut_cycle(handled, exception)
        exception.context = handled


def _cut_cycle(handled: ExceptionValue, exception: ExceptionValue) -> None:
    """Where `exception` already appears in the context chain of `handled`, end the chain
    before it; a cycle already in the chain is walked once (Floyd's algorithm, as CPython)."""
    current, slow, toggle = handled, handled, False
    while isinstance(current.context, ExceptionValue):
        if current.context is exception:
            current.context = NONE
            return
        current = current.context
        if current is slow:
            return
        if toggle:
            slow = slow.context
        toggle = not toggle


def reraise(tracer: "Tracer", exception: Value, debug_context: str) -> UserException:
    """The exception to propagate for a re-raise (bare `raise`, RERAISE): no new context, and
    no traceback entry for the frame re-raising it."""
    propagated = UserException(exception, debug_context, tracer.positions())
    propagated.in_traceback = True
    return propagated


def add_traceback(propagated: UserException, frame: Any) -> None:
    """The exception passes through `frame`: an entry for it heads the traceback (tb_next
    goes to the inner frames), unless the frame re-raised it."""
    if propagated.in_traceback:
        propagated.in_traceback = False
        return
    exception = propagated.value
    if isinstance(exception, ExceptionValue):
        exception.traceback = TracebackValue(frame.code, frame.lineno, exception.traceback)


def matches(tracer: "Tracer", exception: Value, handler: Value) -> bool:
    """Whether `except handler:` catches `exception` (a class, or a tuple of them)."""
    wanted = operations.python_value(tracer, handler, "an `except` clause")
    for cls in wanted if isinstance(wanted, tuple) else (wanted,):
        if not is_exception_class(cls):
            raise tracer.user_error(TypeError(
                "catching classes that do not inherit from BaseException is not allowed"))
    return issubclass(exception.python_type(), wanted)


def caught(raised_error: UserException, classes_caught: type | tuple[type, ...]) -> bool:
    """Whether an exception the tracer propagates is one of `classes_caught` (for the code
    here that catches as Python does: `hasattr`, `next(it, default)`, iteration's end)."""
    return issubclass(raised_error.value.python_type(), classes_caught)


# -- tracebacks -----------------------------------------------------------------------------


def traceback_attribute(tracer: "Tracer", entry: TracebackValue, name: str) -> Value | None:
    if name == "tb_next":
        return entry.next
    if name == "tb_lineno":
        return ConstantValue(entry.lineno)
    if name in ("tb_frame", "tb_lasti"):
        raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"traceback.{name}", name=name,
                                 type="traceback of an exception raised in the compiled region")
    return None


def _extract_tb(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`traceback.extract_tb(tb)` of a traceback made in the region: its entries' lines."""
    positions, entry = [], args[0] if args else NONE
    while isinstance(entry, TracebackValue):
        positions.append((entry.code, entry.lineno))
        entry = entry.next
    return tracer.wrap(traceback.StackSummary.from_list(gb.frame_summaries(positions)), None)


def _clear_frames(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    # The frames of a traceback made in the region are the tracer's: none of the program's to
    # clear (unittest's assertRaises clears them to free their locals).
    return NONE


def _exc_info(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    current = tracer.handled.current()
    if operations.is_none(current):
        return SequenceValue([NONE, NONE, NONE], tuple)
    return SequenceValue([classes.class_value(current.python_type()), current,
                          getattr(current, "traceback", NONE)], tuple)


def _exception(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    return tracer.handled.current()


HANDLERS = {traceback.clear_frames: _clear_frames, traceback.extract_tb: _extract_tb, sys.exc_info: _exc_info}
if hasattr(sys, "exception"):
    HANDLERS[sys.exception] = _exception
