"""Found by the program generator (seed 1000, program 222): mismatch under aot_eager.

    call 0 output[1].value: dtype torch.float32 != torch.int32
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


def f(x, buf):
    w0 = buf.view(torch.int32)
    w0.zero_()
    return (buf, w0,)


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
