"""Generators made in a compiled region whose timing the tracer cannot reproduce break the
graph, never run their cleanup at the wrong moment."""
import pytest
import torch

import graphwright


def test_generator_left_suspended_inside_try_finally_breaks_the_graph():
    log = []

    def numbers():
        try:
            yield 1
            yield 2
        finally:
            log.append("closed")  # runs when Python collects the generator

    def first_only(x):
        for number in numbers():
            return x * number

    with pytest.raises(graphwright.Unsupported, match="left suspended inside a `try`/`with` block"):
        graphwright.compile(first_only, backend="eager", fullgraph=True)(torch.ones(2))
    log.clear()
    result = graphwright.compile(first_only, backend="eager")(torch.ones(2))
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
