"""Found by the program generator (seed 21, program 6): mismatch under aot_eager.

    call 0 grads['input0']: type <class 'programs.harness.TensorState'> != <class 'NoneType'>
"""
import copy
import dataclasses
import functools

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import graphwright as gw


def make_scaler(k):
    def scale(t):
        return t * k
    return scale


class Holder:
    def __init__(self):
        self.count = 0
        self.history = []


HOLDER = Holder()


mod0 = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 4))


def f(x, y, buf):
    v0 = y.mean(1, keepdim=True)
    scaler0 = make_scaler(2)
    v1 = scaler0(x.mean(0, keepdim=True))
    v2 = x.mean(0, keepdim=True)
    if y.flatten().sum() > 0:
        v3 = v1.t()
    else:
        v4 = torch.where(buf.amax(dim=0) > 0, v0.sum(1), buf.mean())
        HOLDER.history.append((x.dim(), x.dtype))
        v3 = v1.t()
    HOLDER.last = (buf.dim(), buf.dtype)
    v5 = x.cos()
    v6 = mod0(torch.exp(torch.where(v0.sum(0) > 0, y, v0).clamp(max=2.0)))
    return v6


def make_inputs(A, n):
    x = torch.randn(A, 3, requires_grad=True)
    y = torch.randn(A, 3, requires_grad=True)
    buf = torch.randn(3)
    return (x, y, buf,)


def mutate():
    pass


CALLS = [{'A': 2, 'n': 3}, {'A': 2, 'n': 3}, {'A': 2, 'n': 3, 'mutate': True}, {'A': 5, 'n': 4}, {'A': 2, 'n': 3}]
OBSERVED = ['HOLDER']
BREAKS = ['GB002']
COMPILE_OPTIONS = {'dynamic': False}
CONFIG = {}
