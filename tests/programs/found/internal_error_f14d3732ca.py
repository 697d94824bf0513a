"""Found by the program generator (seed 1000, program 9): internal_error under aot_eager.

    call 4: RuntimeError: The expanded size of the tensor (3) must match the existing size (2) at
    non-singleton dimension 0.  Target sizes: [3, 3].  Tensor sizes: [2, 1] [aot_eager.py:19 run]
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


LAST = None


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
    global LAST
    LAST = x.detach() * 2
    v0 = x
    v1 = x
    v2 = x
    v3 = mod0(x.mean(1, keepdim=True))
    return v3


def make_inputs(A, n):
    x = torch.randn(A, 3, requires_grad=True)
    return (x,)


def mutate():
    pass


CALLS = [{'A': 2, 'n': 1}, {'A': 2, 'n': 1}, {'A': 2, 'n': 1, 'mutate': True}, {'A': 3, 'n': 2}, {'A': 2, 'n': 1}]
OBSERVED = ['LAST']
BREAKS = []
COMPILE_OPTIONS = {}
CONFIG = {}
