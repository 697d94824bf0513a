"""Found by the program generator (seed 20261, program 39): mismatch under eager.

    call 3 observed['TRACE']: length 23 != 24
"""
import copy
import dataclasses
import functools
import itertools

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import graphwright as gw


mod0 = nn.LayerNorm(2)


TRACE = []


class Halt(Exception):
    """Raised by a source at a chosen item."""


def produce(tag, items, halt_at=-1):
    """A generator: logs each item it hands out."""
    for index, item in enumerate(items):
        if index == halt_at:
            raise Halt(tag, index)
        TRACE.append((tag, index))
        yield item


class Feed:
    """An iterator of its own: `__iter__` returns itself, `__next__` logs each item."""

    def __init__(self, tag, items, halt_at=-1):
        self.tag = tag
        self.items = list(items)
        self.halt_at = halt_at
        self.index = 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.index == self.halt_at:
            raise Halt(self.tag, self.index)
        if self.index >= len(self.items):
            raise StopIteration
        TRACE.append((self.tag, self.index))
        self.index += 1
        return self.items[self.index - 1]


class Shelf:
    """An iterable (not an iterator): each `iter()` is a new logging generator."""

    def __init__(self, tag, items, halt_at=-1):
        self.tag = tag
        self.items = items
        self.halt_at = halt_at

    def __iter__(self):
        for index, item in enumerate(self.items):
            if index == self.halt_at:
                raise Halt(self.tag, index)
            TRACE.append((self.tag, index))
            yield item


def attempt(thunk, fallback):
    """`thunk()`, or `fallback` when it raises what the sources and predicates raise."""
    try:
        return thunk()
    except (Halt, ZeroDivisionError, ValueError) as error:
        TRACE.append(("caught", type(error).__name__))
        return fallback


class Swallow:
    """Suppresses the exceptions of its kinds (counting them), lets others pass."""

    caught = 0

    def __init__(self, *kinds):
        self.kinds = kinds

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is not None and issubclass(kind, self.kinds):
            Swallow.caught += 1
            return True
        return False


def f(x, y, buf, items):
    v0 = torch.sin(x[0])
    for turn in range(3):
        try:
            if turn == 0:
                raise KeyError(turn)
            v0 = v0 + 2.0
        except KeyError as error:
            v0 = v0 * (len(str(error)) + 1)
    v1 = mod0(x)
    it0 = filter(lambda v: v % 2 == 0, produce("s0", [0, 0]))
    left0, right0 = itertools.tee(it0)
    r0 = (next(left0, None), list(right0), list(left0))
    TRACE.append(("tee", r0))
    r1 = list(itertools.chain(it0, [5]))
    TRACE.append(("chain", r1))
    TRACE.append(list(it0))
    v2 = x
    with Swallow(KeyError):
        v2 = v2 * 2.0
        {}[0]
        v2 = v2 + 100.0
    if x.shape[0] > 2:
        it1 = map(lambda v: v + 1, Feed("s1", [0, 0], 0))
        try:
            r2 = any(v == 1 for v in it1)
        except Halt as error:
            TRACE.append(("caught", type(error).__name__, error.args))
            r2 = "raised"
        TRACE.append(("any", r2))
        TRACE.append(attempt(lambda: list(it1), None))
        x = x * 0.5 + x
    return v2


def make_inputs(A, n):
    x = torch.randn(A, 2, requires_grad=True)
    y = torch.randn(1, 2)
    buf = torch.randn(A, 2)
    items = [torch.randn(2), torch.randn(2)]
    return (x, y, buf, items,)


def mutate():
    pass


CALLS = [{'A': 2, 'n': 3}, {'A': 2, 'n': 3}, {'A': 2, 'n': 3, 'mutate': True}, {'A': 5, 'n': 4}, {'A': 2, 'n': 3}]
OBSERVED = ['TRACE', 'Swallow.caught']
BREAKS = []
COMPILE_OPTIONS = {}
CONFIG = {}
