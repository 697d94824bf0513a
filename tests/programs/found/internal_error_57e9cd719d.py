"""Found by the program generator (seed 20260, program 922): internal_error under eager.

    call 2: RuntimeError: Trying to backward through the graph a second time (or directly access
    saved tensors after they have already been freed). Saved intermediate values of the graph are
    freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to
    backward through the graph a second time or if you need to access saved tensors after calling
    backward. [leaf_op.py:363 leaf_call_backward]
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


@gw.leaf_function
def leaf0(t):
    if t.sum() > 0:  # needs data: runs at run time only
        return ((t + t).to(t.dtype) + 0.5 * t,)
    return (t.to(t.dtype) - t,)
@leaf0.register_fake
def _(t):
    return (torch.empty_like(t),)


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


from torch.testing._internal.two_tensor import TwoTensor


class TwoGain(nn.Module):
    """A parameter that is a tensor subclass: each op runs on both of its tensors."""

    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(TwoTensor(torch.linspace(0.5, 1.5, features), torch.linspace(-1.0, 1.0, features)))

    def forward(self, t):
        return t * self.weight + self.weight.sum()


mod0 = TwoGain(1)


def f(x):
    v0 = leaf0(torch.sin(x))[0]
    r0 = any(v == 1 for v in (v + 1 for v in produce("s0", [0, 0])))
    TRACE.append(("any", r0))
    v1 = torch.sin(x)
    r1 = any(v == 1 for v in (v + 1 for v in produce("s1", [0, 0, 0, 0])))
    TRACE.append(("any", r1))
    try:
        r2 = list(itertools.chain(produce("s2", [0, 0, 0], 0), [5]))
    except Halt as error:
        TRACE.append(("caught", type(error).__name__, error.args))
        r2 = "raised"
    TRACE.append(("chain", r2))
    v2 = x
    v3 = torch.sin(x).to(torch.float64) + x
    v4 = mod0(v0.mean(1, keepdim=True))
    return v4


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
