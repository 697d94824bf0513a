"""Corpus programs for generators made in the compiled region: `send`, `throw` and `close`,
`yield from` a subgenerator (values sent and exceptions thrown through it), generators
left suspended inside `try`/`with` blocks (closed where Python collects them), and
generators returned from the region, suspended where the trace left them."""
from __future__ import annotations

import contextlib
import itertools

import torch

from .harness import program_decorator, rand
from .markers import graph_break

PROGRAMS = []


program = program_decorator(PROGRAMS)


def _counting(t, log):
    try:
        log.append("start")
        received = yield t + 1
        log.append(("received", received))
        yield t * received
    finally:
        log.append("closed")


@program("send_values_into_a_generator", lambda: rand(3),
         reference={"why": "TorchDynamo (without enable_faithful_generator_behavior) never closes a "
                           "generator it drops",
                    "xfail": "finally block not run"})
def _(x):
    log = []
    numbers = _counting(x, log)
    first = next(numbers)
    second = numbers.send(3)
    return first + second, log


@program("throw_into_a_generator_caught_at_its_yield", lambda: rand(3))
def _(x):
    def guarded(t):
        while True:
            try:
                yield t
            except ValueError as error:
                t = t * len(str(error))

    numbers = guarded(x)
    next(numbers)
    after = numbers.throw(ValueError("abc"))
    numbers.close()
    return after


@program("throw_into_a_generator_that_does_not_catch_it", lambda: rand(3),
         reference={"why": "TorchDynamo's str() of a KeyError omits the quotes of its key",
                    "xfail": "str(KeyError) differs"})
def _(x):
    log = []
    numbers = _counting(x, log)
    next(numbers)
    try:
        numbers.throw(KeyError("k"))
    except KeyError as error:
        return x + 1, log, str(error)


@program("close_runs_finally_and_generator_exit_handlers", lambda: rand(3))
def _(x):
    log = []

    def careful(t):
        try:
            yield t
            yield t * 2
        except GeneratorExit:
            log.append("exit")
            raise
        finally:
            log.append("finally")

    numbers = careful(x)
    first = next(numbers)
    numbers.close()
    numbers.close()
    return first + 1, log, next(numbers, "exhausted")


@program("yield_from_forwards_send_and_returns_the_subgenerators_value", lambda: rand(3),
         reference={"why": "TorchDynamo cannot send into a generator delegating with yield from",
                    "xfail": "Unreachable sub-generator code"})
def _(x):
    def inner(t):
        got = yield t
        return got * 10

    def outer(t):
        result = yield from inner(t)
        yield t + result

    numbers = outer(x)
    first = next(numbers)
    second = numbers.send(2)
    return first, second


@program("throw_through_yield_from_reaches_the_subgenerator", lambda: rand(3),
         reference={"why": "TorchDynamo raises the thrown exception in the delegating generator",
                    "xfail": "throw not delegated"})
def _(x):
    log = []

    def inner(t):
        try:
            yield t
        except ValueError:
            log.append("inner caught")
            yield t * 3

    def outer(t):
        yield from inner(t)
        log.append("outer resumes")
        yield t * 5

    numbers = outer(x)
    next(numbers)
    thrown = numbers.throw(ValueError)
    rest = list(numbers)
    return thrown, rest, log


@program("close_through_yield_from_closes_the_subgenerator_first", lambda: rand(3),
         reference={"why": "TorchDynamo does not close the generator a yield from delegates to",
                    "xfail": "finally blocks not run"})
def _(x):
    log = []

    def inner(t):
        try:
            yield t
        finally:
            log.append("inner finally")

    def outer(t):
        try:
            yield from inner(t)
        finally:
            log.append("outer finally")

    numbers = outer(x)
    first = next(numbers)
    numbers.close()
    return first + 1, log


@program("generator_left_by_break_is_closed_before_the_next_statement", lambda: rand(3),
         reference={"why": "TorchDynamo (without enable_faithful_generator_behavior) never closes a "
                           "generator it drops",
                    "xfail": "finally block not run"})
def _(x):
    log = []
    for value in _counting(x, log):
        break
    log.append("after the loop")
    return value, log


@program("generator_in_a_local_is_closed_when_the_function_returns", lambda: (rand(3), []),
         reference={"why": "TorchDynamo (without enable_faithful_generator_behavior) never closes a "
                           "generator it drops",
                    "xfail": "finally block not run"})
def _(x, log):
    numbers = _counting(x, log)
    first = next(numbers)
    log.append("returning")
    return first * 2


@program("generator_suspended_inside_a_with_block_exits_it_when_closed", lambda: rand(3))
def _(x):
    log = []

    def scoped(t, manager):
        with manager:
            yield t
            yield t + 1

    manager = _Recording(log)
    numbers = scoped(x, manager)
    first = next(numbers)
    numbers.close()
    return first + 1, log


