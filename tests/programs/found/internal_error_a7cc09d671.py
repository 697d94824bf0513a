"""Found by the program generator (seed 20262, program 92): internal_error under aot_eager.

    call 0: BackendError: The gradient of differentiable output 0 of a compiled graph is a
    `TwoTensor`, but the output is a plain tensor and its backward was compiled for a plain gradient
    [subclasses.py:262 check_plain_tangents]
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


def f(x, y, z, buf, items, tt):
    v0 = x.mean(1, keepdim=True)
    return (v0, tt,)


def make_inputs(A, n):
    x = torch.randn(A, 3, requires_grad=True)
    y = torch.randn(A, 3)
    z = torch.randn(A, 3, 4)
    buf = torch.randn(A, 3)
    items = [torch.randn(3), torch.randn(3)]
    tt = TwoTensor(torch.randn(A, 3), torch.randn(A, 3)).requires_grad_()
    return (x, y, z, buf, items, tt,)


def mutate():
    pass


CALLS = [{'A': 2, 'n': 1}, {'A': 2, 'n': 1}, {'A': 2, 'n': 1, 'mutate': True}, {'A': 3, 'n': 2}, {'A': 2, 'n': 1}]
OBSERVED = []
BREAKS = []
COMPILE_OPTIONS = {}
CONFIG = {}
