"""Found by the program generator (seed 21, program 19): internal_error under aot_eager.

    call 0: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
    [joint.py:70 joint]
"""
import copy
import dataclasses
import functools

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import graphwright as gw


class Gain(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, features))

    def forward(self, t):
        return t * self.weight + self.weight.sum()


mod0 = Gain(3)


def scaled_sum(t, scale, shift=0.0):
    return t * scale + shift


def f(x, items):
    acc0 = x.flatten()
    with torch.no_grad():
        v8 = x.unsqueeze(0)
    return {"out0": v8, "out1": acc0, "out2": 1}
def make_inputs(A, n):
    x = torch.randn(A, 3, requires_grad=True)
    items = [torch.randn(3), torch.randn(3)]
    return (x, items,)


def mutate():
    pass


CALLS = [{'A': 4, 'n': 2}, {'A': 4, 'n': 2}, {'A': 4, 'n': 2, 'mutate': True}, {'A': 6, 'n': 3}, {'A': 4, 'n': 2}]
OBSERVED = []
BREAKS = []
COMPILE_OPTIONS = {'dynamic': True}
CONFIG = {'capture_scalar_outputs': True}