class _Recording:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, kind, value, traceback):
        self.log.append(("exit", kind.__name__ if kind else None))
        return False


@program("generator_returned_unstarted_runs_in_the_caller", lambda: rand(3), frames=0,
         reference={"why": "TorchDynamo makes a graph while rebuilding the generator", "frames": 1})
def _(x):
    def numbers(t):
        for i in range(3):
            yield t + i

    return numbers(x)


PROGRAMS[-1].call = lambda world, compiled, args: list(compiled(*args.args))


@program("generator_returned_after_advancing_continues_where_it_was", lambda: rand(3))
def _(x):
    def numbers(t):
        total = t
        for i in range(4):
            total = total + i
            yield total

    generator = numbers(x)
    next(generator)
    next(generator)
    return generator


PROGRAMS[-1].call = lambda world, compiled, args: list(compiled(*args.args))


@program("generator_returned_while_delegating_with_yield_from", lambda: rand(3),
         reference={"why": "TorchDynamo loses the return value of the subgenerator",
                    "xfail": "yield from evaluates to None"})
def _(x):
    def inner(t):
        yield t
        yield t * 2
        return t * 3

    def outer(t):
        last = yield from inner(t)
        yield last + 1

    generator = outer(x)
    next(generator)
    return generator, x.sin()


PROGRAMS[-1].call = lambda world, compiled, args: [list(item) if not isinstance(item, torch.Tensor) else item
                                                   for item in compiled(*args.args)]


@program("tee_of_a_generator_pulls_each_item_once_in_the_order_the_copies_ask", lambda: rand(3),
         reference={"why": "TorchDynamo's tee is a generator of its own, not an itertools._tee",
                    "xfail": "type(tee) differs"})
def _(x):
    log = []

    def scaled(t):
        for factor in range(1, 5):
            log.append(factor)
            yield t * factor

    first, second, third = itertools.tee(scaled(x), 3)
    ahead = [next(first), next(first)]
    behind = next(second)
    rest = [item + 1 for item in first]
    return sum(ahead) + behind + sum(rest) + next(third), list(log), type(second).__name__


@program("tee_over_a_long_range_keeps_a_deep_buffer", lambda: rand(3))
def _(x):
    leading, trailing = itertools.tee(iter(range(3000)))
    total = sum(leading)
    return x + total + next(trailing)


@program("graph_break_inside_a_generator_the_region_consumes", lambda: rand(3), fullgraph=False, frames=2,
         reference={"why": "TorchDynamo can neither resume inside a generator nor rebuild one: the whole "
                           "frame runs in Python", "frames": 0})
def _(x):
    log = []

    def numbers(t):
        log.append(("first", t.sum()))
        yield 1
        graph_break()
        log.append("second")
        yield 2

    gen = numbers(x * 2)
    total = next(gen)
    total += next(gen)
    return x + total, log


@program("graph_break_in_the_finally_block_of_a_context_manager", lambda: rand(3), fullgraph=False, frames=2,
         reference={"why": "TorchDynamo can neither resume inside a generator nor rebuild one: the whole "
                           "frame runs in Python", "frames": 0})
def _(x):
    log = []

    @contextlib.contextmanager
    def recorded(t):
        try:
            log.append(t.sin())
            yield t.cos()
        finally:
            graph_break()
            log.append(t.tan())

    manager = recorded(x)
    entered = manager.__enter__()
    manager.__exit__(None, None, None)
    return entered * 2, log


@program("tee_of_a_tee_is_that_tee_and_copies_at_its_position", lambda: rand(3),
         reference={"why": "TorchDynamo's tee of a tee pulls from it (advancing it) where CPython's "
                           "copies it", "xfail": "items differ"})
def _(x):
    first, second = itertools.tee(iter([x, x * 2, x * 3, x * 4]))
    head = next(first)
    same, copy = itertools.tee(first)
    return head, next(copy), next(copy), next(first), next(same), list(second), len(itertools.tee(copy, 0))


@program("exception_thrown_into_a_generator_takes_what_it_handles_as_context", lambda: rand(3),
         reference={"xfail": "the thrown exception takes the caller's handled exception as context",
                    "why": "PyTorch 2.13 chains to the caller's exception, not the generator's own"})
def _(x):
    def handling():
        try:
            raise KeyError("inside")
        except KeyError:
            yield x + 1

    def plain():
        yield x * 2

    contexts = []
    for make in (handling, plain):
        generator = make()
        next(generator)
        try:
            raise IndexError("caller")  # what the caller handles is not the generator's
        except IndexError:
            try:
                generator.throw(ValueError)
            except ValueError as error:
                contexts.append(type(error.__context__).__name__)
    return x, contexts
