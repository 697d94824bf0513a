"""Found by the program generator (seed 20260, program 385): mismatch under aot_eager.

    call 0 output.stride[0]: 1 != 2
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


def f(x, items):
    o0 = x.t().detach().clone(memory_format=torch.contiguous_format)
    r0 = torch.abs(x.t().detach(), out=o0.view(o0.shape))
    return r0


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
