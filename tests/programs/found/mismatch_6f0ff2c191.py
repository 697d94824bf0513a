"""Found by the program generator (seed 1000, program 118): mismatch under aot_eager.

    call 0 output.value: type <class 'torch.testing._internal.two_tensor.TwoTensor'> != <class
    'torch.Tensor'>
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


LAST = None


def f(x, y, items, tt):
    global LAST
    u0 = x[0].clone()
    u0.add_((y.mean(0, keepdim=True) + tt.mean(0, keepdim=True)))
    LAST = x.detach() * 2
    return u0


def make_inputs(A, n):
    x = torch.randn(A, 3, requires_grad=True)
    y = torch.randn(3)
    items = [torch.randn(3), torch.randn(3)]
    tt = TwoTensor(torch.randn(3), torch.randn(3))
    return (x, y, items, tt,)


def mutate():
    pass


CALLS = [{'A': 2, 'n': 1}, {'A': 2, 'n': 1}, {'A': 2, 'n': 1, 'mutate': True}, {'A': 3, 'n': 2}, {'A': 2, 'n': 1}]
OBSERVED = ['LAST']
BREAKS = []
COMPILE_OPTIONS = {'dynamic': False}
CONFIG = {}
