"""Found by the program generator (seed 1000, program 176): mismatch under aot_eager.

    call 4 output.value: Tensor-likes are not close!

    Mismatched elements: 1 / 1 (100.0%)
    Greatest
    absolute difference: 0.8343589305877686 at index (0,) (up to 1e-05 allowed)
    Greatest relative
    difference: 0.2943730354309082 at index (0,) (up to 1.3e-06 allowed)
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


from torch.testing._internal.two_tensor import TwoTensor


class Affine:
    def __init__(self, scale, shift):
        self.scale = scale
        self.shift = shift

    def __call__(self, t):
        return t * self.scale + self.shift

    @property
    def doubled(self):
        return self.scale * 2

    def apply(self, t):
        return self(t).tanh() * self.doubled


AFFINE0 = Affine(2.0, 2.0)


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


@gw.nonstrict_trace
def traced0(t, config):
    return torch.sin(t) * config["scale"] + config["shift"]


def f(x, z, tt, n):
    v0 = AFFINE0(x[0])
    r0 = sum(iter([tt.mean(0, keepdim=True), tt.mean(0, keepdim=True), tt.mean(0, keepdim=True)]), tt.mean(0, keepdim=True) * 0.5)
    v1 = traced0(tt.mean(0, keepdim=True), {"scale": n, "shift": 2.0})
    return v1


def make_inputs(A, n):
    x = torch.randn(A, 4, requires_grad=True)
    z = torch.randn(A, 4, 3)
    tt = TwoTensor(torch.randn(4), torch.randn(4))
    return (x, z, tt, n,)


def mutate():
    AFFINE0.scale = 2.0


CALLS = [{'A': 2, 'n': 1}, {'A': 2, 'n': 1}, {'A': 2, 'n': 1, 'mutate': True}, {'A': 3, 'n': 2}, {'A': 2, 'n': 1}]
OBSERVED = ['TRACE']
BREAKS = []
COMPILE_OPTIONS = {}
CONFIG = {}
