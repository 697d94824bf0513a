"""Python's iterator helpers go on after their input raises: `next()` asks the input again.

`map`, `zip`, `enumerate`, `filter` and `itertools`' helpers are C iterators: an exception
from their input (or from the function `map` calls) passes through them and leaves them
usable, where a Python generator would be finished by it. Each program here takes items from
a helper over an input that raises once, catching the exception inside the compiled region,
and then takes the rest: the items, the log of the input and the exceptions are eager's.
"""
from __future__ import annotations

import itertools

import pytest
import torch

import graphwright

LOG = []


class Hiccup(Exception):
    """Raised once by the input, at a chosen item."""


class Hiccuping:
    """A user iterator over 0..count-1 whose `__next__` raises once, at `fail_at`, and then
    goes on with the same item."""

    def __init__(self, count=5, fail_at=1):
        self.next, self.count, self.fail_at = 0, count, fail_at

    def __iter__(self):
        return self

    def __next__(self):
        if self.next == self.fail_at:
            self.fail_at = None
            LOG.append("raised")
            raise Hiccup(self.next)
        if self.next == self.count:
            raise StopIteration
        LOG.append(self.next)
        self.next += 1
        return self.next - 1


def _raising_once():
    state = {"raised": False}

    def double(n):
        if n == 2 and not state["raised"]:
            state["raised"] = True
            raise ValueError(n)
        return n * 2
    return double


HELPERS = {
    "map": lambda: map(lambda n: n + 10, Hiccuping()),
    "map_whose_function_raises": lambda: map(_raising_once(), iter(range(5))),
    "filter": lambda: filter(lambda n: n % 2 == 0, Hiccuping()),
    "zip": lambda: zip(Hiccuping(), "abcde"),
    "zip_second_input": lambda: zip("abcde", Hiccuping()),
    "zip_strict": lambda: zip(Hiccuping(), range(5), strict=True),
    "enumerate": lambda: enumerate(Hiccuping(), 3),
    "chain": lambda: itertools.chain([7], Hiccuping(), [8]),
    "chain_from_iterable": lambda: itertools.chain.from_iterable([[7], Hiccuping()]),
    "islice": lambda: itertools.islice(Hiccuping(), 1, 4),
    "accumulate": lambda: itertools.accumulate(Hiccuping()),
    "zip_longest": lambda: itertools.zip_longest(Hiccuping(), "ab"),
    "takewhile": lambda: itertools.takewhile(lambda n: n < 3, Hiccuping()),
    "dropwhile": lambda: itertools.dropwhile(lambda n: n < 1, Hiccuping()),
    "starmap": lambda: itertools.starmap(lambda a, b: a * b, zip(Hiccuping(), range(5))),
    "compress": lambda: itertools.compress(Hiccuping(), [1, 0, 1, 1, 1]),
    "pairwise": lambda: itertools.pairwise(Hiccuping()),
    "cycle": lambda: itertools.islice(itertools.cycle(Hiccuping(count=3)), 7),
    "tee": lambda: itertools.tee(Hiccuping())[0],
}


def _program(make):
    def program(x):
        LOG.clear()
        it = make()
        taken = []
        for _ in range(12):
            try:
                taken.append(next(it))
            except StopIteration:
                taken.append("end")
                break
            except (Hiccup, ValueError) as error:
                taken.append((type(error).__name__, error.args))
        return x + len(taken), taken, list(LOG)
    return program


def _check(program, backend="eager"):
    expected = program(torch.ones(2))
    graphwright.reset()
    compiled = graphwright.compile(program, backend=backend, fullgraph=True)(torch.ones(2))
    assert torch.equal(compiled[0], expected[0])
    assert compiled[1:] == expected[1:], f"eager: {expected[1:]}; compiled: {compiled[1:]}"
    return expected


@pytest.mark.parametrize("helper", HELPERS)
def test_helper_goes_on_after_its_input_raised(helper):
    taken = _check(_program(HELPERS[helper]))[1]
    assert "end" in taken, taken
    assert any(isinstance(item, tuple) and item[0] in ("Hiccup", "ValueError") for item in taken), taken


@pytest.mark.parametrize("helper", ["map", "zip_strict", "enumerate"])
def test_under_aot_eager(helper):
    _check(_program(HELPERS[helper]), backend="aot_eager")


def test_any_then_list_of_the_same_map_asks_the_input_again():
    """The program the fuzzer found: `any` over a map whose input raises, then `list` of it."""
    def program(x):
        LOG.clear()
        it = map(lambda n: n + 1, Hiccuping(fail_at=0))
        try:
            found = any(n == 1 for n in it)
        except Hiccup:
            found = "raised"
        return x * 2, found, list(it), list(LOG)

    assert _check(program)[1] == "raised"
