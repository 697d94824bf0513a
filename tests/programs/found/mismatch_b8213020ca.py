"""Found by the program generator (seed 20260, program 212): mismatch under eager.

    call 0 printed: 'leaf torch.Size([2, 3]) torch.float32\nleaf torch.Size([2, 3]) torch.float32\n'
    != 'leaf torch.Size([2, 3]) torch.float32\n'
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


@gw.leaf_function(mutates_args={"buf"})
def leaf0(buf, t):
    buf.add_(t.detach().sum())
    print("leaf", t.shape, t.dtype)
    if t.sum() > 0:  # needs data: runs at run time only
        return (t.to(t.dtype) + 0.5 * t,)
    return (t.to(t.dtype) - t,)
@leaf0.register_fake
def _(buf, t):
    return (torch.empty_like(t),)


def f(x, y, tt):
    v0 = leaf0(tt, x)[0]
    v1 = x
    return v1


def make_inputs(A, n):
    x = torch.randn(A, 3, requires_grad=True)
    y = torch.randn(A, 3, requires_grad=True)
    tt = TwoTensor(torch.randn(A, 3), torch.randn(A, 3))
    return (x, y, tt,)


def mutate():
    pass


CALLS = [{'A': 2, 'n': 1}, {'A': 2, 'n': 1}, {'A': 2, 'n': 1, 'mutate': True}, {'A': 3, 'n': 2}, {'A': 2, 'n': 1}]
OBSERVED = []
BREAKS = []
COMPILE_OPTIONS = {}
CONFIG = {}
