"""Introspection of constant objects, run for real: `inspect` and `typing` helpers; and of
the region's own frames (`sys._getframe`).

Real code asks questions about functions and classes (`inspect.signature(func)`,
`inspect.isclass(obj)`, `typing.get_type_hints(cls)`). Where every argument is a real
object the region did not make or change (a function, a class, a module, a constant,
an object read by source), the helper runs now on those objects and its result is a
constant fact of the trace, as valid as the guards on the arguments. Interpreting
these helpers' own Python instead would be slow and would gain nothing.
An argument made or changed in the region is a graph break.

Library code asks for its caller's frame (`collections.namedtuple`, `typing.TypeVar` and
`enum` name their module after the caller's globals): a frame of an inlined function is a
`FrameValue` whose globals, code, line and locals are those of the interpreter's frame; a
frame outside the region (the compiled function's caller) is a graph break.
"""
from __future__ import annotations

import collections
import functools
import inspect
import sys
import types
import typing
from typing import TYPE_CHECKING, Any, Callable

from ..interpreter import graph_breaks as gb
from . import operations
from .values import (
    ConstantValue,
    DictValue,
    FrameValue,
    FunctionValue,
    ModuleValue,
    ObjectValue,
    PartialValue,
    SequenceValue,
    Value,
)

if TYPE_CHECKING:
    from ..interpreter.tracer import Tracer

_NOT_REAL = object()

# Helpers that only read the objects they are given (no frames, files or arguments' data).
INTROSPECTION_FUNCTIONS = (
    inspect.signature, inspect.getfullargspec, inspect.unwrap, inspect.getmro, inspect.getdoc,
    inspect.getmodule, inspect.getattr_static, inspect.get_annotations, inspect.cleandoc,
    inspect.isclass, inspect.isfunction, inspect.ismethod, inspect.ismodule, inspect.isbuiltin,
    inspect.isroutine, inspect.isabstract, inspect.ismethoddescriptor, inspect.isdatadescriptor,
    inspect.isgeneratorfunction, inspect.iscoroutinefunction, inspect.isasyncgenfunction,
    typing.get_type_hints, typing.get_origin, typing.get_args,
)


def real_object(tracer: "Tracer", value: Value) -> Any:
    """The real object behind `value`, or `_NOT_REAL` when the region made or changed it."""
    if isinstance(value, ConstantValue):
        return _NOT_REAL if operations.is_symbolic(value) else value.value
    if isinstance(value, FunctionValue):
        if value.fn is None:
            return _NOT_REAL
        if value.bound_self is None:
            return value.fn
        receiver = real_object(tracer, value.bound_self)
        return _NOT_REAL if receiver is _NOT_REAL else types.MethodType(value.fn, receiver)
    if isinstance(value, ObjectValue):
        return _NOT_REAL if value.obj is None or value.overlay else value.obj
    if isinstance(value, ModuleValue):
        return _NOT_REAL if value.overlay else value.module
    if isinstance(value, (SequenceValue, DictValue)) and operations.is_constant_tree(value):
        return operations.python_value(tracer, value)
    if isinstance(value, PartialValue):
        real = tracer.real_by_value.get(id(value))
        if real is not None:
            return real
        parts = [real_object(tracer, part) for part in [value.func, *value.args, *value.keywords.values()]]
        if any(part is _NOT_REAL for part in parts):
            return _NOT_REAL
        return functools.partial(*parts[:1 + len(value.args)], **dict(zip(value.keywords, parts[1 + len(value.args):])))
    return _NOT_REAL


