"""What a user can observe of a tensor besides its values: layout, storage sharing, aliasing.

The helpers copy a sample's inputs so that two runs see identical tensors (sizes, strides,
storage offsets, and which inputs share a storage), and compare two runs' tensors the way a
program could tell them apart.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree


def clone_inputs(tree: Any) -> Any:
    """A copy of `tree` whose tensors have fresh storages with the same layout.

    Tensors that share a storage in `tree` share one copied storage, so a view passed next
    to its base stays its view. Tensors that required grad are leaves requiring grad.
    """
    storages: dict[tuple[int, int], torch.UntypedStorage] = {}

    def clone(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        if t.layout != torch.strided:
            copy = t.detach().clone()
        else:
            storage = t.untyped_storage()
            key = (storage.data_ptr(), storage.nbytes())
            if key not in storages:
                storages[key] = storage.clone()
            copy = torch.empty((0,), dtype=t.dtype, device=t.device)
            with torch.no_grad():
                copy.set_(storages[key], t.storage_offset(), t.size(), t.stride())
            if t.is_conj():
                copy = copy.conj()
            if t.is_neg():
                copy = copy._neg_view()
        return copy.requires_grad_(t.requires_grad)

    return pytree.tree_map(clone, tree)


def significant_strides(t: torch.Tensor) -> tuple[int | None, ...]:
    """Strides a program can observe through indexing: those of dimensions longer than one,
    none for an empty tensor (as PyTorch's own stride checks compare them)."""
    if t.numel() == 0:
        return ()
    return tuple(stride if size > 1 else None for size, stride in zip(t.shape, t.stride()))


def storage_key(t: torch.Tensor) -> int | None:
    """Identifies `t`'s storage (None for tensors without one, e.g. sparse)."""
    if t.layout != torch.strided:
        return None
    return t.untyped_storage().data_ptr() if t.untyped_storage().nbytes() else None


def alias_map(outputs: list[Any], inputs: list[Any]) -> list[int | None]:
    """For each output, the index of the first input tensor whose storage it shares (None:
    its own storage). Non-tensors map to None."""
    keys = [storage_key(t) if isinstance(t, torch.Tensor) else None for t in inputs]
    result = []
    for out in outputs:
        key = storage_key(out) if isinstance(out, torch.Tensor) else None
        result.append(keys.index(key) if key is not None and key in keys else None)
    return result


def pattern(t: torch.Tensor) -> torch.Tensor:
    """Distinct small values in `t`'s shape and dtype, written through an alias to see where
    they land."""
    values = torch.arange(1, t.numel() + 1).remainder(7).add(1).reshape(t.shape)
    return values.to(t.dtype)


def describe_difference(expected: Any, actual: Any, *, rtol: float, atol: float,
                        values: bool = True, strides: bool = True) -> str | None:
    """What tells `actual` apart from `expected` (None when nothing does): pytree structure,
    then per tensor dtype, sizes, significant strides, storage offset and values (NaN equal
    to NaN, `rtol`/`atol` as `torch.testing.assert_close`; not with `values=False`, for ops
    whose values are random or uninitialized; strides not with `strides=False`); other leaves
    by equality."""
    flat_expected, spec_expected = pytree.tree_flatten(expected)
    flat_actual, spec_actual = pytree.tree_flatten(actual)
    if spec_expected != spec_actual:
        return f"structure {spec_actual} != eager's {spec_expected}"
    for i, (e, a) in enumerate(zip(flat_expected, flat_actual)):
        where = f"output {i}" if len(flat_expected) > 1 else "output"
        problem = _leaf_difference(e, a, rtol=rtol, atol=atol, values=values, strides=strides)
        if problem:
            return f"{where}: {problem}"
    return None


def _leaf_difference(e: Any, a: Any, *, rtol: float, atol: float, values: bool,
                     strides: bool) -> str | None:
    if isinstance(e, torch.Tensor) != isinstance(a, torch.Tensor):
        return f"type {type(a).__name__} != eager's {type(e).__name__}"
    if not isinstance(e, torch.Tensor):
        if type(e) is not type(a):
            return f"type {type(a).__name__} != eager's {type(e).__name__}"
        if isinstance(e, float) and e != e and a != a:
            return None
        return None if e == a or not values else f"value {a!r} != eager's {e!r}"
    if e.dtype != a.dtype:
        return f"dtype {a.dtype} != eager's {e.dtype}"
    if e.shape != a.shape:
        return f"shape {tuple(a.shape)} != eager's {tuple(e.shape)}"
    if e.layout != a.layout:
        return f"layout {a.layout} != eager's {e.layout}"
    if e.requires_grad != a.requires_grad:
        return f"requires_grad {a.requires_grad} != eager's {e.requires_grad}"
    if strides and e.layout == torch.strided:
        if significant_strides(e) != significant_strides(a):
            return f"strides {a.stride()} != eager's {e.stride()} (sizes {tuple(e.shape)})"
        if e.storage_offset() != a.storage_offset():
            return f"storage offset {a.storage_offset()} != eager's {e.storage_offset()}"
    if e.is_conj() != a.is_conj() or e.is_neg() != a.is_neg():
        return "conjugate/negative bit differs from eager's"
    if not values:
        return None
    try:
        torch.testing.assert_close(a.detach(), e.detach(), rtol=rtol, atol=atol, equal_nan=True,
                                   check_stride=False, check_layout=False)
    except AssertionError as error:
        return "values differ: " + " ".join(str(error).split())[:300]
    return None
