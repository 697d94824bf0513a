"""Found by the program generator (seed 20260, program 203): mismatch under eager.

    call 0 observed['TRACE']: length 2 != 3
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


def f(x):
    it0 = map(lambda v: v * 2, Feed("s0", [x, x], 0))
    try:
        r0 = torch.cat(tuple(it0))
    except Halt as error:
        TRACE.append(("caught", type(error).__name__, error.args))
        r0 = torch.cat([x] * 2)
    TRACE.append(attempt(lambda: list(it0), None))
    return r0


def make_inputs(A, n):
    x = torch.randn(A, 3, requires_grad=True)
    return (x,)


def mutate():
    pass


CALLS = [{'A': 2, 'n': 1}, {'A': 2, 'n': 1}, {'A': 2, 'n': 1, 'mutate': True}, {'A': 3, 'n': 2}, {'A': 2, 'n': 1}]
OBSERVED = ['TRACE']
BREAKS = []
COMPILE_OPTIONS = {}
CONFIG = {}
