"""Found by the program generator (seed 31, program 87): internal_error under eager.

    graphwright could not split f at a graph break, running it eagerly: Explanation: The tracer
    failed on this line: TypeError: arg 5 (closure) must be tuple
"""
import copy
import dataclasses
import functools

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import graphwright as gw


class Holder:
    def __init__(self):
        self.count = 0
        self.history = []


HOLDER = Holder()


def f(x):
    fn0 = lambda t0: x
    v0 = sum(map(fn0, [x, x * 2]))
    HOLDER.last = "size %d" % x.numel()
    return v0


def make_inputs(A, n):
    x = torch.randn(A, 3, requires_grad=True)
    return (x,)


def mutate():
    pass


CALLS = [{'A': 2, 'n': 1}, {'A': 2, 'n': 1}, {'A': 2, 'n': 1, 'mutate': True}, {'A': 3, 'n': 2}, {'A': 2, 'n': 1}]
OBSERVED = ['HOLDER']
BREAKS = []
COMPILE_OPTIONS = {}
CONFIG = {}
