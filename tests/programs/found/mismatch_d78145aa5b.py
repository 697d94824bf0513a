"""Found by the program generator (seed 4242, program 136): mismatch under aot_eager.

    call 0 output.requires_grad: False != True
"""
import copy
import dataclasses
import functools

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import graphwright as gw


def f(x, y, items):
    v0 = x[0]
    with torch.no_grad():
        v1 = x.flatten()
    v2 = x.flatten()
    v3 = x.flatten()
    items0 = [y.flatten(), v1]
    v4 = sum(items0)
    return v4


def make_inputs(A, n):
    x = torch.randn(A, 3, requires_grad=True)
    y = torch.randn(A, 3)
    items = [torch.randn(3), torch.randn(3)]
    return (x, y, items,)


def mutate():
    pass


CALLS = [{'A': 2, 'n': 1}, {'A': 2, 'n': 1}, {'A': 2, 'n': 1, 'mutate': True}, {'A': 3, 'n': 2}, {'A': 2, 'n': 1}]
OBSERVED = []
BREAKS = []
COMPILE_OPTIONS = {}
CONFIG = {}
