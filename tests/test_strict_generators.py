"""Generators made in a compiled region whose timing the tracer cannot reproduce break the
graph, never run their cleanup at the wrong moment."""
import itertools

import pytest
import torch

import graphwright


def _numbers(log):
    try:
        yield 1
        yield 2
    finally:
        log.append("closed")  # runs when Python collects the generator


def test_generator_left_early_is_closed_where_python_collects_it():
    def first_only(x, log):
        for number in _numbers(log):
            break  # the loop's iterator is dropped here: CPython closes the generator now
        log.append("after the loop")
        return x * number

    eager_log, compiled_log = [], []
    expected = first_only(torch.ones(2), eager_log)
    result = graphwright.compile(first_only, backend="eager", fullgraph=True)(torch.ones(2), compiled_log)
    assert torch.equal(result, expected) and compiled_log == eager_log == ["closed", "after the loop"]


def test_generator_held_by_a_local_is_closed_when_the_function_returns():
    def keep(x, log):
        numbers = _numbers(log)
        first = next(numbers)
        log.append("before return")
        return x * first

    eager_log, compiled_log = [], []
    expected = keep(torch.ones(2), eager_log)
    result = graphwright.compile(keep, backend="eager", fullgraph=True)(torch.ones(2), compiled_log)
    assert torch.equal(result, expected) and compiled_log == eager_log == ["before return", "closed"]


def test_generator_dropped_with_the_enumerate_over_it_is_closed_there():
    def counted(x, log):
        for _, number in enumerate(_numbers(log)):
            break  # the enumerate, and the generator it holds, are dropped here
        log.append("after the loop")
        return x * number

    eager_log, compiled_log = [], []
    expected = counted(torch.ones(2), eager_log)
    result = graphwright.compile(counted, backend="eager", fullgraph=True)(torch.ones(2), compiled_log)
    assert torch.equal(result, expected) and compiled_log == eager_log == ["closed", "after the loop"]


def test_generator_dropped_inside_an_iterator_the_tracer_cannot_see_into_breaks_the_graph():
    def counted(x, log):
        for number in itertools.takewhile(bool, _numbers(log)):
            break  # the takewhile, and the generator it holds, are dropped here
        return x * number

    with pytest.raises(graphwright.Unsupported, match="left suspended inside a `try`/`with` block"):
        graphwright.compile(counted, backend="eager", fullgraph=True)(torch.ones(2), [])
    log = []
    result = graphwright.compile(counted, backend="eager")(torch.ones(2), log)
    assert torch.equal(result, torch.ones(2)) and log == ["closed"]


def test_generator_finished_or_suspended_outside_try_is_fine():
    def numbers():
        yield 1
        yield 2

    def closed_numbers():
        try:
            yield 1
        finally:
            pass

    def use(x):
        first = next(numbers())  # suspended, but no cleanup is pending
        return x * first + sum(closed_numbers())

    assert torch.equal(graphwright.compile(use, backend="eager", fullgraph=True)(torch.ones(2)),
                       torch.full((2,), 2.0))


def test_generator_dropped_inside_a_zip_is_closed_there():
    def zipped(x, log):
        for number, _ in zip(_numbers(log), [0, 0]):
            break  # the zip, and the generator it holds, are dropped here
        log.append("after the loop")
        return x * number

    eager_log, compiled_log = [], []
    expected = zipped(torch.ones(2), eager_log)
    result = graphwright.compile(zipped, backend="eager", fullgraph=True)(torch.ones(2), compiled_log)
    assert torch.equal(result, expected) and compiled_log == eager_log == ["closed", "after the loop"]


def test_tracing_generators_keeps_no_tracer_alive():
    import gc

    from graphwright.strict.interpreter.tracer import Tracer

    def numbers(t):
        yield t
        yield t * 2

    def total(x):
        return sum(numbers(x))

    graphwright.compile(total, backend="eager")(torch.ones(2))
    graphwright.reset()
    gc.collect()
    assert not [obj for obj in gc.get_objects() if isinstance(obj, Tracer)]
