"""Found by the program generator (seed 5): internal_error under aot_eager.

    call 1: RuntimeError: Trying to backward through the graph a second time (or directly access
    saved tensors after they have already been freed). Saved intermediate values of the graph are
    freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to
    backward through the graph a second time or if you need to access saved tensors after calling
    backward. [runtime.py:190 backward]
"""
import copy
import dataclasses
import functools

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import graphwright as gw


STATE = {}


@gw.allow_in_graph
def fused0(t, k):
    return t.unsqueeze(0) * k


class Gain(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, features))

    def forward(self, t):
        return t * self.weight + self.weight.sum()


mod0 = Gain(1)


def f(x, z, n):
    acc0 = 3.0 + x.flatten()
    for i0 in range(n):
        acc0 = acc0 + x.flatten() / (i0 + 1)
    STATE["last"] = acc0
    v0 = fused0(z.sum(2) / (z.sum(2).abs() + 1.0), 2.0)
    v1 = mod0(x.mean(1, keepdim=True))
    return v1


def make_inputs(A, n):
    x = torch.randn(A, 3, requires_grad=True)
    z = torch.randn(A, 3, 2)
    return (x, z, n,)


def mutate():
    pass


CALLS = [{'A': 2, 'n': 2}, {'A': 2, 'n': 2}, {'A': 2, 'n': 2, 'mutate': True}, {'A': 5, 'n': 3}, {'A': 2, 'n': 2}]
OBSERVED = ['STATE']
BREAKS = []
COMPILE_OPTIONS = {}
CONFIG = {}
