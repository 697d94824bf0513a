"""Small integer tensors whose value a graph is specialised on, and how a fake tensor carries it.

An operator that needs the value of a 0-dim integer tensor to know its output's shape (the
number of sections given to `tensor_split` as a tensor) cannot run on that tensor's fake: the
value is data. When such a tensor is an input of the graph, the strict tracer specialises on
its value, as TorchDynamo does (a graph per value, a guard that reads the value again on every
call): the fake carries the value as its answer to `.item()`, and the placeholder records it
under `VALUE_KEY`, for the fakes ahead-of-time autograd makes of the same input.

An operator that only reads the value inside its kernel (narrow's start given as a tensor)
leaves an unbacked symbol, one graph for every value. A backend that cannot branch on such a
symbol (Inductor) has its aten graphs compiled once per value instead (`value_read` finds the
inputs, `aot/compile.py`'s `_PerValueGraph` compares their values on every call). It lives in
layer 1 so that every layer reaches it.
"""
from __future__ import annotations

from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

VALUE_KEY = "graphwright_specialised_value"
"""`node.meta` key of a placeholder whose tensor's value the graph is specialised on."""


def small_integer(tensor: torch.Tensor) -> bool:
    """0-dim, integer or bool: a tensor whose value may be specialised on."""
    return tensor.dim() == 0 and not tensor.is_floating_point() and not tensor.is_complex()


def may_specialise(tensor: torch.Tensor) -> bool:
    """A tensor whose value is one cheap number to read in a guard: a small integer on the
    CPU, a plain tensor, not an inference tensor (a fake of one keeps no value)."""
    return (type(tensor) is torch.Tensor and small_integer(tensor) and tensor.device.type == "cpu"
            and not tensor.is_inference())


def carry_value(fake: Any, value: int | bool) -> None:
    """Make the fake tensor answer `.item()` (and every operator that reads it) with `value`;
    an in-place write to the fake forgets it."""
    fake.item_memo = value


def carried_value(fake: Any) -> int | bool | None:
    """The value `carry_value` gave the fake, if it still holds."""
    memo = getattr(fake, "item_memo", None)
    return memo if type(memo) in (int, bool) else None


def value_read(fake: Any) -> bool:
    """Whether an operator read the value of the fake of a small integer CPU tensor while
    tracing: its answer to `.item()` is an unbacked symbol then."""
    return isinstance(fake, torch.Tensor) and small_integer(fake) and fake.device.type == "cpu" \
        and bool(free_unbacked_symbols(getattr(fake, "item_memo", None)))
