"""Found by the program generator (seed 5, program 38): mismatch under aot_eager.

    call 0 output: type <class 'programs.harness.SubclassState'> != <class
    'programs.harness.TensorState'>

    Found on the branch before main's `subfix` merge (in-place calls on plain tensors with
    subclass arguments dispatch to the subclass first); passes on the merged code.
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


def f(x, tt):
    o0 = x.flatten().detach().clone(memory_format=torch.contiguous_format)
    r0 = torch.add(x.flatten().detach(), tt.mean(0, keepdim=True).detach(), out=o0.view(o0.shape))
    return r0


def make_inputs(A, n):
    x = torch.randn(A, 3, requires_grad=True)
    tt = TwoTensor(torch.randn(3), torch.randn(3))
    return (x, tt,)


def mutate():
    pass


CALLS = [{'A': 2, 'n': 1}, {'A': 2, 'n': 1}, {'A': 2, 'n': 1, 'mutate': True}, {'A': 3, 'n': 2}, {'A': 2, 'n': 1}]
OBSERVED = []
BREAKS = []
COMPILE_OPTIONS = {}
CONFIG = {}