def run_for_real(tracer: "Tracer", target: Callable, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`target(*args, **kwargs)` on the real objects; its result is a constant fact."""
    name = f"{target.__module__}.{target.__qualname__}"
    real_args = [real_object(tracer, arg) for arg in args]
    real_kwargs = {key: real_object(tracer, arg) for key, arg in kwargs.items()}
    for value, real in [*zip(args, real_args), *zip(kwargs.values(), real_kwargs.values())]:
        if real is _NOT_REAL:
            raise tracer.graph_break(gb.UNSUPPORTED_BUILTIN, f"{name} on {value!r}", name=name,
                                     types=f"`{value.python_type().__name__}` made or changed in the region")
    try:
        result = target(*real_args, **real_kwargs)
    except Exception as error:
        raise tracer.user_error(error, f"{name}(...)")
    return tracer.wrap(result, None)


def get_frame(tracer: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """`sys._getframe(depth)`: the frame `depth` calls up from the one calling it."""
    depth = operations.python_value(tracer, args[0]) if args else 0
    if not isinstance(depth, int):
        raise tracer.user_error(TypeError(f"'{type(depth).__name__}' object cannot be interpreted as an integer"))
    return _frame_at(tracer, len(tracer.frames) - 1 - depth, f"sys._getframe({depth})")


def _frame_at(tracer: "Tracer", index: int, what: str) -> Value:
    if index < 0:
        raise tracer.graph_break(gb.UNSUPPORTED_BUILTIN, f"{what} outside the region", name=what,
                                 types="a frame outside the compiled region")
    return FrameValue(tracer.frames[index])


def frame_attribute(tracer: "Tracer", value: FrameValue, name: str) -> Value | None:
    """`frame.f_globals`, `f_locals` (the locals bound now, a snapshot as in CPython 3.11),
    `f_code`, `f_lineno`, `f_back`, `f_builtins`; any other attribute of a frame is a graph break."""
    from ..guards.sources import ConstantSource

    frame = value.frame
    if name in ("f_globals", "f_builtins"):
        namespace = frame.globals if name == "f_globals" else frame.builtins()
        return tracer.wrap(namespace, ConstantSource(id(namespace), namespace))
    if name == "f_code":
        return ConstantValue(frame.code)
    if name == "f_lineno":
        return ConstantValue(frame.lineno)
    if name == "f_back":
        return _frame_at(tracer, tracer.frames.index(frame) - 1, "frame.f_back")
    if name == "f_locals":
        bound = {local: frame.local(local) for local in frame.code.co_varnames}
        bound.update({cell: tracer.cell_contents(frame.cells[cell]) for cell in frame.code.co_cellvars
                      if cell in frame.cells and frame.cells[cell].contents is not None})
        return DictValue({local: item for local, item in bound.items() if item is not None})
    if hasattr(types.FrameType, name):
        raise tracer.graph_break(gb.UNSUPPORTED_ATTRIBUTE, f"frame.{name}", name=name, type="frame")
    return None


def make_class(tracer: "Tracer", factory: Callable, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """A class made from constants by a factory of the standard library (`collections.namedtuple`,
    the functional API of `enum.Enum`): made now, for real, as the tracer does not interpret
    the `eval` and class creation they run, and made again by the residual code where it leaves
    the region (`class_statements.run_factory`). It is named after the calling frame's module,
    as the factory would name it from its own caller's frame."""
    from .class_statements import run_factory

    module = ConstantValue(tracer.frames[-1].globals.get("__name__", "__main__"))
    return run_factory(tracer, factory, args, {"module": module, **kwargs})


def enum_call(tracer: "Tracer", cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """`SomeEnum(value)` (a member) or `Enum(name, members)` (a new enum class) on constants, run
    for real; None when an argument was made in the region."""
    if not all(operations.is_constant_tree(arg) for arg in [*args, *kwargs.values()]):
        return None
    if len(args) > 1 or "names" in kwargs:
        return make_class(tracer, cls, args, kwargs)
    return run_for_real(tracer, cls, args, kwargs)


def is_subclasses_query(target: Any) -> bool:
    """`cls.__subclasses__` of a class (a builtin method bound to it)."""
    return isinstance(target, types.BuiltinMethodType) and target.__name__ == "__subclasses__" \
        and isinstance(target.__self__, type)


def subclasses(tracer: "Tracer", target: Any) -> Value:
    """`cls.__subclasses__()` (libraries find their backends so): the classes now, guarded on
    the class's subclasses staying the same."""
    from ..guards.sources import ConstantSource

    found = tuple(target())
    tracer.add_guard(ConstantSource(id(target.__self__), target.__self__), "subclasses", found)
    return SequenceValue([tracer.wrap(klass, ConstantSource(id(klass), klass)) for klass in found], list)


HANDLERS: dict[Any, Callable] = {
    target: lambda tracer, args, kwargs, target=target: run_for_real(tracer, target, args, kwargs)
    for target in INTROSPECTION_FUNCTIONS
}
HANDLERS[sys._getframe] = get_frame
HANDLERS[collections.namedtuple] = lambda tracer, args, kwargs: make_class(tracer, collections.namedtuple, args, kwargs)
