"""`out=` calls while ahead-of-time autograd traces a graph: those functionalization models as
eager runs them, and those it does not.

Functionalization turns `op(..., out=o)` into the functional op and gives `o` its value, at
`o`'s logical positions. Eager's out= kernels do not all do that: some write a non-contiguous
`o` in memory order (`narrow_copy`, `avg_pool3d`) or not at all (`gelu` through oneDNN), some
restride `o` (`matmul` of a vector resizes and squeezes it) where the Python decompositions
that run under functionalization keep its strides or choose others (`svd`), and a composite
kernel may write nothing into `o` while a Python dispatch mode is active
(`linalg.matrix_rank`). `OutCallWatcher` refuses (`BackendRefusal`: the graph then runs as
captured, as eager runs it) every out= call where the two may differ: an `out` tensor that is
not contiguous, one whose layout the traced call changes, one the traced call does not write.

This module watches calls during a trace; it records nothing into the graph.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.fx.experimental.symbolic_shapes import statically_known_true
from torch.overrides import TorchFunctionMode

from .._core import artifacts
from .._core.errors import BackendRefusal
from .._core.user_stack import user_frames_of_stack


class OutCallWatcher(TorchFunctionMode):
    """Active while the graph runs functionalized: checks each call that has `out=` tensors."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        outs = _out_tensors(func, kwargs) if kwargs else []
        if not outs:
            return func(*args, **kwargs)
        for out in outs:
            if not _surely_contiguous(out):
                raise _refusal(func, "its `out` tensor is not contiguous",
                               "eager's out= kernels differ in what they write into a non-contiguous "
                               "`out` (some write it in memory order, some restride it), which "
                               "functionalization cannot tell")
        before = [(tuple(out.shape), tuple(out.stride()), _mutations(out)) for out in outs]
        result = func(*args, **kwargs)
        for out, (shape, stride, mutations) in zip(outs, before):
            if mutations is not None and _mutations(out) == mutations:
                raise _refusal(func, "the traced call writes nothing into its `out` tensor",
                               "eager's kernel writes it, but under functionalization its composite "
                               "implementation left it unwritten")
            if not _same_layout(shape, stride, out):
                raise _refusal(func, "the traced call changes the shape or strides of its `out` tensor",
                               "eager's out= kernels and the decompositions functionalization runs do "
                               "not always agree on the layout a resized or restrided `out` gets")
        return result


def _out_tensors(func: Callable, kwargs: dict) -> list[torch.Tensor]:
    """The tensors a call writes as its out= arguments: `out=` of a torch function, the
    keyword-only written arguments of an aten overload (`values=`, `indices=`...)."""
    if isinstance(func, torch._ops.OpOverload):
        names = [a.name for a in func._schema.arguments
                 if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]
    else:
        names = ["out"]
    return [t for t in pytree.tree_leaves([kwargs.get(name) for name in names]) if isinstance(t, torch.Tensor)]


def _mutations(t: torch.Tensor) -> int | None:
    """How many times the storage of the functional tensor `t` was written (None: not functional)."""
    return torch._functionalize_mutation_counter(t) if torch._is_functional_tensor(t) else None


def _surely_contiguous(t: torch.Tensor) -> bool:
    """Contiguous whatever its symbolic sizes (unknown counts as not): strides of dimensions of
    size 1 do not count, nor anything of an empty tensor."""
    if statically_known_true(t.numel() == 0):
        return True
    expected = 1
    for size, stride in reversed(list(zip(t.shape, t.stride()))):
        if not statically_known_true(size == 1) and not statically_known_true(stride == expected):
            return False
        expected = expected * size
    return True


def _same_layout(shape: Sequence[Any], stride: Sequence[Any], t: torch.Tensor) -> bool:
    if len(shape) != t.dim() or not all(statically_known_true(a == b) for a, b in zip(shape, t.shape)):
        return False
    if statically_known_true(t.numel() == 0):
        return True
    return all(statically_known_true(size == 1) or statically_known_true(a == b)
               for a, b, size in zip(stride, t.stride(), shape))


def _name(func: Callable) -> str:
    if isinstance(func, torch._ops.OpOverload):
        return str(func)
    module = getattr(func, "__module__", None) or ""
    return f"{module}.{func.__name__}" if module.startswith("torch") else getattr(func, "__name__", str(func))


def _refusal(func: Callable, what: str, why: str) -> BackendRefusal:
    graph = artifacts.scope_name() or "a captured graph"
    return BackendRefusal(
        f"AOT autograd cannot model the `out=` call of `{_name(func)}` in {graph}: {what}",
        explanation=f"Ahead-of-time autograd functionalizes out= calls; {why}.",
        hints=[
            "The graph runs as captured (as backend='eager' runs it), with the same results as eager.",
            "Call the op without `out=` and use its result (or copy it into the tensor).",
        ],
        user_stack=user_frames_of_stack(),
    )
