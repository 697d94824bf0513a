"""Found by the program generator (seed 20260, program 669): mismatch under aot_eager.

    call 0 arguments[2].value: Tensor-likes are not close!

    Mismatched elements: 1 / 3 (33.3%)
    Greatest absolute difference: 0.6587435007095337 at index (2,) (up to 1e-05 allowed)
    Greatest
    relative difference: 1.0 at index (2,) (up to 1.3e-06 allowed)
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


def f(x, y, buf):
    w0 = buf.unfold(0, 2, 2)
    w0.mul_(2.0)
    return w0


def make_inputs(A, n):
    x = torch.randn(A, 3, requires_grad=True)
    y = torch.randn(A, 3, requires_grad=True)
    buf = torch.randn(3)
    return (x, y, buf,)


def mutate():
    pass


CALLS = [{'A': 2, 'n': 1}, {'A': 2, 'n': 1}, {'A': 2, 'n': 1, 'mutate': True}, {'A': 3, 'n': 2}, {'A': 2, 'n': 1}]
OBSERVED = []
BREAKS = []
COMPILE_OPTIONS = {}
CONFIG = {}
