"""Generators made in the region, run lazily as Python runs them.

Calling a generator function (or evaluating a generator expression) binds its
arguments and makes a `GeneratorValue` around a `GeneratorFrame` that has not
started. Each `next()` (a `for` loop, `next`, `list`, a `yield from` in another
generator) resumes the frame until its next `yield`, so the generator's side
effects interleave with its consumer's exactly as they do in Python. `send`,
`throw` and `close` resume it the way CPython 3.11 does, delegating to the
iterator a `yield from` is suspended on; a generator has its own slot of handled
exceptions (gi_exc_state) while it runs. A `yield` unwinds `Frame.run` with
`Yielded`; the frame keeps its position and stack, so the next resume simply
runs it again.

A generator suspended inside a `try`/`with` block runs its cleanup when CPython
collects it: when the last reference goes (a `for` loop left early, a local
overwritten, a frame returning). The tracer closes such a generator where a
reference to it is dropped and nothing it can see holds it any more (`dropped`,
`finish`); where an iterator it cannot see into may hold it, that moment is
unknown: a graph break.
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from ..objects import classes, exceptions, operations
from ..objects.values import (
    NONE,
    CellValue,
    ConstantValue,
    DictValue,
    ExceptionValue,
    FunctionValue,
    GeneratorValue,
    IteratorValue,
    LazyIteratorValue,
    MethodValue,
    PartialValue,
    SequenceValue,
    SuperValue,
    TensorKey,
    Value,
)
from . import graph_breaks as gb
from .frame import Frame
from .graph_breaks import UserException

if TYPE_CHECKING:
    from .tracer import Tracer

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
    tracer.generators.append(generator)
    return generator


def _awaiting_cleanup(tracer: "Tracer") -> list[GeneratorValue]:
    """The generators whose collection Python makes visible (not running now): suspended inside
    a `try`/`with` block (their cleanup runs), or in a `yield from` an iterator that closing
    them closes (a generator that the program may still hold, a user iterator's `close()`)."""
    return [generator for generator in tracer.generators if generator.started and not generator.done
            and not generator.running
            and (generator.frame.instructions[generator.frame.index - 1].offset in generator.frame.covered
                 or _closes_delegate(tracer, generator))]


def _closes_delegate(tracer: "Tracer", generator: GeneratorValue) -> bool:
    receiver = _delegate_of(generator)
    if receiver is None:
        return False
    if isinstance(receiver, GeneratorValue):
        return not receiver.done
    return _method(tracer, receiver, "close") is not None


def dropped(tracer: "Tracer", values: list[Value], remaining: list[Value] = (),
            ending: Frame | None = None) -> None:
    """References to `values` went away (a popped iterator, a local overwritten, the frame
    `ending` returning): a generator among what they reach that awaits cleanup and that
    nothing else reaches any more is collected by CPython right there, which closes it.
    `remaining` are values still held that no frame shows (a frame's return value)."""
    waiting = _awaiting_cleanup(tracer)
    if not waiting:
        return
    candidates = _reached(values, {id(generator) for generator in waiting})
    if not candidates:  # none, or unknown (the tracer cannot see what an iterator holds)
        return
    held = _reached([*_held_by_tracer(tracer, ending), *remaining], candidates)
    if held is None:
        return  # perhaps still held: `finish` decides
    for generator in waiting:
        if id(generator) in candidates and id(generator) not in held:
            _close_collected(tracer, generator)


def finish(tracer: "Tracer", frame: Frame, result: Value) -> None:
    """The compiled function returns `result`: the generators awaiting cleanup that nothing
    holds any more are closed; one that leaves with the result or a side effect is rebuilt
    by the residual code; any other was dropped where the tracer could not tell: a break."""
    dropped(tracer, [*frame.locals.values(), *frame.cells.values(), *frame.stack], [result], frame)
    waiting = _awaiting_cleanup(tracer)
    if not waiting:
        return
    held = _reached([result, *_held_by_tracer(tracer, frame)], {id(generator) for generator in waiting})
    for generator in waiting:
        if held is None or id(generator) not in held:
            raise _left_suspended(tracer, generator)


def _left_suspended(tracer: "Tracer", generator: GeneratorValue) -> Exception:
    name = generator.frame.code.co_name
    return tracer.graph_break(gb.GENERATOR, f"{name} left suspended in a try/with block",
                              name=f"{name} (left suspended inside a `try`/`with` block, held by an iterator the "
                                   "tracer cannot see into, so the moment Python collects it is unknown)")


def _close_collected(tracer: "Tracer", generator: GeneratorValue) -> None:
    """CPython's finalizer: close(); what it raises is only printed ('Exception ignored'),
    which the tracer does not reproduce: a graph break."""
    try:
        close(tracer, generator)
    except UserException:
        name = generator.frame.code.co_name
        raise tracer.graph_break(gb.GENERATOR, f"{name} raised while collected",
                                 name=f"{name} (its cleanup raises when Python collects it)") from None


def _held_by_tracer(tracer: "Tracer", ending: Frame | None) -> list[Value]:
    """What the running frames (but `ending`) and the recorded side effects hold."""
    effects = tracer.side_effects
    held: list[Value] = [*effects.mutated.values(), *effects.cell_stores.values()]
    held += [value for _, _, value in effects.attribute_stores.values() if value is not None]
    held += [value for _, _, value in effects.global_stores.values()]
    held += [value for overlay in effects.shared_overlays.values() for value in overlay.values()]
    held += [arg for _, args, kwargs in effects.replayed_calls for arg in [*args, *kwargs.values()]]
    for frame in tracer.frames:
        if frame is not ending:
            held += [*frame.locals.values(), *frame.cells.values(), *frame.closure, *frame.stack]
    return held


def _reached(roots: list, targets: set[int]) -> set[int] | None:
    """Which of `targets` (ids of values) the values `roots` reach; None when they reach an
    iterator made by a helper (map, zip...) whose references the tracer cannot see."""
    found: set[int] = set()
    seen: set[int] = set()
    pending = list(roots)
    while pending:
        value = pending.pop()
        if not isinstance(value, Value) or id(value) in seen:
            continue
        seen.add(id(value))
        if id(value) in targets:
            found.add(id(value))
        children = _references(value)
        if children is None:
            return None
        pending += children
    return found


def _references(value: Value) -> list | None:
    """The values `value` holds (None: unknown, an iterator over a closure)."""
    if isinstance(value, GeneratorValue):
        frame = value.frame
        return [*frame.locals.values(), *frame.cells.values(), *frame.closure, *frame.stack]
    if isinstance(value, LazyIteratorValue):
        return None if value.parts is None else list(value.parts[1])
    held = list((getattr(value, "overlay", None) or {}).values())  # a tensor's is None until set
    if isinstance(value, SequenceValue):
        held += value.items
    elif isinstance(value, DictValue):
        held += [*value._items.values(), *(key.value for key in value._items if isinstance(key, TensorKey))]
    elif isinstance(value, ExceptionValue):
        held += [*value.args, value.cause, value.context]
    elif isinstance(value, FunctionValue):
        held += [*value.closure, *value.defaults, *value.kwdefaults.values(), value.bound_self,
                 *value.attributes.values(), *value.special.values()]
    elif isinstance(value, CellValue):
        held.append(value.contents)
    elif isinstance(value, PartialValue):
        held += [value.func, *value.args, *value.keywords.values()]
    elif isinstance(value, (MethodValue, SuperValue)):
        held.append(value.receiver)
    elif isinstance(value, IteratorValue):
        held += value.items[value.position:]
    return held


def resume(generator: GeneratorValue, sent: Value, thrown: UserException | None = None) -> Value | None:
    """Run `generator` to its next `yield` and return the yielded value; None once it returns
    (its return value is kept in `returned`). `thrown` is raised at the suspended `yield`."""
    frame = generator.frame
    tracer = frame.tracer
    if generator.running:
        raise tracer.user_error(ValueError("generator already executing"))
    if generator.done:
        if thrown is not None:
            raise thrown
        return None
    if not generator.started:
        generator.started = True
        if thrown is not None:  # thrown into a generator that never ran: it ends there
            generator.done = True
            raise thrown
        if not operations.is_none(sent):
            raise tracer.user_error(TypeError("can't send non-None value to a just-started generator"))
    elif thrown is None:
        frame.push(sent)  # the value of the suspended `yield` expression
    tracer.handled.slots.append(generator.handled)
    generator.running = True
    try:
        if thrown is not None:
            # raised where the generator is suspended, the exception takes the one the
            # generator itself is handling there as its context (CPython's _PyErr_ChainStackItem)
            exceptions.set_context(thrown.value, generator.handled)
            _raise_at_yield(frame, thrown)
        frame.run()
    except Yielded as yielded:
        return yielded.value
    except UserException as raised:
        generator.done = True
        if exceptions.caught(raised, StopIteration):
            raise _stop_iteration_escaped(tracer, raised) from None
        raise
    except BaseException:
        generator.done = True
        raise
    finally:
        generator.running = False
        generator.handled = tracer.handled.slots.pop()
    generator.done = True
    generator.returned = frame.result
    return None


def _stop_iteration_escaped(tracer: "Tracer", raised: UserException) -> UserException:
    """PEP 479: a StopIteration leaving a generator's body becomes a RuntimeError caused by it."""
    error = exceptions.from_error(tracer, RuntimeError("generator raised StopIteration"))
    error.cause = error.context = raised.value
    error.suppress_context = True
    return UserException(error, "generator raised StopIteration", raised.positions)


def _raise_at_yield(frame: Frame, thrown: UserException) -> None:
    """Continue at the handler covering the suspended `yield`, as `generator.throw` does."""
    exceptions.add_traceback(thrown, frame)
    frame.unwind_to_handler(frame.instructions[frame.index - 1].offset, thrown)


def call_method(tracer: "Tracer", generator: GeneratorValue, name: str, args: list[Value]) -> Value:
    """`send`, `throw`, `close`, `__next__` and `__iter__` of a generator made in the region."""
    if name == "__iter__":
        return generator
    if name in ("send", "__next__"):
        item = resume(generator, args[0] if args else NONE)
    elif name == "throw":
        item = throw(tracer, generator, thrown_exception(tracer, args))
    else:
        return close(tracer, generator)
    if item is None:
        raise _stop_iteration(tracer, generator)
    return item


def thrown_exception(tracer: "Tracer", args: list[Value]) -> UserException:
    """The exception `throw(type[, value])` or `throw(instance)` raises in the generator (as
    given: not chained to what the caller handles)."""
    if not args:
        raise tracer.user_error(TypeError("throw expected at least 1 argument, got 0"))
    first = args[0]
    value = args[1] if len(args) > 1 else NONE
    if isinstance(first, ExceptionValue):
        if not operations.is_none(value):
            raise tracer.user_error(TypeError("instance exception may not have a separate value"))
        exception = first
    elif isinstance(first, ConstantValue) and exceptions.is_exception_class(first.value):
        if isinstance(value, ExceptionValue) and issubclass(value.cls, first.value):
            exception = value
        else:
            from . import calls

            arguments = [] if operations.is_none(value) else [value]
            exception = exceptions.to_raise(tracer, calls.call_value(tracer, first, arguments, {}))
    else:
        raise tracer.user_error(TypeError(
            "exceptions must be classes or instances deriving from BaseException, "
            f"not {first.python_type().__name__}"))
    return UserException(exception, f"throw {exception.cls.__name__}", tracer.positions())


def throw(tracer: "Tracer", generator: GeneratorValue, thrown: UserException) -> Value | None:
    """`generator.throw(...)`: into the iterator a `yield from` is suspended on first, as
    CPython's _gen_throw does; what it raises (or its return value) goes on in the generator."""
    receiver = _delegate_of(generator)
    if receiver is None:
        return resume(generator, NONE, thrown)
    if exceptions.caught(thrown, GeneratorExit):
        try:
            _close_iterator(tracer, receiver)
        except UserException as raised:
            thrown = raised
        return resume(generator, NONE, thrown)
    method = None if isinstance(receiver, GeneratorValue) else _method(tracer, receiver, "throw")
    if method is None and not isinstance(receiver, GeneratorValue):
        return resume(generator, NONE, thrown)  # an iterator without throw(): raised here
    try:
        if method is None:
            item = throw(tracer, receiver, thrown)
        else:
            exception = thrown.value
            item = _call(tracer, method, [classes.class_value(exception.python_type()), exception,
                                          exception.traceback])
    except UserException as raised:
        return _leave_delegation(tracer, generator, raised)
    if item is None:  # the subgenerator returned
        return _leave_delegation(tracer, generator, None, receiver.returned)
    return item


def _leave_delegation(tracer: "Tracer", generator: GeneratorValue, raised: UserException | None,
                      returned: Value = NONE) -> Value | None:
    """The delegated-to iterator is finished: the `yield from` ends with its return value (or
    StopIteration's), or what it raised is raised in the generator."""
    frame = generator.frame
    send = frame.instructions[frame.index - 2]
    frame.stack.pop()
    if raised is not None and not exceptions.caught(raised, StopIteration):
        return resume(generator, NONE, raised)
    if raised is not None:
        returned = exceptions.read_slot(tracer, raised.value, StopIteration, "value")
    frame.jump_to(send.argval)
    return resume(generator, returned)


def _delegate_of(generator: GeneratorValue) -> Value | None:
    """The iterator the generator's `yield from` is suspended on, or None."""
    frame = generator.frame
    if not generator.started or generator.done or frame.index < 2:
        return None
    if frame.instructions[frame.index - 2].opname != "SEND":
        return None
    return frame.stack[-1]


def close(tracer: "Tracer", generator: GeneratorValue) -> Value:
    """`generator.close()`: GeneratorExit raised at the suspended `yield` (after closing what a
    `yield from` delegates to); ignoring it by yielding again is a RuntimeError."""
    if not generator.started or generator.done:
        generator.done = True
        return NONE
    thrown = None
    receiver = _delegate_of(generator)
    if receiver is not None:
        try:
            _close_iterator(tracer, receiver)
        except UserException as raised:
            thrown = raised
    if thrown is None:
        exit_value = exceptions.from_error(tracer, GeneratorExit())
        thrown = UserException(exit_value, "close", tracer.positions())
    try:
        item = resume(generator, NONE, thrown)
    except UserException as raised:
        if exceptions.caught(raised, (GeneratorExit, StopIteration)):
            return NONE
        raise
    if item is not None:
        raise tracer.user_error(RuntimeError("generator ignored GeneratorExit"))
    # Python 3.13 returns what the generator returned on GeneratorExit; 3.11 returns None
    return generator.returned if sys.version_info >= (3, 13) else NONE


def _close_iterator(tracer: "Tracer", iterator: Value) -> None:
    """Close what a `yield from` delegates to: a generator, or an object with `close()`."""
    if isinstance(iterator, GeneratorValue):
        close(tracer, iterator)
        return
    method = _method(tracer, iterator, "close")
    if method is not None:
        _call(tracer, method, [])


def _method(tracer: "Tracer", receiver: Value, name: str) -> Value | None:
    """The bound method `name` of a user iterator, or None (a builtin iterator has none)."""
    if not classes.is_instance_value(receiver):
        return None
    from ..objects import attributes

    return attributes.lookup(tracer, receiver, name)


def _call(tracer: "Tracer", function: Value, args: list[Value]) -> Value:
    from . import calls

    return calls.call_value(tracer, function, args, {})


def delegate(tracer: "Tracer", receiver: Value, sent: Value) -> tuple[Value | None, Value]:
    """One step of `yield from receiver` (SEND): (the next item, NONE), or (None, what the
    iterator returned) once it is exhausted: a generator's return value, the value of a user
    iterator's StopIteration, None for a builtin iterator."""
    if isinstance(receiver, GeneratorValue):
        item = resume(receiver, sent)
        return item, NONE if item is not None else receiver.returned
    if operations.is_none(sent) and not classes.is_instance_value(receiver):
        return receiver.next_item(), NONE
    method = _method(tracer, receiver, "__next__" if operations.is_none(sent) else "send")
    if method is None:
        raise tracer.graph_break(gb.UNSUPPORTED_OPERATION, f"send to {receiver!r}", op="send()",
                                 types=receiver.python_type().__name__)
    try:
        return _call(tracer, method, [] if operations.is_none(sent) else [sent]), NONE
    except UserException as raised:
        if not exceptions.caught(raised, StopIteration):
            raise
        return None, exceptions.read_slot(tracer, raised.value, StopIteration, "value")


def _stop_iteration(tracer: "Tracer", generator: GeneratorValue) -> Exception:
    """StopIteration carrying the generator's return value (none when it returned None)."""
    returned = generator.returned
    args = [] if operations.is_none(returned) else [returned]
    return exceptions.raised(tracer, exceptions.new_exception(StopIteration, args), "StopIteration")
