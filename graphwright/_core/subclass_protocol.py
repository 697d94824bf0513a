"""The tensor-subclass protocol as graphwright reads it.

A traceable wrapper subclass (PyTorch's TwoTensor, DTensor, a jagged nested
tensor, a user's scaled tensor) is a `_make_wrapper_subclass` tensor whose
`__tensor_flatten__` names its inner tensors (attributes) and returns a
constant context, and whose `__tensor_unflatten__(inner, context, outer_size,
outer_stride)` rebuilds it. What a compiled graph specialises on is its class,
those attribute names and that context, and its inner tensors' metadata.

The strict tracer's guards and AOT autograd's desugaring both read subclasses
through this module; it reads, it never builds a tensor or traces.
"""
from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass


def is_wrapper_subclass(value: Any) -> bool:
    """A tensor of a traceable wrapper subclass (`__tensor_flatten__` and `__tensor_unflatten__`)."""
    return isinstance(value, torch.Tensor) and type(value) is not torch.Tensor \
        and is_traceable_wrapper_subclass(value)


def is_wrapper_subclass_type(cls: type) -> bool:
    """A tensor class whose instances are traceable wrapper subclasses."""
    return isinstance(cls, type) and issubclass(cls, torch.Tensor) and cls is not torch.Tensor \
        and hasattr(cls, "__tensor_flatten__") and hasattr(cls, "__tensor_unflatten__")


def has_own_dispatch(cls: type) -> bool:
    """Whether tensors of `cls` run Python of their own (`__torch_dispatch__`) on every aten op."""
    return cls.__torch_dispatch__ is not torch.Tensor.__torch_dispatch__


def flatten_signature(tensor: torch.Tensor) -> tuple[tuple[str, ...], Any]:
    """The inner attribute names and the constant context `__tensor_flatten__` gives."""
    attributes, context = tensor.__tensor_flatten__()
    return tuple(attributes), context


def inner_tensors(tensor: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """The (attribute, inner tensor) pairs of a wrapper subclass tensor, one level down."""
    return [(name, getattr(tensor, name)) for name in tensor.__tensor_flatten__()[0]]


def overrides_torch_function(cls: type) -> bool:
    """A Python tensor subclass whose operations go through its `__torch_function__` (not an
    nn.Parameter, whose `__torch_function__` is disabled, nor a traceable wrapper subclass, whose
    `__torch_dispatch__` decides)."""
    return cls is not torch.Tensor and issubclass(cls, torch.Tensor) \
        and cls.__torch_function__ is not torch._C._disabled_torch_function_impl \
        and not is_wrapper_subclass_type(cls)
