"""Found by the program generator (seed 21, program 148): mismatch under eager.

    call 0 arguments[1].requires_grad: True != False
"""
import copy
import dataclasses
import functools

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import graphwright as gw


@gw.nonstrict_trace
def traced0(t, config):
    return t * config["scale"] + config["shift"]


@gw.leaf_function(mutates_args={"buf"})
def leaf0(buf, t):
    buf.add_(t.detach().sum())
    if t.sum() > 0:  # needs data: runs at run time only
        return (t.to(t.dtype),)
    return (t.to(t.dtype),)
@leaf0.register_fake
def _(buf, t):
    return (torch.empty_like(t),)


def f(x, buf):
    v0 = traced0(x, {"scale": 2, "shift": 2.0})
    v1 = leaf0(buf, x)[0]
    return v1


def make_inputs(A, n):
    x = torch.randn(A, 3, requires_grad=True)
    buf = torch.randn(A, 3)
    return (x, buf,)


def mutate():
    pass


CALLS = [{'A': 2, 'n': 1}, {'A': 2, 'n': 1}, {'A': 2, 'n': 1, 'mutate': True}, {'A': 3, 'n': 2}, {'A': 2, 'n': 1}]
OBSERVED = []
BREAKS = []
COMPILE_OPTIONS = {}
CONFIG = {}
