"""Found by the program generator (seed 20262, program 76): internal_error under aot_eager fullgraph.

    call 0: AssertionError: Expected a.storage_offset() == b.storage_offset(), got 3 != 0
    [joint.py:138 _with_gradients]
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


class TwoGain(nn.Module):
    """A parameter that is a tensor subclass: each op runs on both of its tensors."""

    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(TwoTensor(torch.linspace(0.5, 1.5, features), torch.linspace(-1.0, 1.0, features)))

    def forward(self, t):
        return t * self.weight + self.weight.sum()


mod0 = TwoGain(3)


class Gain(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, features))

    def forward(self, t):
        return t * self.weight + self.weight.sum()


mod1 = Gain(1)


def f(x, z, items, tt):
    v0 = mod0(x.amax(dim=0))
    u0 = torch.minimum(z, tt.sum()).clone(memory_format=torch.contiguous_format)
    w0 = u0.select(1, -1)
    w0[..., 0] = 0.5
    v1 = x
    o0 = (z @ v1.mean(1, keepdim=True)).detach().clone(memory_format=torch.contiguous_format)
    r0 = torch.abs(z.mean(1, keepdim=True).cos().detach(), out=o0.view(o0.shape))
    v2 = mod1(o0)
    return {"out0": v2, "out1": v1, "out2": z, "out3": w0}


def make_inputs(A, n):
    x = torch.randn(A, 3, requires_grad=True)
    z = torch.randn(2, A, requires_grad=True)
    items = [torch.randn(3), torch.randn(3)]
    tt = TwoTensor(torch.randn(3), torch.randn(3)).requires_grad_()
    return (x, z, items, tt,)


def mutate():
    pass


CALLS = [{'A': 4, 'n': 2}, {'A': 4, 'n': 2}, {'A': 4, 'n': 2, 'mutate': True}, {'A': 5, 'n': 3}, {'A': 4, 'n': 2}]
OBSERVED = []
BREAKS = []
COMPILE_OPTIONS = {'dynamic': False}
CONFIG = {}
