"""Generators made in the region, run lazily as Python runs them.

Calling a generator function (or evaluating a generator expression) binds its
arguments and makes a `GeneratorValue` around a `GeneratorFrame` that has not
started. Each `next()` (a `for` loop, `next`, `list`, a `yield from` in another
generator) resumes the frame until its next `yield`, so the generator's side
effects interleave with its consumer's exactly as they do in Python. `send`,
`throw` and `close` resume it the way CPython does. A `yield` unwinds
`Frame.run` with `Yielded`; the frame keeps its position and stack, so the
next resume simply runs it again.

A generator left suspended inside a `try`/`with` block when the compiled
function returns would run its cleanup when CPython collects it, at a moment
the tracer cannot place: that is a graph break (`check_left_suspended`).
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from ..objects.values import NONE, ConstantValue, FunctionValue, GeneratorValue, Value
from . import graph_breaks as gb
from .frame import Frame
from .graph_breaks import UserException

if TYPE_CHECKING:
    from .tracer import Tracer

_MADE: "weakref.WeakKeyDictionary[Tracer, list[GeneratorValue]]" = weakref.WeakKeyDictionary()


class Yielded(Exception):
    """Unwinds `Frame.run` at a `yield`: control flow, not an error."""

    graphwright_user_stack = None  # nothing for Frame.run to record

    def __init__(self, value: Value) -> None:
        self.value = value


class GeneratorFrame(Frame):
    """The frame of a generator: a `yield` suspends it instead of breaking the graph."""

    def op_YIELD_VALUE(self, inst):
        raise Yielded(self.pop())


def make_generator(tracer: "Tracer", function: FunctionValue, local_values: dict[str, Value]) -> GeneratorValue:
    frame = GeneratorFrame(tracer, function.code, function.globals, local_values, function.closure)
    generator = GeneratorValue(frame)
    _MADE.setdefault(tracer, []).append(generator)
    return generator


def check_left_suspended(tracer: "Tracer") -> None:
    """At the compiled function's return: no generator may wait inside a `try`/`with` block,
    whose cleanup Python runs when the generator is collected."""
    for generator in _MADE.get(tracer, ()):
        frame = generator.frame
        if generator.started and not generator.done and frame.instructions[frame.index - 1].offset in frame.covered:
            name = frame.code.co_name
            raise tracer.graph_break(gb.GENERATOR, f"{name} left suspended in a try/with block",
                                     name=f"{name} (left suspended inside a `try`/`with` block, whose cleanup "
                                          "runs when Python collects it)")


def resume(generator: GeneratorValue, sent: Value, thrown: UserException | None = None) -> Value | None:
    """Run `generator` to its next `yield` and return the yielded value; None once it returns
    (its return value is kept in `returned`). `thrown` is raised at the suspended `yield`."""
    frame = generator.frame
    if generator.done:
        if thrown is not None:
            raise thrown
        return None
    if not generator.started:
        generator.started = True
        if thrown is not None:  # thrown into a generator that never ran: it ends there
            generator.done = True
            raise thrown
        if not (isinstance(sent, ConstantValue) and sent.value is None):
            raise frame.tracer.user_error(TypeError("can't send non-None value to a just-started generator"))
    elif thrown is not None:
        _raise_at_yield(frame, thrown)
    else:
        frame.push(sent)  # the value of the suspended `yield` expression
    try:
        frame.run()
    except Yielded as yielded:
        return yielded.value
    except UserException as raised:
        generator.done = True
        if isinstance(raised.value, ConstantValue) and isinstance(raised.value.value, StopIteration):
            raise frame.tracer.user_error(RuntimeError("generator raised StopIteration")) from None
        raise
    except BaseException:
        generator.done = True
        raise
    generator.done = True
    generator.returned = frame.result
    return None


def _raise_at_yield(frame: Frame, thrown: UserException) -> None:
    """Continue at the handler covering the suspended `yield`, as `generator.throw` does."""
    at_yield = frame.instructions[frame.index - 1]
    if frame.index >= 2 and frame.instructions[frame.index - 2].opname == "SEND":
        raise frame.tracer.graph_break(gb.GENERATOR, "throw into a generator inside `yield from`",
                                       name=f"{frame.code.co_name} (throw() while it delegates to another)")
    frame.unwind_to_handler(at_yield.offset, thrown)


def call_method(tracer: "Tracer", generator: GeneratorValue, name: str, args: list[Value]) -> Value:
    """`send`, `throw`, `close`, `__next__` and `__iter__` of a generator made in the region."""
    if name == "__iter__":
        return generator
    if name in ("send", "__next__"):
        item = resume(generator, args[0] if args else NONE)
        if item is None:
            raise _stop_iteration(tracer, generator)
        return item
    if name == "throw":
        exception = args[0].value if isinstance(args[0], ConstantValue) else None
        if isinstance(exception, type) and issubclass(exception, BaseException):
            exception = exception()
        if not isinstance(exception, BaseException):
            raise tracer.graph_break(gb.UNSUPPORTED_OPERATION, f"throw({args[0]!r})", op="generator.throw",
                                     types=args[0].python_type().__name__)
        item = resume(generator, NONE, tracer.user_error(exception))
        if item is None:
            raise _stop_iteration(tracer, generator)
        return item
    return _close(tracer, generator)


def _close(tracer: "Tracer", generator: GeneratorValue) -> Value:
    if not generator.started or generator.done:
        generator.done = True
        return NONE
    try:
        item = resume(generator, NONE, tracer.user_error(GeneratorExit()))
    except UserException as raised:
        if isinstance(raised.value, ConstantValue) and isinstance(raised.value.value, (GeneratorExit, StopIteration)):
            return NONE
        raise
    if item is not None:
        raise tracer.user_error(RuntimeError("generator ignored GeneratorExit"))
    return NONE


def delegate(tracer: "Tracer", receiver: Value, sent: Value) -> Value | None:
    """One step of `yield from receiver` (SEND): the next item, or None once it is exhausted."""
    if isinstance(receiver, GeneratorValue):
        return resume(receiver, sent)
    if not (isinstance(sent, ConstantValue) and sent.value is None):
        raise tracer.graph_break(gb.UNSUPPORTED_OPERATION, f"send to {receiver!r}", op="send()",
                                 types=receiver.python_type().__name__)
    return receiver.next_item()


def _stop_iteration(tracer: "Tracer", generator: GeneratorValue) -> Exception:
    returned = generator.returned
    if not isinstance(returned, ConstantValue):
        raise tracer.graph_break(gb.UNSUPPORTED_OPERATION, "StopIteration carrying a value",
                                 op="a generator's return value carried by StopIteration",
                                 types=returned.python_type().__name__)
    return tracer.user_error(StopIteration(returned.value))
