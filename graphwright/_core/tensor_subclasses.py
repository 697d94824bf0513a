"""Tensor subclasses that run Python of their own on every aten operation.

A subclass with a `__torch_dispatch__` of its own (TwoTensor, DTensor, a jagged nested
tensor) decides what each operator does with the tensors it holds. Ahead-of-time
autograd cannot trace it into plain aten graphs, and a custom operator called with one
runs once per tensor it holds, not once on it (as a `leaf_function` call would). Plain
tensors, fake tensors, `nn.Parameter` and subclasses without such a method behave as
plain tensors.
"""
from __future__ import annotations

from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor


def dispatches_itself(value: Any) -> bool:
    """Is `value` a tensor whose class has a `__torch_dispatch__` of its own?"""
    if not isinstance(value, torch.Tensor) or type(value) is torch.Tensor or isinstance(value, FakeTensor):
        return False
    return type(value).__torch_dispatch__ is not torch.Tensor.__torch_dispatch__
