"""Found by the program generator (seed 21, program 99): internal_error under eager.

    call 0: KeyError: 458 [call_routing.py:244 _calls_with_null_heads]
"""
import copy
import dataclasses
import functools

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import graphwright as gw


@gw.allow_in_graph
def fused0(t, k):
    return torch.logsumexp(t.flatten(), 0, keepdim=False).float() * k


@gw.allow_in_graph
def fused1(t, k):
    return t.mean(0, keepdim=True) * k


def helper0(t, s, k=2):
    v4 = fused0(t.mean(1, keepdim=True) / (s.unsqueeze(0).abs() + 1.0), 0.25)
    acc1 = t.mean(2, keepdim=True)
    for i1 in range(t.shape[1]):
        v5 = fused1(s - 2.0, 1.0)
        acc1 = acc1 + t.mean(2, keepdim=True) / (i1 + 1)
    return t.mean(2, keepdim=True)


def helper1(t, s, k=2):
    return s


def f(x, y, items):
    try:
        acc0 = items[0].mean(0, keepdim=True)
        for i0 in range(2):
            acc0 = acc0 * 0.5 + items[0].mean(0, keepdim=True)
        v0 = y[0]
    except IndexError:
        v0 = y[0]
    v3 = y[0]
    v6 = helper0(x.unsqueeze(0), x[0] + x[0], k=3)
    acc2 = y.unsqueeze(0)
    for i2 in range(2):
        s0 = (items[1].sum() / (v0.sum().abs() + 1.0)).sum().item()
        if s0 > 0:
            v7 = x.neg()
        else:
            v8 = y.unsqueeze(0).pow(2) + torch.nonzero(v3.unsqueeze(0) > 0).shape[0]
            v9 = v8.double()
            v7 = (x.double() > 0).to(torch.float64).to(torch.float32)
        v10 = helper1(x, v6[0])
        v11 = helper1(x, v6[0])
        acc2 = acc2 + y.unsqueeze(0) / (i2 + 1)
    return acc2
def make_inputs(A, n):
    x = torch.randn(A, 2, requires_grad=True)
    y = torch.randn(A, 4)
    items = [torch.randn(2), torch.randn(2)]
    return (x, y, items,)


def mutate():
    pass


CALLS = [{'A': 4, 'n': 1}, {'A': 4, 'n': 1}, {'A': 4, 'n': 1, 'mutate': True}, {'A': 5, 'n': 2}, {'A': 4, 'n': 1}]
OBSERVED = []
BREAKS = ['GB002', 'GB003', 'GB004']
COMPILE_OPTIONS = {}
CONFIG = {}
