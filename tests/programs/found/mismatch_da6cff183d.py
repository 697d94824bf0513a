"""Found by the program generator (seed 4242, program 136): mismatch under aot_eager.

    call 3 output.requires_grad: False != True
"""
import copy
import dataclasses
import functools

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import graphwright as gw


def f(x, items):
    with torch.no_grad():
        if x.shape[0] <= 2:
            x = x * 0.5 + x
        v1 = x[0]
        v0 = x.flatten()
    v2 = x.flatten()
    v3 = v0.unsqueeze(0)
    return v3


def make_inputs(A, n):
    x = torch.randn(A, 3, requires_grad=True)
    items = [torch.randn(3), torch.randn(3)]
    return (x, items,)


def mutate():
    pass


CALLS = [{'A': 2, 'n': 1}, {'A': 2, 'n': 1}, {'A': 2, 'n': 1, 'mutate': True}, {'A': 3, 'n': 2}, {'A': 2, 'n': 1}]
OBSERVED = []
BREAKS = []
COMPILE_OPTIONS = {}
CONFIG = {}
