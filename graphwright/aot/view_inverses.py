"""Writes through views whose functional inverse PyTorch computes wrongly: refused.

Functionalization turns a write through a view into a new value of the view's
base, computed by the view's inverse from the view's new value. For `unfold`
the inverse is `unfold_backward`, which sums the windows into zeros: right
for a gradient, wrong for a base whose windows leave elements out (`size`
does not divide the dimension, or `step > size`) or overlap (`step < size`):
the elements no window holds would become zero, shared ones a sum. torch.compile
gives those wrong values; graphwright refuses the graph for AOT autograd
(under `fullgraph=False` it then runs as captured, with a warning).

`checked_decompositions` adds the check to the trace's decomposition table:
`unfold_backward` reaches it both as such an inverse and as unfold's gradient,
and only the first happens outside autograd's backward.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from .._core.errors import BackendRefusal
from .._core.user_stack import user_frames_of_stack

_UNFOLD_BACKWARD = torch.ops.aten.unfold_backward.default


def checked_decompositions(table: dict | None) -> dict:
    """`table` with `unfold_backward` checked before its own decomposition (if any) runs."""
    original = (table or {}).get(_UNFOLD_BACKWARD)

    def unfold_backward(grad, input_sizes, dim, size, step):
        if torch._C._current_autograd_node() is None and not _windows_tile(input_sizes[dim], size, step):
            raise _refusal(input_sizes, dim, size, step)
        return NotImplemented if original is None else original(grad, input_sizes, dim, size, step)

    return {**(table or {}), _UNFOLD_BACKWARD: unfold_backward}


def _windows_tile(length: Any, size: int, step: int) -> bool:
    """Whether `unfold(dim, size, step)` holds each element of a dimension of `length` once."""
    return size == step and statically_known_true(length % size == 0)


def _refusal(input_sizes, dim: int, size: int, step: int) -> BackendRefusal:
    return BackendRefusal(
        f"a write through `unfold({dim}, {size}, {step})` of a tensor of size {tuple(input_sizes)}: its windows "
        "do not hold each element exactly once",
        explanation="AOT autograd writes the windows back into the tensor with `unfold_backward`, which "
        "zeroes the elements no window holds and sums those several windows hold, where eager leaves "
        "them or writes them once.",
        hints=["Write through windows that tile the dimension (step == size, dividing it), or write "
               "through a clone."],
        user_stack=user_frames_of_stack(),
    )
