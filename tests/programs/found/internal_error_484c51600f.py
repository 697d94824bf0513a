"""Found by the program generator (seed 20262, program 60): internal_error under aot_eager.

    call 0: RuntimeError: self.stride(-1) must be 1 to view Float as BFloat16 (different element
    sizes), but got 3 [views.py:209 <lambda>]
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


@gw.allow_in_graph
def fused0(t, k):
    return (-1.5 - (t - t.mean(0, keepdim=True))) * k


from torch.testing._internal.two_tensor import TwoTensor


class TwoGain(nn.Module):
    """A parameter that is a tensor subclass: each op runs on both of its tensors."""

    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(TwoTensor(torch.linspace(0.5, 1.5, features), torch.linspace(-1.0, 1.0, features)))

    def forward(self, t):
        return t * self.weight + self.weight.sum()


mod0 = TwoGain(1)


def f(x, y, n):
    o0 = x.t().detach().clone(memory_format=torch.contiguous_format)
    r0 = torch.mm((x.mean(1, keepdim=True) - y.amax(dim=1)).detach(), ((torch.erf(x.mean(0, keepdim=True)) * 3.0).floor().long() % 3).to(torch.float32).detach(), out=o0.t())
    def gen0(values):
        for index, value in enumerate(values):
            TRACE.append(("s0", index))
            yield value
    it0 = gen0([0, n, 4])
    r1 = next(it0, None)
    TRACE.append(("next", r1))
    r2 = list(map(lambda a, b: a * b, it0, [1, 2]))
    TRACE.append(("map", r2))
    TRACE.append(list(it0))
    w0 = o0.contiguous().view(torch.bfloat16)
    if o0.numel() > 6:
        r3 = torch.stack(list(Shelf("s1", [x.unsqueeze(0) * 2.0, (x.unsqueeze(0) > 0).to(torch.float32)])))
        v1 = fused0(r3.mean(2, keepdim=True), 3.0)
        v0 = o0.amax(dim=1)
    else:
        v0 = torch.where(y.sum(0) > y.amax(dim=1), y.sum(0), y.amax(dim=1))
    u0 = o0.unsqueeze(0)[torch.arange(o0.unsqueeze(0).shape[0]) % o0.unsqueeze(0).shape[0]].clone(memory_format=torch.contiguous_format)
    w1 = u0.view(u0.shape)
    w1.add_((r0.sum() > 0).to(torch.float32))
    u1 = torch.where(w1.mean() > 0, ((v0.sum(0) * 3.0).floor().long() % 3).to(torch.float32), o0.mean().to(torch.float32)).clone(memory_format=torch.contiguous_format)
    w2 = u1.view(torch.int32)
    w2.bitwise_and_(2147483647)
    v2 = mod0(u0.mean(2, keepdim=True))
    return (v2, r0, w0, w1, w2,)


def make_inputs(A, n):
    x = torch.randn(A, 3, requires_grad=True)
    y = torch.randn(1, 3, requires_grad=True)
    return (x, y, n,)


def mutate():
    pass


CALLS = [{'A': 2, 'n': 3}, {'A': 2, 'n': 3}, {'A': 2, 'n': 3, 'mutate': True}, {'A': 3, 'n': 4}, {'A': 2, 'n': 3}]
OBSERVED = ['TRACE']
BREAKS = []
COMPILE_OPTIONS = {'dynamic': True}
CONFIG = {'capture_scalar_outputs': True, 'capture_dynamic_output_shape_ops': True}
